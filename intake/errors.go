package intake

import (
	"errors"
	"fmt"
	"time"
)

// ErrClosed is the cancellation cause of handler contexts that
// [Runner.Close] cancelled because its drain deadline passed.
var ErrClosed = errors.New("intake: runner closed before the handler finished")

// ErrNotOwner is the answer of a store's Once (sqlitestore, pgstore) to an
// attempt that no longer owns its update: its lease lapsed or another
// attempt claimed the update since. The effect was not applied. Test for it
// with errors.Is.
var ErrNotOwner = errors.New("intake: attempt no longer owns the update")

// ErrUnparsableBody is the failure of an update whose stored body is not a
// Telegram update (a row written by something other than [Runner.Accept]).
// Such an update is never handed to a handler: it is exhausted or abandoned
// at once.
var ErrUnparsableBody = errors.New("intake: stored body is not a Telegram update")

// OwnershipLostError is the cancellation cause of a handler's context when
// its attempt lost the row: a renewal or settlement was refused, or the last
// lease the store confirmed ended. Retrieve it with [context.Cause] and
// [errors.As]. Its message never contains the update body.
type OwnershipLostError struct {
	// Identity is the attempt that lost its ownership.
	Identity Identity
	// Err is the store error behind the loss, if any (nil when the store
	// simply refused).
	Err error
}

// Error implements error.
func (e *OwnershipLostError) Error() string {
	msg := fmt.Sprintf("intake: update %d attempt %d lost ownership", e.Identity.UpdateID, e.Identity.Attempt)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the store error behind the loss, if any.
func (e *OwnershipLostError) Unwrap() error { return e.Err }

// AbandonError is a handler's verdict that repeating cannot help: the update
// is exhausted (or abandoned) at once, whatever the retry policy says.
// Build it with [Abandon].
type AbandonError struct {
	Err error
}

// Abandon wraps err so the runner gives the update up at once: no retry, an
// exhaustion when an [Config.ExhaustionHandler] is set. A nil err still
// abandons, with a generic message.
func Abandon(err error) error {
	return &AbandonError{Err: err}
}

// Error implements error.
func (e *AbandonError) Error() string {
	if e.Err == nil {
		return "intake: abandoned by the handler"
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *AbandonError) Unwrap() error { return e.Err }

// RetryLaterError is a handler's verdict that the update should run again
// after Delay, whatever the retry policy says (the attempt ceiling still
// applies). Build it with [RetryLater]. It is the handler's own schedule,
// not Telegram's retry_after (which [DefaultRetry] already honours).
type RetryLaterError struct {
	Err   error
	Delay time.Duration
}

// RetryLater wraps err so the runner retries the update after d (a negative
// d means at once; a d above [MaxRetryDelay] is cut to it), unless its
// attempts are spent.
func RetryLater(err error, d time.Duration) error {
	return &RetryLaterError{Err: err, Delay: d}
}

// Error implements error.
func (e *RetryLaterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("intake: retry after %v requested by the handler", e.Delay)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *RetryLaterError) Unwrap() error { return e.Err }

// PanicError is the failure of a handler that panicked.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
}

// Error implements error.
func (e *PanicError) Error() string {
	return fmt.Sprintf("intake: handler panicked: %v", e.Value)
}

// Unwrap returns Value when it is an error.
func (e *PanicError) Unwrap() error {
	if err, ok := e.Value.(error); ok {
		return err
	}
	return nil
}
