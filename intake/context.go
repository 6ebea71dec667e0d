package intake

import (
	"context"
	"errors"
	"sync"
)

// maxReported bounds how many errors [ReportError] keeps for one attempt.
const maxReported = 16

// attemptKey is the context key of the running attempt.
type attemptKey struct{}

// attemptValue is what the runner puts in a handler's context.
type attemptValue struct {
	update  Update
	attempt Attempt

	mu       sync.Mutex
	reported []error
	closed   bool // the handler returned: reports are ignored
}

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
// joined with every reported one.
func (v *attemptValue) outcome(herr error) error {
	v.mu.Lock()
	defer v.mu.Unlock()
	reported := v.reported
	v.reported, v.closed = nil, true
	if len(reported) == 0 {
		return herr
	}
	if herr == nil && len(reported) == 1 {
		return reported[0]
	}
	return errors.Join(append([]error{herr}, reported...)...)
}
