package gateway

import "context"

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

// callsInFlight holds, per journal entry, the call of this gateway that
// may hold it pending: taken just before its intent is recorded, given
// back once its outcome is (or the intent was not recorded).
type callsInFlight = holds[outcomeKey]

// waitFlight returns once ch is closed, reporting true, or false when ctx ends
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
