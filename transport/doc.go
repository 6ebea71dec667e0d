// Package transport is a dispatch-aware [net/http.RoundTripper] for the
// Telegram Bot API: it tells a request that provably never left this process
// ([NotDispatchedError]) from one whose outcome is unknown.
package transport
