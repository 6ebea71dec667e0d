package intake

import (
	"errors"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/backoff"
)

// defaultBackoff is the delay rule of [Backoff].
var defaultBackoff = backoff.Capped{Base: defaultRetryBase, Factor: 4, Max: defaultRetryLimit}

// Backoff is the default delay before retry number attempt (the attempt that
// failed, from 1): 5s × 4^(attempt−1), capped at 15 minutes. An attempt
// below 1 counts as 1.
func Backoff(attempt int) time.Duration {
	return defaultBackoff.Delay(attempt)
}

// DefaultRetry is the retry policy used when [Config.RetryFunc] is nil. It
// classifies err with [botapi.Classify]:
//
//   - a send whose outcome is unknown (the transport's
//     [transport.OutcomeUnknownError] anywhere in err, or seen by the
//     runner during the attempt; the gateway's Tgrelay-Outcome: unknown;
//     or, seen by the runner, a call answered without Telegram's JSON, as
//     with a proxy's error page)
//     is never repeated blindly: the update is given up at once, and its
//     exhaustion (dead letter) says "outcome unknown". Unless every such
//     send went through a replay journal (tgrelay's gateway marks its
//     errors ReplaySafe), where a retry replays the recorded answers
//     instead of sending twice: that is retried after [Backoff];
//   - a failure that Telegram proves permanent (evidence other than none,
//     not retryable — a blocked user, an invalid message) is abandoned;
//   - a 429 whose retry_after Telegram named is retried after exactly that
//     wait;
//   - anything else is retried after [Backoff](attempt). A plain
//     application error carries no evidence and is therefore retried.
//
// The runner adds to a handler's error what the transport saw of the
// attempt's Bot API requests (see [transport.WithResultFunc]): a send of
// unknown outcome, and Telegram's refusal of the last request when the
// library's error hides it. So the rules above hold whatever error type a
// library returns, as long as it sends through tgrelay's transport.
func DefaultRetry(err error, attempt int) (time.Duration, bool) {
	f := botapi.Classify(err)
	if f.Reason == botapi.ReasonUnknown && f.Evidence == botapi.EvidenceTransport {
		if f.ReplaySafe {
			return Backoff(attempt), true
		}
		return 0, false
	}
	if f.Evidence != botapi.EvidenceNone && !f.Retryable {
		return 0, false
	}
	if f.RetryAfter > 0 {
		return f.RetryAfter, true // Telegram's own word on when to come back
	}
	return Backoff(attempt), true
}

// retryDecision is the outcome of one failed attempt.
type retryDecision struct {
	retry bool
	delay time.Duration
	// guarded is set when the policy panicked or answered nonsense and the
	// default backoff was used instead.
	guarded bool
}

// decide applies, in order: the attempt ceiling, the handler's own verdict
// ([Abandon], [RetryLater]), the unparsable-body rule, then the policy,
// guarded against panics and negative delays.
func decide(policy func(error, int) (time.Duration, bool), err error, attempt, maxAttempts int) retryDecision {
	if attempt >= maxAttempts {
		return retryDecision{}
	}
	if errors.Is(err, ErrUnparsableBody) {
		return retryDecision{}
	}
	var ab *AbandonError
	if errors.As(err, &ab) {
		return retryDecision{}
	}
	var ra *RetryLaterError
	if errors.As(err, &ra) {
		return retryDecision{retry: true, delay: clampDelay(ra.Delay)}
	}
	d, ok, panicked := callPolicy(policy, err, attempt)
	if panicked || (ok && d < 0) {
		return retryDecision{retry: true, delay: Backoff(attempt), guarded: true}
	}
	if !ok {
		return retryDecision{}
	}
	return retryDecision{retry: true, delay: clampDelay(d)}
}

func callPolicy(policy func(error, int) (time.Duration, bool), err error, attempt int) (d time.Duration, ok, panicked bool) {
	defer func() {
		if recover() != nil {
			d, ok, panicked = 0, false, true
		}
	}()
	d, ok = policy(err, attempt)
	return d, ok, false
}

func clampDelay(d time.Duration) time.Duration {
	return min(max(d, 0), MaxRetryDelay)
}
