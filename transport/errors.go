package transport

import (
	"errors"
	"fmt"
)

// Stage names the step a request had reached when it failed without a
// single byte of it reaching a socket. It appears in [NotDispatchedError].
type Stage string

// The stages of a request before its first byte is written, in the order a
// request passes them (StageRequest also covers a write that failed before
// the socket accepted any byte).
const (
	// StageRequest: the request itself could not be prepared (an
	// unsupported URL scheme, an invalid header, a body that could not be
	// read or was too large, a caller's context ended before the connection
	// was sought), or writing it on an established connection failed before
	// the socket accepted any byte of it.
	StageRequest Stage = "request"
	// StageLookup: the host name could not be resolved (resolver error, no
	// address, or the connect budget ended during the lookup).
	StageLookup Stage = "lookup"
	// StageConnect: no TCP connection could be established to any address
	// (refused, unreachable, or the connect budget ended).
	StageConnect Stage = "connect"
	// StageProxy: the HTTP proxy refused or failed the CONNECT tunnel.
	StageProxy Stage = "proxy"
	// StageTLS: the TLS handshake failed (for example an untrusted
	// certificate). No application data is sent before it completes.
	StageTLS Stage = "tls"
)

// NotDispatchedError reports that a request provably never left this
// process: no byte of it reached a socket, so sending it again cannot
// duplicate it. [Transport.RoundTrip] returns it only in that case; every
// failure after the first byte is an [*OutcomeUnknownError].
//
// Its message names the stage and the cause, never the URL, so it never holds
// the bot token (which the Bot API carries in the URL path) nor a proxy's
// credentials. Test for it with errors.As, or through the NotDispatched method,
// which lets packages recognise not-dispatched errors of any transport with
// errors.As to interface{ NotDispatched() bool }.
type NotDispatchedError struct {
	// Stage is the step the request had reached.
	Stage Stage
	// Err is the cause. It may be nil.
	Err error
}

// Error describes the failure without any URL.
func (e *NotDispatchedError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("transport: request not dispatched (%s)", e.Stage)
	}
	return fmt.Sprintf("transport: request not dispatched (%s): %v", e.Stage, e.Err)
}

// Unwrap returns the cause.
func (e *NotDispatchedError) Unwrap() error { return e.Err }

// NotDispatched reports true: the request never left this process. It is the
// method other packages detect (errors.As to interface{ NotDispatched() bool })
// so that any transport can mark its own errors the same way.
func (e *NotDispatchedError) NotDispatched() bool { return true }

// OutcomeUnknownError reports that a request was at least partly handed to
// a socket and no complete answer ended it: it may have arrived, and
// Telegram may have acted on it. Never repeat such a request blindly.
// [Transport.RoundTrip] returns it for every failure after the first byte.
//
// Like [NotDispatchedError], it is recognised through any wrapping by its
// method: errors.As to interface{ OutcomeUnknown() bool }. A RoundTripper
// that keeps a replay journal (tgrelay's gateway), where repeating the
// request returns the recorded answer instead of sending it twice, marks
// its errors with a ReplaySafe() bool method returning true; such a
// failure may be repeated. Its message names the cause, never the URL.
type OutcomeUnknownError struct {
	// Err is the cause (a reset connection, a response timeout, a context
	// that ended mid-exchange).
	Err error
}

// Error describes the failure without any URL.
func (e *OutcomeUnknownError) Error() string {
	if e.Err == nil {
		return "transport: request sent, outcome unknown"
	}
	return "transport: request sent, outcome unknown: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// OutcomeUnknown reports true: the request may have arrived. It is the
// method other packages detect (errors.As to
// interface{ OutcomeUnknown() bool }).
func (e *OutcomeUnknownError) OutcomeUnknown() bool { return true }

// Sentinel causes, found with errors.Is inside the errors RoundTrip returns.
var (
	// ErrResponseTooLarge: the answer (head and body) exceeded
	// Config.MaxResponseBytes. The request was sent: the outcome is unknown.
	ErrResponseTooLarge = errors.New("transport: response too large")
	// ErrResponseTimeout: the answer did not end within the response
	// timeout. The request was sent: the outcome is unknown.
	ErrResponseTimeout = errors.New("transport: response timeout")
	// ErrConnectTimeout: the connect budget (lookup, connect, proxy and TLS
	// together) ran out. It appears inside a [NotDispatchedError].
	ErrConnectTimeout = errors.New("transport: connect budget exhausted")
	// ErrRequestTooLarge: the request body exceeded Config.MaxRequestBytes.
	// It appears inside a [NotDispatchedError] with stage request.
	ErrRequestTooLarge = errors.New("transport: request body too large")
	// ErrNoAddress: the lookup returned no address.
	ErrNoAddress = errors.New("transport: lookup returned no address")
	// ErrUnsupportedScheme: the URL (or proxy URL) scheme is not supported.
	ErrUnsupportedScheme = errors.New("transport: unsupported scheme")
)
