// Package intake receives Telegram updates durably and handles each one at
// least once.
//
// An update is written to a [Store] before Telegram is answered, then handled
// outside the request by a [Runner] under a renewable lease. Stores come in
// three capability levels, each a Go interface the [Runner] detects once at
// construction: [Store] (the six atomic steps), [FencedStore] (claims with a
// persisted [Identity] that fences every write) and [DurableStore] (a terminal
// failure kept as an exhaustion record until acknowledged).
package intake
