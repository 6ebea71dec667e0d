package gateway

import (
	"context"
	"sync"
)

// Calls in flight.
//
// A journaled call's entry is pending from its intent until its outcome is
// recorded: while Telegram answers it, and while the answer is written. A
// later attempt's identical call that reads the entry then would be
// answered unknown, though the answer is a round trip away. So the gateway
// keeps, per entry, the one call of its own that may have it pending, and
// an identical call waits for that call to end instead: before it asks
// the limiter for a turn, and again at its turn (the earlier call may have
// taken the entry meanwhile), when it gives the turn back uncounted and
// waits outside the limiter. When the earlier call ends, the entry holds
// its outcome: the later call replays the answer, or sends the call itself
// after a not-dispatched outcome.
//
// The wait is bounded by the waiting call's context and by the earlier
// call's own bounds (its send, then outcomeBound for its write), and a
// call waits at most maxFlightWaits times. Only this gateway's calls are
// known: an identical call in flight in another process still reads as
// pending, and is answered unknown.

// maxFlightWaits bounds how often one call waits for identical calls in
// flight before it takes the journal's word, pending or not.
const maxFlightWaits = 4

// callsInFlight maps a journal entry to the call of this gateway that may
// hold it pending. Safe for concurrent use; it holds one entry per call
// in flight, so the gateway's bounds on calls bound it.
type callsInFlight struct {
	mu    sync.Mutex
	calls map[outcomeKey]chan struct{} // closed when the call ended
}

func newCallsInFlight() *callsInFlight {
	return &callsInFlight{calls: make(map[outcomeKey]chan struct{})}
}

// enter takes k for the caller, who is about to record its intent. It
// returns the function that gives k back (call it exactly once, when the
// entry no longer waits on the caller), or, when another call holds k,
// nil and a channel closed when that call gives it back.
func (f *callsInFlight) enter(k outcomeKey) (leave func(), busy <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.calls[k]; ok {
		return nil, ch
	}
	ch := make(chan struct{})
	f.calls[k] = ch
	return func() {
		f.mu.Lock()
		delete(f.calls, k)
		f.mu.Unlock()
		close(ch)
	}, nil
}

// busy returns a channel closed when the call holding k gives it back, or
// nil when no call holds it.
func (f *callsInFlight) busy(k outcomeKey) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[k]
}

// wait returns once ch is closed, reporting true, or false when ctx ends
// first. onWait, when not nil, is called before waiting.
func waitFlight(ctx context.Context, ch <-chan struct{}, onWait func()) bool {
	if onWait != nil {
		onWait()
	}
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}
