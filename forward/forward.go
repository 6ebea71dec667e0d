// Package forward hands stored updates to a bot's own HTTP endpoint, in any
// language, with the attempt's claim identity, and turns the endpoint's answer
// into the intake's outcome.
//
// A [Forwarder] is an [intake.Config.AttemptHandler]: each attempt POSTs the
// raw update body to the endpoint with three headers, [wire.HeaderUpdateID],
// [wire.HeaderAttempt] and [wire.HeaderClaimID]. The endpoint persists all three with
// its own database write and fences that write with the store's check in the
// same transaction (with PostgreSQL, the SQL function the schema defines), so
// a stale attempt can never write.
//
// Every answer's status, a few of its headers (Content-Type, Retry-After,
// WWW-Authenticate, Location, X-Request-Id) and the start of its body (at most [intake.MaxAttemptBody] bytes)
// are reported to the intake ([intake.ReportAnswer]), which masks them and
// keeps them in the attempt's record ([intake.AttemptRecord]).
//
// The answer decides what happens next:
//
//   - 2xx: the update is completed. A 2xx whose body ends before its end
//     (the connection closed, or the timeout struck mid-body) is retried as
//     a connection error: a webhook reply in it would be lost.
//   - 429 or 503 with a Retry-After header: tried again after that wait.
//   - 401 or 403: the endpoint refused the forward's credentials, a
//     configuration problem (most often its framework's secret check and
//     [Config.AppSecretToken] disagree), not a bad update: an [*AuthError],
//     tried again after [AuthRetryDelay] rather than given up at once (on
//     its own, each such attempt still counts against the intake's
//     ceiling). Package relay holds such an update within its attempt
//     instead, so the refusals spend none of its attempts.
//   - Any other 4xx: the endpoint refused it for good; no further attempts,
//     the update becomes an exhaustion.
//   - 5xx, 429 or 503 without Retry-After, a timeout or a connection error:
//     tried again with backoff, up to the attempt ceiling. So is a 3xx: a
//     redirect is never followed (see [Config.Client]).
//
// A forward made in a context with an OpenTelemetry span (package relay's,
// with a TracerProvider) carries that span's W3C traceparent (and
// tracestate), so an app that reads it joins the update's trace; send it
// back on the app's gateway calls.
//
// With [Config.AppSecretToken] set, an update forward also carries
// Telegram's own header, X-Telegram-Bot-Api-Secret-Token, with that secret
// (the app's, not the relay's webhook secret): a bot moved behind the relay
// keeps the secret check its framework already does.
//
// # Replies in the answer
//
// Telegram lets a webhook answer with a Bot API call in its body (grammY's
// and Telegraf's "webhook reply"). The forward reads the answer's body (at
// most [DefaultMaxResponseBytes]); a JSON object with a "method" is such a
// reply; so is, our extension, a JSON array of such objects. With
// [Config.Replier] set (the relay's gateway), the calls are performed in
// order under the attempt's identity and journal, and the update completes
// only once each has a known outcome: Telegram's answer, or unknown (kept
// in the journal and never sent again). A call that was not dispatched or
// throttled fails the attempt, and the retry answers the calls already
// performed from the journal. Without a Replier, a reply is never dropped
// silently: it is counted ([Forwarder.UnactedReplies]) and reported to
// [Config.UnactedReplyFunc], so the relay can log it.
//
// # Exhaustions
//
// [Forwarder.HandleExhaustion] is an [intake.Config.ExhaustionHandler] that
// POSTs each exhaustion to a second endpoint. Its body has one top-level key,
// "tgrelay_exhaustion", holding an [ExhaustionPayload] (read it with
// [DecodeExhaustion]); there is no top-level update_id, the request carries
// [HeaderKind] "exhaustion" and never the app's secret token. Bot frameworks
// take any JSON object as an update and answer 200, so a 2xx alone does not
// acknowledge: the endpoint must answer 2xx with [HeaderAck] set to the
// exhaustion's claim id (the request's [wire.HeaderClaimID]). Anything else —
// including a framework's webhook handler pointed at the exhaustion URL by
// mistake — leaves the exhaustion to be delivered again, with an
// [UnacknowledgedError] that says why.
package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/internal/h1client"
	"github.com/tgrelay/tgrelay/internal/readall"
	"github.com/tgrelay/tgrelay/wire"
)

// Headers of forwarded requests besides the identity headers of package
// wire ([wire.HeaderUpdateID], [wire.HeaderAttempt], [wire.HeaderClaimID])
// and the per-attempt API root ([wire.HeaderAPIRoot]).
const (
	// HeaderKind is "update" for an attempt and "exhaustion" for an
	// exhaustion delivery.
	HeaderKind = "Tgrelay-Kind"
	// HeaderAck is the response header with which an exhaustion endpoint
	// acknowledges a delivery: its value must be the exhaustion's claim id.
	HeaderAck = "Tgrelay-Ack"
	// HeaderTelegramSecret is Telegram's webhook secret header. Update
	// forwards carry Config.AppSecretToken in it, when set.
	HeaderTelegramSecret = "X-Telegram-Bot-Api-Secret-Token"
)

const (
	// DefaultTimeout bounds one forward, from connect to the end of the
	// answer.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the largest Timeout accepted.
	MaxTimeout = time.Hour
	// DefaultMaxResponseBytes is how much of an answer's body is read (and
	// discarded) so the connection can be reused; the rest is dropped with
	// the connection.
	DefaultMaxResponseBytes = 64 << 10
	// MaxRetryAfter caps a Retry-After the endpoint asks for.
	MaxRetryAfter = time.Hour
	// DefaultMaxIdleConnsPerHost is how many idle keep-alive connections to
	// the endpoint the default client keeps. The standard library's default
	// of 2 would close and re-dial connections whenever more than two
	// forwards run at once (the intake runs 32 by default).
	DefaultMaxIdleConnsPerHost = 128
)

// Config configures a Forwarder.
type Config struct {
	// URL is the endpoint updates are POSTed to. Required for
	// [Forwarder.Handle]: an absolute http or https URL without a user
	// name or password (send a credential as a Header) and not on an
	// unspecified address such as 0.0.0.0 or [::].
	URL string
	// ExhaustionURL is the endpoint exhaustions are POSTed to, a URL as
	// URL is. Required for [Forwarder.HandleExhaustion]; empty disables
	// it.
	ExhaustionURL string
	// Client sends the requests. Nil means a client of its own with the
	// standard library's default transport settings (keep-alive, proxies
	// from the environment) but [DefaultMaxIdleConnsPerHost] idle
	// connections per host, and no redirects followed: an endpoint's 3xx
	// is a failed attempt, retried, with its Location kept in the
	// attempt's record.
	//
	// To a plain http endpoint that no proxy applies to (the usual app
	// beside the relay), that client sends each request itself, on
	// keep-alive connections of its own, rather than through net/http's
	// Transport, whose hand-offs between goroutines cost more CPU per
	// request. The requests are the same but for one header: it does not
	// ask for a gzip-compressed answer (net/http asks, and then
	// decompresses it), so an app answers plainly. The behaviour is the
	// same, and [Forwarder.CloseIdleConnections] closes those connections
	// too.
	//
	// A client of your own should not follow redirects either
	// (CheckRedirect set to [botapi.NoRedirects]).
	Client *http.Client
	// Timeout bounds one forward, 1 ms to [MaxTimeout]. Zero means
	// [DefaultTimeout]. Keep it below the intake lease.
	Timeout time.Duration
	// Header holds extra headers sent with every request, such as an
	// authorisation token for the endpoint. Copied by New, which refuses
	// a name or value that is not valid HTTP (a line break would let a
	// value write headers of its own), under canonical names (values of
	// names that differ only in case are merged). Host, Content-Length,
	// Transfer-Encoding and Trailer, in any case, are the forward's own
	// and not sent.
	Header http.Header
	// AppSecretToken, when set, is sent in [HeaderTelegramSecret] with every
	// update forward (never with an exhaustion), so an app's framework can
	// check it as it checks Telegram's. It is the app's secret, distinct
	// from the relay's own webhook secret, and must look like one Telegram
	// accepts: 1-256 characters of A-Z, a-z, 0-9, _ and -. Empty sends no
	// such header.
	AppSecretToken string
	// UnactedReplyFunc, when set, is told of every reply found in an
	// update forward's answer body that nothing acts on (see the package
	// doc). It must not block. Nil only counts them
	// ([Forwarder.UnactedReplies]).
	UnactedReplyFunc func(UnactedReply)
	// Replier, when set, performs the webhook replies in update answers
	// (see the package doc, "Replies in the answer"): the relay's gateway.
	// Nil leaves them unacted.
	Replier Replier
	// ReplyFunc, when set, is told of every webhook reply the Replier
	// performed. It must not block.
	ReplyFunc func(Reply)
	// APIRoot, when set, is the gateway's base URL as the app reaches it
	// (such as "http://127.0.0.1:8081"): each update forward then carries
	// [wire.HeaderAPIRoot], the per-attempt API root under it.
	APIRoot string
	// APIRootFunc, when set, is asked for the gateway's base URL at each
	// update forward, instead of APIRoot: for a gateway whose address is
	// known only once it listens (on port 0). It must be safe for
	// concurrent use and return an absolute http or https URL, or "" to
	// announce nothing.
	APIRootFunc func() string
}

// Replier performs one Bot API call on behalf of an attempt, fenced and
// journaled (the gateway implements it). params is the call's JSON object
// without "method". It reports the HTTP status the call was answered with,
// the outcome as the gateway's Tgrelay-Outcome header names it
// ("answered" for Telegram's own answer, "throttled", "not-dispatched",
// "unknown", "stale", "refused") and whether the answer was replayed from
// the journal.
type Replier interface {
	Reply(ctx context.Context, id intake.Identity, method string, params []byte) (status int, outcome string, replayed bool)
}

// Reply is one webhook reply the [Replier] performed.
type Reply struct {
	UpdateID int64
	Attempt  int
	Method   string
	Status   int
	Outcome  string
	Replayed bool
}

// MaxReplies bounds the calls of one answer's reply array.
const MaxReplies = 100

// UnactedReply is a Bot API call an app placed in the body of its answer
// to an update forward that the relay did not perform.
type UnactedReply struct {
	// UpdateID and Attempt identify the forward it answered.
	UpdateID int64
	Attempt  int
	// Method is the reply's "method" (its first call's), or "" when the
	// reply cannot be read (too large to read whole, not valid JSON, or
	// without a string method).
	Method string
	// Bytes is the size of the body read (at most DefaultMaxResponseBytes).
	Bytes int
	// Reason says why it was not acted on.
	Reason string
}

// ValidSecretToken reports whether s has the shape Telegram requires of a
// webhook secret token (and New of AppSecretToken). It is
// [botapi.ValidSecretToken], the one home of that rule.
func ValidSecretToken(s string) bool { return botapi.ValidSecretToken(s) }

// Forwarder forwards updates and exhaustions to HTTP endpoints. It is safe
// for concurrent use.
type Forwarder struct {
	url, exhaustionURL string
	client             *http.Client
	checkFresh         bool // client is the default one, whose answers are checked (errStaleAnswer)
	// direct and directExhaustion send to url and exhaustionURL on the
	// default client's direct path (direct.go); nil keeps client's.
	direct, directExhaustion *directTarget
	pools                    []*directPool
	timeout                  time.Duration
	header                   http.Header
	appSecret                string
	unactedFunc              func(UnactedReply)
	unacted                  atomic.Uint64
	replier                  Replier
	replyFunc                func(Reply)
	apiRoot                  string
	apiRootFunc              func() string
}

// ConfigError is an invalid [Config] field: Field names it ("Timeout")
// and Err says what is wrong. It is the one config error type of every
// tgrelay package (relay.ConfigError is the same type).
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	return configerr.New("forward", field, format, args...)
}

// Validate reports the first invalid field of c as a *[ConfigError], as
// [New] would. It does no I/O.
func (c Config) Validate() error {
	_, err := c.fill()
	return err
}

// fill returns a copy of c with its defaults, or a *ConfigError.
func (c Config) fill() (Config, error) {
	if c.URL == "" && c.ExhaustionURL == "" {
		return c, badField("URL", "is required, or ExhaustionURL")
	}
	for _, f := range []struct{ name, raw string }{{"URL", c.URL}, {"ExhaustionURL", c.ExhaustionURL}} {
		if f.raw == "" {
			continue
		}
		u, err := configerr.HTTPURL(f.raw)
		if err != nil {
			return c, badField(f.name, "%w", err)
		}
		if err := configerr.URLCredential(u, "send it in a request header instead"); err != nil {
			// Never quoted: the password would reach the error, and
			// every log line, doctor finding or page that shows it.
			return c, badField(f.name, "%w", err)
		}
		if !reachable(u) {
			return c, badField(f.name, "names no address a forward can reach: want a host name and a port from 1 to 65535")
		}
		if unspecified(u) {
			return c, badField(f.name, "names an unspecified address (0.0.0.0 or ::), where a server listens, not an address to send to: want the endpoint's host, such as 127.0.0.1")
		}
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	case c.Timeout < time.Millisecond || c.Timeout > MaxTimeout:
		return c, badField("Timeout", "is %v: want 1ms to %v", c.Timeout, MaxTimeout)
	}
	if c.APIRoot != "" {
		// A root the app appends method paths to, told in a header.
		if _, err := configerr.BaseURL(c.APIRoot); err != nil {
			return c, badField("APIRoot", "%w", err)
		}
	}
	for k, vs := range c.Header {
		if err := h1client.CheckHeader(k, vs); err != nil {
			return c, badField("Header", "has an %w: a name must be an HTTP token, and a value must hold no control character such as a line break", err)
		}
	}
	if c.AppSecretToken != "" && !botapi.ValidSecretToken(c.AppSecretToken) {
		return c, badField("AppSecretToken", "must be 1-256 characters of A-Z, a-z, 0-9, _ and -, as Telegram's secret token")
	}
	return c, nil
}

// unspecified reports whether u's host is an unspecified address (0.0.0.0,
// ::, or another spelling of them). A server listens on one; a client
// sending to it reaches this machine on some systems and nothing on
// others, so it is never the endpoint meant.
func unspecified(u *url.URL) bool {
	ip, err := netip.ParseAddr(u.Hostname())
	return err == nil && ip.Unmap().IsUnspecified()
}

// reachable reports whether u names a host and, when it has one, a port
// a connection can be made to. Neither is true of an empty host name (Go
// would dial this machine) or a port outside 1-65535: every forward would
// fail, and every update end as an exhaustion.
func reachable(u *url.URL) bool {
	if u.Hostname() == "" {
		return false
	}
	p := u.Port()
	if p == "" {
		return true
	}
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535
}

// New returns a Forwarder for cfg, or a *[ConfigError] naming the invalid
// field.
func New(cfg Config) (*Forwarder, error) {
	cfg, err := cfg.fill()
	if err != nil {
		return nil, err
	}
	checkFresh := cfg.Client == nil
	if cfg.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
		t.DialContext = dialFresh(t.DialContext) // see errStaleAnswer
		// An endpoint's 3xx is its answer. Following it would turn a 301,
		// 302 or 303 into a GET without the update, whose 2xx would
		// complete an update the app never received, and would send a
		// 307 or 308's update, with the app's secret and the configured
		// headers, to whatever host Location names.
		cfg.Client = &http.Client{Transport: t, CheckRedirect: botapi.NoRedirects}
	}
	f := &Forwarder{
		url:           cfg.URL,
		exhaustionURL: cfg.ExhaustionURL,
		client:        cfg.Client,
		checkFresh:    checkFresh,
		timeout:       cfg.Timeout,
		header:        canonicalHeader(cfg.Header),
		appSecret:     cfg.AppSecretToken,
		unactedFunc:   cfg.UnactedReplyFunc,
		replier:       cfg.Replier,
		replyFunc:     cfg.ReplyFunc,
		apiRoot:       strings.TrimRight(cfg.APIRoot, "/"),
		apiRootFunc:   cfg.APIRootFunc,
	}
	if checkFresh {
		pools := map[string]*directPool{}
		for _, t := range []struct {
			raw    string
			target **directTarget
		}{{cfg.URL, &f.direct}, {cfg.ExhaustionURL, &f.directExhaustion}} {
			if u, err := url.Parse(t.raw); err == nil && t.raw != "" {
				*t.target = newDirectTarget(u, pools)
			}
		}
		for _, p := range pools {
			f.pools = append(f.pools, p)
		}
	}
	return f, nil
}

// canonicalHeader copies h under canonical keys, merging the values of keys
// that differ only in case. The forward's own headers are set, and
// skipped, by their canonical keys: a "host" or "content-length" kept as
// given would be sent beside the forward's own, and the app would refuse
// every request.
func canonicalHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) { // merged in one order
		ck := http.CanonicalHeaderKey(k)
		out[ck] = append(out[ck], h[k]...)
	}
	return out
}

// CloseIdleConnections closes the connections kept open to the endpoints
// that carry no forward now, as [http.Client.CloseIdleConnections] does.
// A later forward opens a new one.
func (f *Forwarder) CloseIdleConnections() {
	for _, p := range f.pools {
		p.CloseIdle()
	}
	f.client.CloseIdleConnections()
}

// gatewayRoot is the gateway's base URL to announce, or "".
func (f *Forwarder) gatewayRoot() string {
	if f.apiRootFunc != nil {
		return f.apiRootFunc()
	}
	return f.apiRoot
}

// UnactedReplies is how many replies in update answers were not acted on
// since New.
func (f *Forwarder) UnactedReplies() uint64 { return f.unacted.Load() }

// StatusError is an endpoint's non-2xx answer.
type StatusError struct {
	// Kind is "update" or "exhaustion".
	Kind string
	// Code is the HTTP status code.
	Code int
	// RetryAfter is the endpoint's Retry-After, zero when absent.
	RetryAfter time.Duration
}

// Error implements error.
func (e *StatusError) Error() string {
	msg := fmt.Sprintf("forward: %s endpoint answered %d %s", e.Kind, e.Code, http.StatusText(e.Code))
	if e.Code >= 300 && e.Code < 400 {
		msg += " (redirects are not followed: configure the endpoint's final URL)"
	}
	return msg
}

// AuthRetryDelay is how long [Forwarder.Handle] asks the intake to wait
// before it tries again an update the endpoint answered 401 or 403.
const AuthRetryDelay = 30 * time.Second

// AuthError is the endpoint's 401 or 403 to an update forward: it refused
// the forward's credentials. That is a configuration problem of the app or
// of the forward (a secret check that expects another
// X-Telegram-Bot-Api-Secret-Token than [Config.AppSecretToken], or one the
// forward does not send), not a bad update: [Forwarder.Handle] returns it
// wrapped in [intake.RetryLater], never as [intake.Abandon].
// Its message names the setting to check and never quotes a secret.
type AuthError struct {
	StatusError
	// SecretSent reports that the forward carried Config.AppSecretToken
	// in [HeaderTelegramSecret].
	SecretSent bool
}

// Error implements error.
func (e *AuthError) Error() string {
	hint := "the forward sent no " + HeaderTelegramSecret + " (Config.AppSecretToken is empty); set it to the secret the app checks"
	if e.SecretSent {
		hint = "the app refused the " + HeaderTelegramSecret + " the forward sent; make Config.AppSecretToken and the app's secret check agree"
	}
	return e.StatusError.Error() + ": a configuration problem, not a bad update: " + hint
}

// Unwrap returns the embedded *StatusError, so errors.As finds it too.
func (e *AuthError) Unwrap() error { return &e.StatusError }

// UnacknowledgedError is an exhaustion endpoint's 2xx answer without the
// acknowledgment [HeaderAck] must carry. The exhaustion stays
// unacknowledged and is delivered again.
type UnacknowledgedError struct {
	// Code is the HTTP status code.
	Code int
	// Got is the HeaderAck value received ("" when absent).
	Got string
}

// Error implements error.
func (e *UnacknowledgedError) Error() string {
	if e.Got == "" {
		return fmt.Sprintf("forward: exhaustion endpoint answered %d without a %s header: not acknowledged "+
			"(an endpoint acknowledges by echoing the %s request header; is a bot framework's webhook handler behind the exhaustion URL?)",
			e.Code, HeaderAck, wire.HeaderClaimID)
	}
	return fmt.Sprintf("forward: exhaustion endpoint answered %d with a %s for another claim: not acknowledged", e.Code, HeaderAck)
}

// Handle POSTs the update to the endpoint. It has the signature of
// [intake.Config.AttemptHandler].
func (f *Forwarder) Handle(ctx context.Context, u intake.Update, a intake.Attempt) error {
	if f.url == "" {
		return intake.Abandon(errors.New("forward: no URL configured"))
	}
	body, err := f.post(ctx, f.url, "update", a.Identity, u.Body)
	if err == nil {
		if f.replier == nil {
			f.noteReply(a.Identity, body)
			return nil
		}
		return f.performReplies(ctx, a.Identity, body)
	}
	var se *StatusError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden:
		return intake.RetryLater(&AuthError{StatusError: *se, SecretSent: f.appSecret != ""}, AuthRetryDelay)
	case (se.Code == http.StatusTooManyRequests || se.Code == http.StatusServiceUnavailable) && se.RetryAfter > 0:
		return intake.RetryLater(se, se.RetryAfter)
	case se.Code >= 400 && se.Code < 500 && se.Code != http.StatusTooManyRequests && se.Code != http.StatusRequestTimeout:
		return intake.Abandon(se)
	default:
		return se
	}
}

// ExhaustionPayload is an exhaustion as delivered, under the
// "tgrelay_exhaustion" key of the body ([ExhaustionBody]).
type ExhaustionPayload struct {
	UpdateID    int64           `json:"update_id"`
	Attempt     int             `json:"attempt"`
	ClaimID     string          `json:"claim_id"`
	ExhaustedAt time.Time       `json:"exhausted_at"`
	Error       string          `json:"error"`
	Update      json.RawMessage `json:"update"`
}

// ExhaustionBody is the JSON body of an exhaustion delivery. Its only key
// is "tgrelay_exhaustion": there is no top-level update_id, so nothing that
// expects Telegram's updates mistakes it for one.
type ExhaustionBody struct {
	Exhaustion *ExhaustionPayload `json:"tgrelay_exhaustion"`
}

// MaxExhaustionBodyBytes bounds what [DecodeExhaustion] reads.
const MaxExhaustionBodyBytes = 64 << 20

// ErrNotExhaustion is returned by [DecodeExhaustion] for a body that is
// not an exhaustion delivery.
var ErrNotExhaustion = errors.New("forward: not an exhaustion delivery (no tgrelay_exhaustion key)")

// DecodeExhaustion reads an exhaustion delivery's body (at most
// MaxExhaustionBodyBytes), for an app's exhaustion endpoint written in Go.
func DecodeExhaustion(r io.Reader) (ExhaustionPayload, error) {
	var b ExhaustionBody
	dec := json.NewDecoder(io.LimitReader(r, MaxExhaustionBodyBytes))
	if err := dec.Decode(&b); err != nil {
		return ExhaustionPayload{}, fmt.Errorf("forward: decode exhaustion: %w", err)
	}
	if b.Exhaustion == nil {
		return ExhaustionPayload{}, ErrNotExhaustion
	}
	return *b.Exhaustion, nil
}

// HandleExhaustion POSTs the exhaustion as an [ExhaustionBody]. A 2xx
// answer whose [HeaderAck] is the exhaustion's claim id acknowledges it; a
// 2xx without it is an [UnacknowledgedError]. An exhaustion without a
// claim id (which no conforming store lists) is not sent: it could never
// be acknowledged, since an answer without the header would pass for one.
// It has the signature of [intake.Config.ExhaustionHandler].
func (f *Forwarder) HandleExhaustion(ctx context.Context, e intake.Exhaustion) error {
	if f.exhaustionURL == "" {
		return errors.New("forward: no ExhaustionURL configured")
	}
	if e.ClaimID == "" {
		return fmt.Errorf("forward: exhaustion of update %d has no claim id, so no answer could acknowledge it; not sent (the store listed a row it never claimed)", e.UpdateID)
	}
	p := ExhaustionPayload{
		UpdateID: e.UpdateID, Attempt: e.Attempt, ClaimID: e.ClaimID,
		ExhaustedAt: e.ExhaustedAt.UTC(), Error: e.Error,
		Update: json.RawMessage(e.Body),
	}
	if !json.Valid(e.Body) {
		// An unparsable stored body is delivered as a JSON string, so the
		// payload stays valid JSON.
		raw, _ := json.Marshal(string(e.Body))
		p.Update = raw
	}
	body, err := json.Marshal(ExhaustionBody{Exhaustion: &p})
	if err != nil {
		return fmt.Errorf("forward: encode exhaustion: %w", err)
	}
	_, err = f.post(ctx, f.exhaustionURL, "exhaustion", e.Identity, body)
	return err
}

// noteReply counts and reports a webhook reply in an update's answer body
// that nothing acted on. A body that is not a reply (empty, "OK", a JSON
// object without "method") is not one.
func (f *Forwarder) noteReply(id intake.Identity, body []byte) {
	r, ok := replyIn(body)
	if !ok {
		return
	}
	r.UpdateID, r.Attempt = id.UpdateID, id.Attempt
	f.unacted.Add(1)
	if f.unactedFunc != nil {
		f.unactedFunc(r)
	}
}

// replyIn reports whether body is a webhook reply, as parseReplies reads
// one (a reply that cannot be performed included), with the method of its
// first call, if it has one, and why nothing performs it.
func replyIn(body []byte) (UnactedReply, bool) {
	calls, ok, err := parseReplies(body)
	if !ok {
		return UnactedReply{}, false
	}
	r := UnactedReply{Bytes: len(body), Reason: "the relay does not perform webhook replies; send the call to the Bot API (or the relay's gateway) instead"}
	if err != nil {
		r.Reason = err.Error() + ", and " + r.Reason
	}
	if len(calls) > 0 {
		r.Method = calls[0].method
	}
	return r, true
}

// post sends body and returns the start of the answer's body (at most
// DefaultMaxResponseBytes) on a 2xx.
func (f *Forwarder) post(ctx context.Context, target, kind string, id intake.Identity, body []byte) ([]byte, error) {
	// The header, sized once; every value of ours shares one backing
	// array. The keys are canonical already.
	h := make(http.Header, len(f.header)+7)
	for k, vs := range f.header {
		h[k] = append([]string(nil), vs...)
	}
	vals := make([]string, 0, 7)
	set := func(k, v string) {
		vals = append(vals, v)
		h[k] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	set("Content-Type", "application/json")
	set(wire.HeaderUpdateID, strconv.FormatInt(id.UpdateID, 10))
	set(wire.HeaderAttempt, strconv.Itoa(id.Attempt))
	set(wire.HeaderClaimID, id.ClaimID)
	set(HeaderKind, kind)
	if root := f.gatewayRoot(); kind == "update" && root != "" {
		set(wire.HeaderAPIRoot, wire.AttemptRoot(root, id.UpdateID, id.Attempt, id.ClaimID))
	}
	if kind == "update" && f.appSecret != "" {
		set(HeaderTelegramSecret, f.appSecret)
	}
	// The trace context of ctx, when it has one (the relay's attempt
	// span), as W3C traceparent: the app's spans join the update's trace.
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))

	direct := f.direct
	if kind == "exhaustion" {
		direct = f.directExhaustion
	}
	var (
		resp *http.Response
		err  error
		fr   freshness
	)
	if direct != nil {
		resp, err = direct.do(ctx, f.timeout, h, body)
		if err != nil {
			return nil, fmt.Errorf("forward: %s to endpoint failed: %w", kind, err)
		}
	} else {
		// A context that ends before the timeout already bounds the
		// attempt, as the runner's lease usually does: no timer of
		// its own.
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > f.timeout {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, f.timeout)
			defer cancel()
		}
		if f.checkFresh {
			ctx = withFreshness(ctx, &fr)
		}
		req, rerr := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
		if rerr != nil {
			return nil, fmt.Errorf("forward: build %s request: %w", kind, rerr)
		}
		req.Header = h
		resp, err = f.client.Do(req)
		if err != nil && fr.stale.Load() {
			return nil, fmt.Errorf("forward: %s to endpoint failed: %w", kind, errStaleAnswer)
		}
		if err != nil {
			// *url.Error prints the endpoint's address, which may carry
			// a credential in its query; keep only its cause, so
			// errors.Is still finds context errors.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("forward: %s to endpoint failed: %w", kind, err)
		}
	}
	answer, readErr := readAnswer(resp)
	resp.Body.Close()
	if fr.stale.Load() {
		return nil, fmt.Errorf("forward: %s to endpoint failed: %w", kind, errStaleAnswer)
	}
	if readErr != nil && kind == "update" && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		// The answer ended before its end (the connection closed or
		// reset, or the timeout struck mid-body): a webhook reply in it
		// would be lost without a word. Retry, as for any transport
		// failure; the gateway's journal performs the app's identical
		// reply once.
		return nil, fmt.Errorf("forward: %s endpoint's %d answer was cut short after %d bytes: %w", kind, resp.StatusCode, len(answer), readErr)
	}
	if kind == "update" {
		// The attempt's record keeps the app's own words; the runner masks
		// them before they are stored.
		intake.ReportAnswer(ctx, intake.AttemptAnswer{Status: resp.StatusCode, Header: keptHeaders(resp.Header), Body: answer})
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &StatusError{Kind: kind, Code: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	}
	if kind == "exhaustion" {
		if got := strings.TrimSpace(resp.Header.Get(HeaderAck)); got != id.ClaimID {
			return nil, &UnacknowledgedError{Code: resp.StatusCode, Got: got}
		}
	}
	return answer, nil
}

// answerHeaders are the response headers an attempt's record keeps: what
// says how the app answered, never a cookie.
var answerHeaders = [...]string{"Content-Type", "Retry-After", "Www-Authenticate", "Location", "X-Request-Id", HeaderAck}

// keptHeaders returns the answerHeaders h has, first value each.
func keptHeaders(h http.Header) http.Header {
	var out http.Header
	for _, k := range answerHeaders {
		if v := h.Get(k); v != "" {
			if out == nil {
				out = http.Header{}
			}
			out[k] = []string{v}
		}
	}
	return out
}

// readAnswer reads the start of an answer's body, at most
// DefaultMaxResponseBytes: nothing for an empty one (most endpoints answer
// 200 with no body), and otherwise by internal/readall's rule, so an app
// that declares a large answer and sends little holds no more than it
// sent. It returns what it read and, when the body ended early or failed,
// why.
func readAnswer(resp *http.Response) ([]byte, error) {
	if resp.ContentLength == 0 {
		return nil, nil
	}
	return readall.Bounded(resp.Body, resp.ContentLength, DefaultMaxResponseBytes)
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
// It returns zero when absent or unparsable, and caps it at MaxRetryAfter.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
		if d <= 0 {
			return 0
		}
	} else {
		return 0
	}
	return min(d, MaxRetryAfter)
}
