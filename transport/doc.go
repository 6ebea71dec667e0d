// Package transport is a dispatch-aware [net/http.RoundTripper] for the
// Telegram Bot API, usable as the http.Client of any Go Telegram library.
//
// Build a client with [NewClient] and hand it to the library:
//
//	client, err := transport.NewClient(transport.Config{})
//	b, err := bot.New(token, bot.WithHTTPClient(time.Minute, client))    // go-telegram/bot
//	b, err := telego.NewBot(token, telego.WithHTTPClient(client))         // telego (net/http instead of fasthttp)
//	api, err := tgbotapi.NewBotAPIWithClient(token, tgbotapi.APIEndpoint, client) // go-telegram-bot-api
//
// Inside an intake handler, pass the handler's context to the library's
// call: the intake runner then learns from the transport, whatever error
// the library returns, whether a send's outcome was unknown and what
// Telegram answered ([WithResultFunc]).
//
// Every call ends in one of three outcomes:
//
//   - an answer (any status): Telegram's own word;
//   - a [*NotDispatchedError]: no byte of the request reached a socket, so
//     sending it again cannot duplicate it (DNS failure, refused or
//     black-holed connections, a proxy refusing CONNECT, a failed TLS
//     handshake, an unreadable body, a context ended before the write);
//   - an [*OutcomeUnknownError]: the request was at least partly handed to
//     the socket and may have arrived. Its outcome is unknown; never repeat
//     it blindly.
//
// Code that only needs to recognise these outcomes, for any transport and
// through any wrapping, uses errors.As with interface{ NotDispatched() bool }
// or interface{ OutcomeUnknown() bool }.
//
// # Why the HTTP/1.1 exchange is our own
//
// Go's [net/http.Transport] knows internally when nothing of a request was
// written (it uses that to retry on reused connections), but it unwraps that
// knowledge before returning, and its write loop runs on another goroutine,
// so a byte counter read when RoundTrip returns can be stale. Instead this
// package owns the exchange and keeps the proof in one goroutine:
//
//   - the request head and body are serialised into memory before any
//     connection is sought (so an unreadable body is stage request);
//   - each connection's raw TCP socket (beneath TLS and any proxy tunnel) is
//     wrapped in a counter of the bytes the kernel accepted from Write;
//   - the request is written by the calling goroutine with one Write; the
//     counter's difference across that Write is this request's bytes, so
//     "no byte of THIS request" is decided exactly, also on a reused
//     connection; a context ending mid-write only sets a past deadline, and
//     the counter still tells;
//   - the answer is parsed with [net/http.ReadResponse] (status line,
//     headers, Content-Length, chunked, 204/304, end-of-connection framing)
//     over a byte-limited reader, 1xx interim answers are skipped, and the
//     whole body is read into memory within the response timeout.
//
// HTTP/2 is never negotiated: it multiplexes requests on one connection,
// which would destroy per-request attribution.
//
// # Connections
//
// A new connection is established within one budget (Config.ConnectTimeout)
// covering the lookup, the connection race, the proxy CONNECT and the TLS
// handshake. The race follows RFC 8305: A and AAAA are looked up
// concurrently, with a 50 ms Resolution Delay for a late AAAA; families are
// interleaved, IPv6 first; a new attempt starts every 250 ms without
// cancelling the earlier ones, and at once when one fails; the first attempt
// to complete, TLS handshake included, wins and the others are closed.
//
// Idle connections are reused (keep-alive), one request per connection at a
// time, up to Config.MaxIdleConnsPerHost per destination and for
// Config.IdleConnTimeout. Before reuse, a connection is checked without
// blocking (a peek at the socket): one the server has closed or written to
// is discarded. If a reused connection still fails before any byte of the
// request reached it, the request is written on a new connection instead;
// nothing had left, so this is not a repetition. A server closing the
// connection between that check and the write is an unavoidable race: the
// bytes reached the kernel, so the outcome is reported unknown. The idle
// timeout default is kept well below common server keep-alive timeouts to
// make it rare.
//
// # Proxies
//
// By default the proxy comes from the environment (HTTPS_PROXY, HTTP_PROXY,
// NO_PROXY). An http or https proxy is always used through a CONNECT tunnel,
// also for plain-http URLs, so the boundary stays after the tunnel is up: a
// proxy's refusal is not dispatched (stage proxy).
//
// # Bounds
//
// The connect budget (default 5 s), the response timeout (default 30 s from
// the first request byte to the end of the answer; per call with
// [WithResponseTimeout]), the response size (default 1 MiB, head and body),
// the request size (default 50 MiB), the idle pool and 8 interim answers are
// all finite; the request's context ends every wait.
//
// # Secrets
//
// The Bot API carries the token in the URL path. No error of this package
// quotes a URL, a proxy URL or a proxy's credentials, nor the bytes of a
// malformed answer (a server may echo the request line, token included). Note that
// [net/http.Client] wraps errors in a [*net/url.Error] that does quote the
// URL.
package transport
