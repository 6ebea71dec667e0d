package gateway

import (
	"time"

	"github.com/tgrelay/tgrelay/wire"
)

// CallEvent describes one call the gateway answered.
type CallEvent struct {
	// Method is the Bot API method, or "file" for a file download. Only
	// names of letters, digits and underscores up to 64 bytes reach an
	// event; any other is reported as "invalid".
	Method string
	// Outcome is how it was answered. For a replayed call it is the
	// recorded outcome (answered or unknown).
	Outcome wire.Outcome
	// Status is the HTTP status the app got.
	Status int
	// Fenced tells whether the call carried an attempt identity.
	Fenced bool
	// WebhookReply tells whether the call was a webhook reply the relay
	// performed for the app ([Gateway.Reply]).
	WebhookReply bool
	// Replayed tells whether the answer came from the journal, without a
	// send.
	Replayed bool
	// Telegram429 tells whether Telegram itself answered 429 (its limits
	// were hit despite the limiter).
	Telegram429 bool
	// Tries is how often the call was handed to the transport (0 for a
	// replayed, stale or refused call).
	Tries int
	// Duration is the time from the call's arrival to its answer.
	Duration time.Duration
	// Undelivered tells that the app did not get the answer: its
	// connection had ended when the answer was written, or writing it
	// failed (as far as the server can tell: an answer the kernel took for
	// a connection the app closed a moment later counts as delivered).
	// Such a call, if it was sent, still has its outcome journaled. Only
	// [Gateway.ServeHTTP] reports it.
	Undelivered bool
}

// Observer receives the gateway's events, for metrics. It is a struct of
// optional funcs, the shape of every tgrelay observer (see "Observers" in
// package intake's doc); the zero Observer observes nothing. CallFunc is
// called synchronously on the call's goroutine, concurrently: it must be
// quick and safe for concurrent use.
type Observer struct {
	// CallFunc sees every call the gateway answered.
	CallFunc func(CallEvent)
}
