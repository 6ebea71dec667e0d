package relay

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

// Bounds of the relay's log rate limit: each distinct message may log
// logBurst lines at once, then one more per logEvery; lines beyond are
// dropped and counted, and the next line of that message that passes
// carries the count as "suppressed". A failing endpoint therefore cannot
// flood the log, and the log still says how much happened.
const (
	logBurst = 10
	logEvery = 6 * time.Second
	// logMaxKeys bounds the messages tracked; the relay's messages are
	// constants, far fewer.
	logMaxKeys = 256
)

// Failure reasons of [FailureReason] (and of a [KindFailed] event's
// Reason): a fixed set, for logs and metric labels.
const (
	FailHTTP429    = "http_429"
	FailHTTP503    = "http_503"
	FailHTTP4xx    = "http_4xx"
	FailAppAuth    = "app_auth" // 401 or 403: see AppStatus
	FailHTTP5xx    = "http_5xx"
	FailTimeout    = "timeout"
	FailConnection = "connection"
	FailCancelled  = "cancelled"
	FailPanic      = "panic"
	FailUnparsable = "unparsable"
	FailOther      = "other"
)

// FailureReason maps a failed attempt's error to one of the Fail
// constants: the endpoint's status class, a timeout, a connection error,
// a cancellation (lost lease, stop), a handler panic, an unparsable stored
// body, or other.
func FailureReason(err error) string {
	var se *forward.StatusError
	var ae *forward.AuthError
	var pe *intake.PanicError
	var ol *intake.OwnershipLostError
	var ne net.Error
	switch {
	case errors.As(err, &ae):
		return FailAppAuth
	case errors.As(err, &se):
		switch {
		case se.Code == http.StatusTooManyRequests:
			return FailHTTP429
		case se.Code == http.StatusServiceUnavailable:
			return FailHTTP503
		case se.Code >= 400 && se.Code < 500:
			return FailHTTP4xx
		default:
			return FailHTTP5xx
		}
	case errors.As(err, &pe):
		return FailPanic
	case errors.Is(err, intake.ErrUnparsableBody):
		return FailUnparsable
	case errors.As(err, &ol), errors.Is(err, context.Canceled), errors.Is(err, intake.ErrClosed):
		return FailCancelled
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return FailTimeout
	case errors.As(err, &ne):
		return FailConnection
	default:
		return FailOther
	}
}

// logEvent writes the one line an event deserves at the default level:
// every failed forward (a warning while a retry follows, an error when the
// update is given up) and every exhaustion recorded. Store errors and
// failed exhaustion deliveries are logged by the intake runner as
// warnings. The logger is rate limited (see logBurst).
func (r *Relay) logEvent(e *Event) {
	switch e.Kind {
	case KindFailed:
		attrs := []any{"update_id", e.ID.UpdateID, "attempt", e.ID.Attempt, "reason", e.Reason, "err", e.Err}
		switch {
		case e.Retrying:
			r.log.Warn("relay: forward failed; a retry is scheduled", attrs...)
		case e.Expiring:
			r.log.Warn("relay: forward failed; no retry fits before the update's deadline, so it expires", attrs...)
		default:
			r.log.Error("relay: forward failed; the update is given up", attrs...)
		}
	case KindExpired:
		r.log.Warn("relay: update expired: its deadline passed unanswered; not an exhaustion",
			"update_id", e.ID.UpdateID, "attempts", e.ID.Attempt, "type", e.Reason)
	case KindExhausted:
		r.log.Error("relay: exhaustion recorded; it waits to be delivered or acknowledged",
			"update_id", e.ID.UpdateID, "attempt", e.ID.Attempt, "err", e.Err)
	}
}

// rateLimited returns h limited per message: see logBurst.
func rateLimited(h slog.Handler, now func() time.Time) slog.Handler {
	return &limitHandler{next: h, st: &limitState{now: now, keys: map[string]*logBucket{}}}
}

// limitHandler is a slog.Handler dropping lines of a message beyond its
// rate, counting them.
type limitHandler struct {
	next slog.Handler
	st   *limitState // shared by the handlers WithAttrs and WithGroup derive
}

type limitState struct {
	mu   sync.Mutex
	now  func() time.Time
	keys map[string]*logBucket
}

type logBucket struct {
	tokens     float64
	last       time.Time
	suppressed int
}

// allow takes a token of msg's bucket, returning whether the line passes
// and how many lines were dropped before it.
func (s *limitState) allow(msg string) (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	b, ok := s.keys[msg]
	if !ok {
		if len(s.keys) >= logMaxKeys {
			msg = "" // one shared bucket for the overflow
			b = s.keys[msg]
		}
		if b == nil {
			b = &logBucket{tokens: logBurst, last: now}
			s.keys[msg] = b
		}
	}
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(logBurst, b.tokens+float64(el)/float64(logEvery))
		b.last = now
	}
	if b.tokens < 1 {
		b.suppressed++
		return false, 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return true, n
}

func (h *limitHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *limitHandler) Handle(ctx context.Context, rec slog.Record) error {
	ok, dropped := h.st.allow(rec.Message)
	if !ok {
		return nil
	}
	if dropped > 0 {
		rec = rec.Clone()
		rec.AddAttrs(slog.Int("suppressed", dropped))
	}
	return h.next.Handle(ctx, rec)
}

func (h *limitHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &limitHandler{next: h.next.WithAttrs(as), st: h.st}
}

func (h *limitHandler) WithGroup(name string) slog.Handler {
	return &limitHandler{next: h.next.WithGroup(name), st: h.st}
}

// demoteInfo is a slog.Handler that logs the Info lines of a component
// at Debug: the intake runner's per-attempt lines, which the relay's own
// warnings and errors replace at the default level.
type demoteInfo struct{ next slog.Handler }

func demoted(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h demoteInfo) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, demoted(l))
}

func (h demoteInfo) Handle(ctx context.Context, rec slog.Record) error {
	rec.Level = demoted(rec.Level)
	return h.next.Handle(ctx, rec)
}

func (h demoteInfo) WithAttrs(as []slog.Attr) slog.Handler {
	return demoteInfo{h.next.WithAttrs(as)}
}

func (h demoteInfo) WithGroup(name string) slog.Handler { return demoteInfo{h.next.WithGroup(name)} }
