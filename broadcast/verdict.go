package broadcast

import (
	"errors"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

// Kind is the kind of a [Verdict].
type Kind string

// The kinds of [Verdict].
const (
	// KindPauseAll: the attempt certainly had no effect (Telegram's 429
	// with retry_after, its flood wait); every sender pauses for
	// Verdict.Pause, then this recipient is retried. A wait
	// above Config.MaxRetryDelay halts the broadcast with the recipient
	// pending (it is never shortened).
	KindPauseAll Kind = "pause-all"
	// KindTransient: the attempt certainly had no effect; retried after a
	// capped doubling backoff, up to Config.MaxAttempts.
	KindTransient Kind = "transient"
	// KindPermanent: final for this recipient (recorded unreachable when
	// Verdict.Unreachable, else failed), or, with Verdict.Stop, a halt of
	// the whole broadcast with the recipient left pending.
	KindPermanent Kind = "permanent"
	// KindAmbiguous: the message may have arrived. The recipient is
	// recorded uncertain, never sent again automatically, and the broadcast
	// halts.
	KindAmbiguous Kind = "ambiguous"
	// KindMigrated: the chat moved to Verdict.MigrateTo (a group upgraded to
	// a supergroup). The message is sent once to the new chat, and the
	// mapping is recorded with the outcome.
	KindMigrated Kind = "migrated"
)

// Bounds of a [Verdict].
const (
	// MaxReasonLen is the longest Verdict.Reason, in bytes.
	MaxReasonLen = 64
	// MaxPause is the longest Verdict.Pause a classifier may
	// return.
	MaxPause = 24 * time.Hour
)

// ErrInvalidVerdict is returned (wrapped) by [Run] when the classifier
// returns a Verdict that [Verdict.Validate] refuses. The run ends, and the
// recipient concerned, whose intent is in the journal, becomes uncertain.
var ErrInvalidVerdict = errors.New("broadcast: invalid verdict")

// Verdict is the failure policy for one failed send: what the runner does
// next. Build one with [PauseAll], [Transient], [Unreachable], [Failed],
// [StopBroadcast], [Ambiguous] or [Migrated]. The zero Verdict is invalid.
type Verdict struct {
	Kind        Kind
	Pause       time.Duration // KindPauseAll: 0..MaxPause
	Unreachable bool          // KindPermanent: the recipient is gone (blocked, deactivated, …)
	Stop        bool          // KindPermanent: halt the broadcast; the recipient stays pending
	MigrateTo   int64         // KindMigrated: the new chat id, non-zero
	Reason      string        // optional, at most MaxReasonLen bytes; recorded in the journal
}

// PauseAll returns a verdict that pauses every sender for exactly d, then
// retries this recipient (Telegram asked to wait d).
func PauseAll(d time.Duration, reason string) Verdict {
	return Verdict{Kind: KindPauseAll, Pause: d, Reason: reason}
}

// Transient returns a verdict to retry with the runner's backoff.
func Transient(reason string) Verdict { return Verdict{Kind: KindTransient, Reason: reason} }

// Unreachable returns a verdict recording the recipient unreachable.
func Unreachable(reason string) Verdict {
	return Verdict{Kind: KindPermanent, Unreachable: true, Reason: reason}
}

// Failed returns a verdict recording the recipient failed.
func Failed(reason string) Verdict { return Verdict{Kind: KindPermanent, Reason: reason} }

// StopBroadcast returns a verdict halting the broadcast, the recipient
// pending (for a refusal of the message itself).
func StopBroadcast(reason string) Verdict {
	return Verdict{Kind: KindPermanent, Stop: true, Reason: reason}
}

// Ambiguous returns a verdict recording the recipient uncertain and halting.
func Ambiguous(reason string) Verdict { return Verdict{Kind: KindAmbiguous, Reason: reason} }

// Migrated returns a verdict resending once to the chat id to.
func Migrated(to int64, reason string) Verdict {
	return Verdict{Kind: KindMigrated, MigrateTo: to, Reason: reason}
}

// Validate reports whether v is a well-formed verdict.
func (v Verdict) Validate() error {
	if len(v.Reason) > MaxReasonLen {
		return fmt.Errorf("%w: reason longer than %d bytes", ErrInvalidVerdict, MaxReasonLen)
	}
	switch v.Kind {
	case KindPauseAll:
		if v.Pause < 0 || v.Pause > MaxPause {
			return fmt.Errorf("%w: retry after %v outside 0..%v", ErrInvalidVerdict, v.Pause, MaxPause)
		}
	case KindPermanent:
		if v.Unreachable && v.Stop {
			return fmt.Errorf("%w: both unreachable and stop", ErrInvalidVerdict)
		}
	case KindMigrated:
		if v.MigrateTo == 0 {
			return fmt.Errorf("%w: migrated without a chat id", ErrInvalidVerdict)
		}
	case KindTransient, KindAmbiguous:
	default:
		return fmt.Errorf("%w: kind %q", ErrInvalidVerdict, v.Kind)
	}
	return nil
}

// Classify is the default classifier, built on [botapi.Classify]:
//
//   - recipient unreachable (blocked, deactivated, chat not found, not
//     started): Unreachable;
//   - message invalid: StopBroadcast (fix the message, run again);
//   - chat migrated with a new id: Migrated; without one: Failed;
//   - rate limited with retry_after: PauseAll (clamped to MaxPause);
//   - other retryable reasons (not dispatched, 429 without a wait,
//     Telegram's own 5xx): Transient;
//   - unrecognized-refusal, a 4xx in Telegram's own JSON answer (Telegram
//     refused, but for a reason we do not recognise, which may concern
//     every recipient): StopBroadcast, the recipient pending;
//   - anything else unknown (no answer, a proxy's page): Ambiguous.
func Classify(err error) Verdict {
	f := botapi.Classify(err)
	reason := string(f.Reason)
	switch {
	case f.RecipientUnreachable:
		return Unreachable(reason)
	case f.Reason == botapi.ReasonMessageInvalid:
		return StopBroadcast(reason)
	case f.Reason == botapi.ReasonChatMigrated:
		if f.MigrateToChatID != 0 {
			return Migrated(f.MigrateToChatID, reason)
		}
		return Failed(reason)
	case f.Reason == botapi.ReasonRateLimited && f.RetryAfter > 0:
		return PauseAll(min(f.RetryAfter, MaxPause), reason)
	case f.Retryable:
		return Transient(reason)
	}
	var apiErr *botapi.APIError
	if errors.As(err, &apiErr) && !apiErr.NotJSON && apiErr.Code >= 400 && apiErr.Code < 500 {
		return StopBroadcast(fmt.Sprintf("%s-%d", reason, apiErr.Code))
	}
	return Ambiguous(reason)
}
