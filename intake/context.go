package intake

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// maxReported bounds how many errors [ReportError] keeps for one attempt.
const maxReported = 16

// attemptKey is the context key of the running attempt.
type attemptKey struct{}

// attemptValue is what the runner puts in a handler's context.
type attemptValue struct {
	update  Update
	attempt Attempt
	// answer takes the app's answer for the attempt's record
	// (ReportAnswer); nil for none.
	answer *answerSlot

	mu       sync.Mutex
	reported []error
	closed   bool // the handler returned: reports are ignored
	// What the transport saw of this attempt's Bot API requests (through
	// transport.WithResultFunc), whatever the library made of it.
	unknown error            // the first request whose outcome is unknown
	refusal *botapi.APIError // Telegram's refusal, when the last request was refused
}

// errGatewayUnknown is what an answer with Tgrelay-Outcome: unknown means.
var errGatewayUnknown = errors.New("the gateway answered " + wire.HeaderOutcome + ": " + string(wire.OutcomeUnknown))

// observe records one request's result for the attempt.
func (v *attemptValue) observe(r transport.Result) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return
	}
	switch {
	case r.Unknown():
		if v.unknown == nil {
			v.unknown = r.Err
			if v.unknown == nil {
				v.unknown = &transport.OutcomeUnknownError{Err: errGatewayUnknown}
			}
		}
		v.refusal = nil
	case r.Err != nil:
		v.refusal = nil // not dispatched: the library's error says so
	default:
		v.refusal = botapi.ParseAnswer(r.Method, r.Status, r.Body)
		if foreignAnswer(r, v.refusal) {
			// A proxy's or a load balancer's page, not Telegram's word:
			// the call may have arrived, and nothing says it did not act.
			if v.unknown == nil {
				v.unknown = &transport.OutcomeUnknownError{Err: errForeignAnswer}
			}
			v.refusal = nil
		}
	}
}

// errForeignAnswer is what an answer without Telegram's JSON, to a call
// that may act, means.
var errForeignAnswer = errors.New("a call that may act was answered without Telegram's JSON (a proxy's page): it may have arrived")

// foreignAnswer reports whether r is an answer of someone other than
// Telegram (refusal, its parsed body, is NotJSON), whatever its status, to
// a Bot API method that may act: not a getX method, whose repeat changes
// nothing, nor a file download, whose Result has no method. Its outcome
// is unknown (as botapi.Classify reads such an answer).
func foreignAnswer(r transport.Result, refusal *botapi.APIError) bool {
	if refusal == nil || !refusal.NotJSON || !botapi.ValidMethod(r.Method) {
		return false
	}
	return len(r.Method) <= 3 || !strings.EqualFold(r.Method[:3], "get")
}

// seenError is the handler's error together with what the transport saw
// of the attempt's requests, so that the retry policy classifies the
// attempt by Telegram's answer and the transport's word even when the
// library's own error type hides them. Its message is the handler's.
type seenError struct {
	err  error
	seen []error
}

func (e *seenError) Error() string   { return errorText(e.err) }
func (e *seenError) Unwrap() []error { return append([]error{e.err}, e.seen...) }

// withAttempt returns ctx carrying the attempt on u.
func withAttempt(ctx context.Context, v *attemptValue) context.Context {
	return context.WithValue(ctx, attemptKey{}, v)
}

func attemptValueFrom(ctx context.Context) *attemptValue {
	if ctx == nil {
		return nil
	}
	v, _ := ctx.Value(attemptKey{}).(*attemptValue)
	return v
}

// AttemptFrom returns the attempt whose handler ctx (or a context derived
// from it) was given to. Handlers of libraries that pass only a context,
// such as go-telegram/bot's and telego's, find their attempt this way. ok
// is false outside a handler the [Runner] called. With a plain [Store] the
// attempt's ClaimID is empty and [Attempt.Owns] reports false.
func AttemptFrom(ctx context.Context) (a Attempt, ok bool) {
	v := attemptValueFrom(ctx)
	if v == nil {
		return Attempt{}, false
	}
	return v.attempt, true
}

// UpdateFrom returns the update whose handler ctx (or a context derived
// from it) was given to; ok is false outside a handler the [Runner] called.
func UpdateFrom(ctx context.Context) (u Update, ok bool) {
	v := attemptValueFrom(ctx)
	if v == nil {
		return Update{}, false
	}
	return v.update, true
}

// ReportError fails the attempt whose handler ctx was given to, even when
// that handler returns nil: it is for libraries whose handlers return
// nothing (go-telegram/bot's), where the error of a send cannot be
// returned. The attempt then ends as if the handler had returned err (all
// reported errors and the handler's own error joined), so the retry
// policy, [Abandon] and [RetryLater] apply to it. A nil err, or a ctx
// outside a handler the [Runner] called, reports nothing; ReportError
// reports whether err was recorded. At most 16 errors are kept per
// attempt; later ones are dropped. Report before the handler
// returns: a report after it is ignored.
func ReportError(ctx context.Context, err error) bool {
	v := attemptValueFrom(ctx)
	if v == nil || err == nil {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed || len(v.reported) >= maxReported {
		return false
	}
	v.reported = append(v.reported, err)
	return true
}

// outcome closes the attempt to reports and returns the handler's error
// joined with every reported one and, on failure, with what the transport
// saw: a request of unknown outcome (so the attempt is not repeated
// blindly), and Telegram's refusal of the last request when the error
// itself carries no evidence Classify can read.
func (v *attemptValue) outcome(herr error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	reported := v.reported
	v.reported, v.closed = nil, true
	switch {
	case len(reported) == 0:
	case herr == nil && len(reported) == 1:
		herr = reported[0]
	default:
		herr = errors.Join(append([]error{herr}, reported...)...)
	}
	if herr == nil {
		return nil
	}
	var seen []error
	if v.unknown != nil {
		seen = append(seen, v.unknown)
	}
	if v.refusal != nil && botapi.Classify(herr).Evidence == botapi.EvidenceNone {
		seen = append(seen, v.refusal)
	}
	if len(seen) == 0 {
		return herr
	}
	return &seenError{err: herr, seen: seen}
}
