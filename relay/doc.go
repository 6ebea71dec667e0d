// Package relay is the tgrelay sidecar as a library: it receives a bot's
// updates, records each one durably before Telegram is answered, forwards
// it to the bot's own HTTP endpoint until the endpoint accepts it, and
// gives the bot a Bot API of its own (the gateway) whose sends keep
// Telegram's limits, report honest outcomes and are fenced by the update's
// attempt. tgrelay serve is this package with flags.
//
// A relay is a [Config], [New] and [Relay.Run]:
//
//	store, err := sqlitestore.Open(ctx, "tgrelay.db", sqlitestore.Config{})
//	defer store.Close() // after Run returns: the relay never closes its store
//	r, err := relay.New(relay.Config{
//		Token:     token,                  // from BotFather
//		Store:     store,                  // sqlitestore, pgstore or memstore
//		Secret:    secret,                 // the webhook secret
//		PublicURL: "https://bot.example.org/telegram",
//		Forward:   forward.Config{URL: "http://127.0.0.1:3000/update"},
//	})
//	err = r.Run(ctx) // until ctx ends; then stop receiving, drain, stop
//
// The bot's endpoint receives each update as Telegram's JSON with the
// attempt's identity in headers (Tgrelay-Update-Id, Tgrelay-Attempt,
// Tgrelay-Claim-Id), and the API root to send its replies through in
// Tgrelay-Api-Root. It answers 2xx to complete the update, 5xx (or a
// timeout) to have it retried with backoff, 429 or 503 with Retry-After to
// have it retried then, and another 4xx to give it up as an exhaustion.
// The example below runs the whole loop offline.
//
// # What a relay runs
//
//   - Receiving: the webhook (Config.Listen, Config.Path, Config.Secret;
//     HTTPS with Config.TLSConfig) or long polling (Config.Poll). With
//     Config.PublicURL the relay claims the bot's webhook registration on
//     start and checks it stays its own (package hookowner).
//   - The intake runner (package intake) over Config.Store: at least once,
//     in order per chat, retries, leases, heartbeats, exhaustions, and the
//     deadlines of callback, inline, pre-checkout and shipping queries.
//   - The forward (package forward) to Config.Forward.URL, and exhaustions
//     to Config.Forward.ExhaustionURL until the app acknowledges them.
//   - The gateway (package gateway), on by default on a loopback port
//     ([Relay.GatewayURL]): calls the app makes under an update's announced
//     root are refused once that attempt is stale, journaled in the store,
//     and replayed to a retry instead of being sent twice. Webhook replies
//     (a Bot API call in the forward's answer body) are performed through
//     it. Safe declines answer a query the app has not answered in time
//     ([DeclineConfig]).
//   - The admin listener (Config.AdminListen): /healthz, /readyz, the
//     handlers mounted with [Relay.HandleAdmin] (metrics), and the
//     dashboard (Config.Dashboard).
//
// # Lifecycle
//
// [New] copies and validates the whole configuration ([Config.Validate],
// which does no I/O); an invalid field is a [*ConfigError] whose Field is
// its path, such as "Intake.LeaseDuration". Nothing listens or calls
// Telegram before [Relay.Run], which starts
// everything, and returns when ctx ends (nil) or a part fails (the
// failure). Stopping is in order: stop receiving, drain the handlers in
// flight for Config.DrainTimeout, cancel what is left (it is retried
// later, from the store), stop the gateway once its outcomes are
// journaled. [Relay.Close] does the same for a relay started with
// [Relay.Start], bounded by its context as well as DrainTimeout. The relay
// never closes its store: close it after Run returns. A relay runs once.
//
// # Watching it
//
// Every event (accepted, forwarded, failed, exhausted, expired, a store
// error, a webhook check, a gateway call) goes to Config.Observer; the
// command's Prometheus metrics are one such observer. [Relay.Status],
// [Relay.Stats], [Relay.App] and [Relay.Journal] are read-only views for
// status pages and tools. Logs go to Config.Logger, with the bot token
// and the webhook secret redacted.
//
// With Config.TracerProvider, each update is one OpenTelemetry trace (its
// ids derived from the bot and the update id, so every process and
// attempt lands in it): its receive and store, each attempt's forward
// (carrying W3C traceparent), the app's gateway calls and Telegram's
// answers. Hand [TraceIDGenerator] to the SDK so that the receive is the
// trace's root. The relay uses the OpenTelemetry API only.
package relay
