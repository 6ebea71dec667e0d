package throttle

import (
	"errors"
	"fmt"
	"time"
)

// ErrThrottled matches every [*WaitError] with errors.Is.
var ErrThrottled = errors.New("throttle: call refused")

// Reason says why a call was refused.
type Reason string

// The reasons of a [*WaitError].
const (
	// ReasonMaxWait: the call could not be granted within Config.MaxWait.
	ReasonMaxWait Reason = "max-wait"
	// ReasonPaused: a 429 from Telegram paused the chat (or the bot) beyond
	// the call's MaxWait, so waiting would not help; refused at once.
	ReasonPaused Reason = "paused"
	// ReasonQueueFull: Config.MaxQueue calls were already waiting.
	ReasonQueueFull Reason = "queue-full"
)

// WaitError reports a call the limiter refused: it could not be sent
// within Config.MaxWait. Nothing was sent. RetryAfter is the limiter's
// estimate of when the call could go, in whole seconds and at least one
// second, as Telegram states its own retry_after; [Transport] answers it
// as a Telegram-shaped 429. The message never contains a token.
type WaitError struct {
	// Method is the Bot API method of the call.
	Method string
	// ChatID is the chat's key (0 when the call named no chat).
	ChatID int64
	// Reason says why.
	Reason Reason
	// RetryAfter is when to try again (whole seconds, at least 1 s).
	RetryAfter time.Duration
}

// Error describes the refusal.
func (e *WaitError) Error() string {
	return fmt.Sprintf("throttle: %s to chat %d refused (%s): retry after %d s", e.Method, e.ChatID, e.Reason, int64(e.RetryAfter/time.Second))
}

// Is reports whether target is [ErrThrottled].
func (e *WaitError) Is(target error) bool { return target == ErrThrottled }

// retryAfterSeconds rounds d up to whole seconds, at least one.
func retryAfterSeconds(d time.Duration) time.Duration {
	if d <= time.Second {
		return time.Second
	}
	return (d + time.Second - 1) / time.Second * time.Second
}

// EventKind says what an [Event] reports.
type EventKind int

// The kinds of [Event].
const (
	// EventGranted: a counted call got its turn after waiting Event.Wait
	// (zero when it did not wait).
	EventGranted EventKind = iota + 1
	// EventTooManyRequests: Telegram answered a call 429; Event.RetryAfter
	// is its retry_after and Event.Scope what the limiter paused.
	EventTooManyRequests
	// EventRefused: the limiter refused a call (Event.Reason,
	// Event.RetryAfter given to the caller).
	EventRefused
)

// String names the kind.
func (k EventKind) String() string {
	switch k {
	case EventGranted:
		return "granted"
	case EventTooManyRequests:
		return "too-many-requests"
	case EventRefused:
		return "refused"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Scope is what a 429 from Telegram paused.
type Scope string

// The scopes of a pause.
const (
	// ScopeChat: only the chat of the refused call.
	ScopeChat Scope = "chat"
	// ScopeBot: every counted call of the bot.
	ScopeBot Scope = "bot"
)

// Event is one observation for [Observer].EventFunc.
type Event struct {
	Kind       EventKind
	Method     string        // the Bot API method
	ChatID     int64         // the chat's key; 0 when the call named none
	Wait       time.Duration // EventGranted: how long the call waited
	RetryAfter time.Duration // EventTooManyRequests, EventRefused
	Scope      Scope         // EventTooManyRequests
	Reason     Reason        // EventRefused
}
