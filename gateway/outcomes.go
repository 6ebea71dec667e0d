package gateway

import (
	"context"
	"errors"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
)

// Outcomes recorded after the answer.
//
// A journaled call costs two durable writes: its intent before it is sent,
// its outcome after. Only the intent must be durable before the send (it is
// what keeps a later attempt from sending the call again); the outcome only
// turns a pending entry, which a later attempt answers unknown, into the
// recorded answer it replays. So the app gets its answer as soon as
// Telegram's arrives, and the outcome is written meanwhile: it joins the
// store's next group commit, usually with other calls' intents, instead of
// costing the call a commit of its own. Losing it (a crash before it
// commits) leaves the entry pending, which is answered unknown and never
// sent again: safe, as a crash between send and outcome always was.
//
// The writes in flight are bounded (Config.MaxPendingOutcomes; beyond it an
// outcome is written before the answer, which slows the app down to the
// store's pace), and [Gateway.Close] waits for them. A later attempt's
// identical call that arrives while the outcome of the earlier one is being
// written waits for that write (flight.go), so it finds the recorded answer
// rather than the pending intent.

// outcomeKey names one journal entry.
type outcomeKey struct {
	updateID int64
	call     intake.Call
}

// outcomeWrites tracks the outcome writes in flight. Safe for concurrent
// use.
type outcomeWrites struct {
	max int // writes in flight at most; 0 means none (every write is synchronous)

	mu      sync.Mutex // serializes start and shutdown, so the bound holds
	closed  bool
	writing holds[outcomeKey] // given back when the write ended
}

func newOutcomeWrites(max int) *outcomeWrites {
	return &outcomeWrites{max: max}
}

// start registers a write of k's outcome to run after the answer. It
// reports false when the write must be made before the answer instead: the
// bound is reached, the gateway was shut down, or k is being written
// already. Otherwise the caller must call done when the write ended.
func (o *outcomeWrites) start(k outcomeKey) (done func(), ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.writing.len() >= o.max {
		return nil, false
	}
	done, _ = o.writing.take(k)
	return done, done != nil
}

// pending returns how many writes are in flight.
func (o *outcomeWrites) pending() int { return o.writing.len() }

// shutdown makes every later write synchronous and waits for the writes in
// flight, or until ctx ends.
func (o *outcomeWrites) shutdown(ctx context.Context) error {
	o.mu.Lock()
	o.closed = true
	chs := o.writing.all()
	o.mu.Unlock()
	for _, ch := range chs {
		select {
		case <-ch:
		case <-ctx.Done():
			return errors.Join(ErrOutcomesPending, ctx.Err())
		}
	}
	return nil
}

// ErrOutcomesPending is wrapped by [Gateway.Close]'s error when its
// context ended before every outcome write in flight finished. Those writes
// go on (each is bounded); an outcome that never commits leaves its call
// pending in the journal, which a later attempt answers unknown.
var ErrOutcomesPending = errors.New("gateway: outcome writes still in flight")
