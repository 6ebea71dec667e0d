package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/configerr"
)

// Defaults and limits of [Config].
const (
	// DefaultAPIRoot is Telegram's Bot API root.
	DefaultAPIRoot = "https://api.telegram.org"
	// DefaultMaxBufferedBody is how much of a request body the gateway holds
	// in memory when Config.MaxBufferedBody is zero.
	DefaultMaxBufferedBody = 1 << 20
	// MaxMaxBufferedBody is the largest Config.MaxBufferedBody accepted.
	MaxMaxBufferedBody = 50 << 20
	// DefaultMaxBufferedTotal is how much of their request bodies all calls
	// together hold in memory when Config.MaxBufferedTotal is zero (or
	// MaxBufferedBody, when that is larger).
	DefaultMaxBufferedTotal = 64 << 20
	// MaxMaxBufferedTotal is the largest Config.MaxBufferedTotal accepted.
	MaxMaxBufferedTotal = 1 << 30
	// DefaultMaxSendTries is how often a call that was not dispatched is
	// tried in all, when Config.MaxSendTries is zero.
	DefaultMaxSendTries = 3
	// MaxMaxSendTries is the largest Config.MaxSendTries accepted.
	MaxMaxSendTries = 10
	// DefaultMaxAttempts is how many attempts' occurrence counters the
	// gateway keeps in memory when Config.MaxAttempts is zero.
	DefaultMaxAttempts = 10000
	// DefaultMaxPendingOutcomes bounds the outcomes being journaled after
	// their calls were answered, when Config.MaxPendingOutcomes is zero.
	DefaultMaxPendingOutcomes = 256
	// DefaultResponseTimeout is Config.ResponseTimeout when zero: the
	// transport package's default response timeout.
	DefaultResponseTimeout = 30 * time.Second
	// MaxResponseTimeout is the largest Config.ResponseTimeout accepted.
	MaxResponseTimeout = 10 * time.Minute
	// outcomeBound bounds the recording of an outcome, which goes on after
	// the app stopped waiting.
	outcomeBound = 10 * time.Second
)

// ErrInvalidConfig is matched (errors.Is) by every error [New] returns for
// a [Config] field, a *[ConfigError] naming it.
var ErrInvalidConfig = errors.New("gateway: invalid config")

// ConfigError is an invalid [Config] field: Field names it
// ("MaxSendTries") and Err says what is wrong; it matches
// [ErrInvalidConfig]. It is the one config error type of every tgrelay
// package (relay.ConfigError is the same type).
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	e := configerr.New("gateway", field, format, args...)
	e.Kind = ErrInvalidConfig
	return e
}

// Validate reports the first invalid field of c as a *[ConfigError], as
// [New] would. It does no I/O.
func (c Config) Validate() error {
	_, err := c.withDefaults()
	return err
}

// Config configures a [Gateway]. New copies it.
type Config struct {
	// Token is the bot's token. Required. The handler serves only calls for
	// this token and answers others 401, as Telegram would; it never appears
	// in an answer, an error, a log line or a metric.
	Token string

	// APIRoot is where calls go: Telegram, a local Bot API server or a fake,
	// as an absolute http or https URL without a trailing slash. Empty means
	// [DefaultAPIRoot].
	APIRoot string

	// Transport sends the calls whose body is in memory. Required. It should
	// be a throttle.Transport over a transport.Transport, so calls keep
	// Telegram's limits, a call that never left reports NotDispatched()
	// true, and a fenced call's lease is checked and its intent journaled
	// only at its turn (see the package doc); any RoundTripper works, and
	// errors that do not carry that mark count as unknown.
	Transport http.RoundTripper

	// StreamTransport sends multipart uploads larger than MaxBufferedBody,
	// streaming them, and fetches files (/file/bot<token>/…), streaming the
	// answer. Wrap the same limiter around it as around Transport (see
	// [NewStreamTransport]). Nil means uploads above MaxBufferedBody are
	// refused (413) and files are fetched through Transport, within its
	// answer bound.
	StreamTransport http.RoundTripper

	// Store fences calls that carry an attempt identity: a call of an
	// attempt that no longer holds its lease is refused (409) and not sent.
	// When it is also an [intake.JournalStore], such calls are journaled and
	// replayed, and the attempt that completed its update goes on making
	// calls (its tail; see the package doc). Nil means calls with an
	// identity are refused (a gateway without a store cannot fence them).
	Store intake.Store

	// OwnsIntake makes the handler refuse getUpdates, setWebhook and
	// deleteWebhook, which would take the bot's updates from the relay.
	OwnsIntake bool

	// MaxBufferedBody bounds the part of a request body held in memory, 1
	// byte to [MaxMaxBufferedBody]. A JSON or form body must fit (larger
	// ones are answered 413); a multipart body that does not fit is
	// streamed. Zero means [DefaultMaxBufferedBody].
	MaxBufferedBody int64

	// MaxBufferedTotal bounds the request bodies held in memory by all the
	// calls in progress together, MaxBufferedBody to [MaxMaxBufferedTotal].
	// A call takes its share as it reads its body and gives it back once
	// answered; a call that finds none free waits for it, and when its app
	// goes or its time bound ends first it is answered 503 not dispatched
	// ([StatusNotDispatched]): nothing was sent. Zero means
	// [DefaultMaxBufferedTotal], or MaxBufferedBody when that is larger.
	MaxBufferedTotal int64

	// MaxSendTries is how often a call that was not dispatched is tried in
	// all, 1 to [MaxMaxSendTries], with a short capped backoff between
	// tries. Zero means [DefaultMaxSendTries].
	MaxSendTries int

	// MaxAttempts bounds the attempts whose per-attempt call counters are
	// kept in memory (least recently used ones are forgotten; see the
	// package doc on occurrences). An attempt reported over
	// ([Gateway.AttemptEnded]) gives its counters back at once, so with
	// such reports the bound is only reached by that many attempts running
	// at once. Zero means [DefaultMaxAttempts].
	MaxAttempts int

	// MaxPendingOutcomes bounds the journaled calls whose outcome is still
	// being recorded after the app got its answer (see the package doc,
	// "Replay-safe replies"); each holds Telegram's answer (at most
	// intake.MaxJournalBody) until written. When the bound is reached, an
	// outcome is recorded before its call is answered. Zero means
	// [DefaultMaxPendingOutcomes]; a negative value records every outcome
	// before the answer.
	MaxPendingOutcomes int

	// ResponseTimeout is the longest Telegram may take to answer a call
	// once it has its turn, 1ms to [MaxResponseTimeout]. Give Transport the
	// same response timeout (transport.Config.ResponseTimeout; relay does),
	// so a silent Telegram is answered unknown within it; whatever the
	// transport does, the gateway ends a call MaxWait + ResponseTimeout
	// after its arrival (see the package doc, "Time bounds", and
	// [Gateway.Bounds]). Zero means [DefaultResponseTimeout].
	ResponseTimeout time.Duration

	// Observer is told of every call the gateway answered. The zero value
	// observes nothing.
	Observer Observer

	// Logger receives failures to record outcomes. Nil means slog.Default.
	Logger *slog.Logger

	// TracerProvider, when set, traces every call with the OpenTelemetry
	// API: a server span "tgrelay gateway <method>" per call the app made,
	// under the W3C traceparent its request carries (an app that sends
	// back the traceparent its update forward brought joins the update's
	// trace), a span "tgrelay reply <method>" per webhook reply, under the
	// forward's, and a client span "telegram <method>" per try sent to
	// Telegram beneath either, with Telegram's status or the try's outcome.
	// Spans carry the method, outcome, status and whether the call was
	// fenced or replayed: never the URL (it holds the token), the
	// parameters or the answer; no trace context is sent to Telegram. Nil
	// traces nothing.
	TracerProvider trace.TracerProvider
	// TraceParentFunc, when set with TracerProvider, gives the trace
	// context of a fenced call whose request carries no traceparent: ctx
	// with the trace of the update id names (package relay: the update's
	// own trace). Nil, or a context without a span, makes such a call the
	// root of a trace of its own.
	TraceParentFunc func(ctx context.Context, id intake.Identity) context.Context

	// Test holds seams for tests; leave it zero.
	Test TestHooks
}

// TestHooks are seams for tests.
type TestHooks struct {
	// Now replaces time.Now.
	Now func() time.Time
	// AfterIntent, when set, runs after an intent was recorded and before
	// the call is sent (through a throttle.Transport: at the call's turn,
	// while it holds its permit).
	AfterIntent func(method string)
	// BeforeOutcome, when set, runs before an outcome is recorded, on the
	// goroutine that records it (after the answer, unless the outcome is
	// recorded before it).
	BeforeOutcome func(method string)
	// OutcomeWait, when set, runs when a call is about to wait for an
	// earlier attempt's identical call in flight (at Telegram, or its
	// outcome being recorded) to end.
	OutcomeWait func(method string)
}

func (c Config) withDefaults() (Config, error) {
	if c.Token == "" || strings.ContainsAny(c.Token, "/?# ") {
		return c, badField("Token", "is not a bot token")
	}
	if c.APIRoot == "" {
		c.APIRoot = DefaultAPIRoot
	}
	if _, err := configerr.BaseURL(c.APIRoot); err != nil {
		return c, badField("APIRoot", "%w", err)
	}
	c.APIRoot = strings.TrimRight(c.APIRoot, "/")
	if c.Transport == nil {
		return c, badField("Transport", "is required")
	}
	switch {
	case c.MaxBufferedBody == 0:
		c.MaxBufferedBody = DefaultMaxBufferedBody
	case c.MaxBufferedBody < 1 || c.MaxBufferedBody > MaxMaxBufferedBody:
		return c, badField("MaxBufferedBody", "is %d: want 1 to %d (0: the default)", c.MaxBufferedBody, MaxMaxBufferedBody)
	}
	switch {
	case c.MaxBufferedTotal == 0:
		c.MaxBufferedTotal = max(DefaultMaxBufferedTotal, c.MaxBufferedBody)
	case c.MaxBufferedTotal < c.MaxBufferedBody || c.MaxBufferedTotal > MaxMaxBufferedTotal:
		return c, badField("MaxBufferedTotal", "is %d: want MaxBufferedBody (%d) to %d (0: the default)", c.MaxBufferedTotal, c.MaxBufferedBody, MaxMaxBufferedTotal)
	}
	switch {
	case c.MaxSendTries == 0:
		c.MaxSendTries = DefaultMaxSendTries
	case c.MaxSendTries < 1 || c.MaxSendTries > MaxMaxSendTries:
		return c, badField("MaxSendTries", "is %d: want 1 to %d (0: the default)", c.MaxSendTries, MaxMaxSendTries)
	}
	switch {
	case c.MaxAttempts == 0:
		c.MaxAttempts = DefaultMaxAttempts
	case c.MaxAttempts < 1:
		return c, badField("MaxAttempts", "is %d: want 1 or more (0: the default)", c.MaxAttempts)
	}
	switch {
	case c.ResponseTimeout == 0:
		c.ResponseTimeout = DefaultResponseTimeout
	case c.ResponseTimeout < time.Millisecond || c.ResponseTimeout > MaxResponseTimeout:
		return c, badField("ResponseTimeout", "is %v: want 1ms to %v (0: the default)", c.ResponseTimeout, MaxResponseTimeout)
	}
	if c.MaxPendingOutcomes == 0 {
		c.MaxPendingOutcomes = DefaultMaxPendingOutcomes
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Test.Now == nil {
		c.Test.Now = time.Now
	}
	return c, nil
}
