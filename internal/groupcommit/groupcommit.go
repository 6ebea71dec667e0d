// Package groupcommit shares one durable commit among concurrent callers
// (leader/follower group commit).
//
// A caller that finds no commit in progress becomes the leader and commits
// at once, with no timer and so no added latency when idle. Callers that
// arrive while a commit runs queue up; when it ends, the first of them leads
// the next commit, of up to Max queued requests. The queue is bounded by the
// number of concurrent callers, and, with Wait set, so is each request's
// time in it, by one timer for the whole queue rather than one per caller.
package groupcommit

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Group commits requests of type Req in batches, answering each with a Res.
// The zero value is not usable; fill CommitFunc, Max and Bound. A Group is
// safe for concurrent use.
type Group[Req, Res any] struct {
	// CommitFunc commits a batch durably and answers one Res per request,
	// in order. An error fails every request of the batch. ctx is the
	// batch's own: one caller's cancellation does not cancel the others'
	// commit, but Bound ends it.
	CommitFunc func(ctx context.Context, batch []Req) ([]Res, error)
	// Max is the largest batch, at least 1.
	Max int
	// Bound limits one CommitFunc call.
	Bound time.Duration
	// Wait, when positive, bounds how long a request waits in the queue
	// for its batch to begin: one that has waited Wait is never
	// committed, and Do returns [context.DeadlineExceeded]. A request
	// whose batch began, or that was made the next leader, waits for its
	// commit as with a context that ends (see Do). One timer serves the
	// whole queue, so a bounded wait costs a caller no timer or context
	// of its own. Set it before the first call.
	Wait time.Duration

	mu       sync.Mutex
	busy     bool // a leader is committing
	pending  []*request[Req, Res]
	deferred []*request[Req, Res] // Defer's, waiting for a batch someone else starts
	idleFrom time.Time            // when the last batch ended and none followed
	timer    *time.Timer          // starts a batch for the deferred; armed while any wait
	due      bool                 // the timer fired during a batch: the deferred go next
	expiry   *time.Timer          // ends the waits longer than Wait; armed while any request waits
	expiring bool                 // expiry is armed
}

type request[Req, Res any] struct {
	req  Req
	wake chan struct{} // receives once: committed, promoted to leader, or its wait expired
	// until is when its wait ends (Group.Wait); zero without a bound.
	until time.Time

	// Guarded by Group.mu.
	promoted  bool
	taken     bool // in a batch another caller leads: its caller waits for the outcome
	done      bool
	abandoned bool // the caller stopped waiting before its batch began, or waited Wait (err says)
	res       Res
	err       error
}

// Do commits req, alone or in a batch with concurrent callers, and returns
// its answer. When ctx ends while req still waits for a batch, Do returns
// ctx.Err() and req is never committed; once its batch began, Do waits for
// the batch's outcome (bounded by Bound), so a caller never mistakes a
// committed request for a failed one.
func (g *Group[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	r := &request[Req, Res]{req: req, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		g.lead(ctx, r)
		return g.answer(r)
	}
	g.pending = append(g.pending, r)
	g.boundLocked(r)
	g.mu.Unlock()
	return g.wait(ctx, r)
}

// Defer is Do for a request in no hurry. While the group is busy, or was
// less than d ago, req does not start a batch of its own: it waits, at
// most about d, to ride in the next batch another request starts. When
// none starts, it starts one itself. A group idle for longer than d
// commits req at once, as Do does. Cancellation is as for Do.
//
// Under steady load that saves a commit per deferred request: a store
// defers what nobody waits on (a completion's record), and the commits
// the waiting requests make anyway carry it.
func (g *Group[Req, Res]) Defer(ctx context.Context, req Req, d time.Duration) (Res, error) {
	r := &request[Req, Res]{req: req, wake: make(chan struct{}, 1)}
	g.mu.Lock()
	if !g.busy && time.Since(g.idleFrom) > d {
		g.busy = true
		g.mu.Unlock()
		g.lead(ctx, r)
		return g.answer(r)
	}
	g.deferred = append(g.deferred, r)
	g.boundLocked(r)
	if len(g.deferred) == 1 {
		if g.timer == nil {
			g.timer = time.AfterFunc(d, g.startDeferred)
		} else {
			g.timer.Reset(d)
		}
	}
	g.mu.Unlock()
	return g.wait(ctx, r)
}

// startDeferred is the timer's: with no batch running, the first deferred
// request leads one; with one running, the deferred are due: the next
// batch takes them, or the first of them leads one when the running batch
// ends with nobody else queued.
func (g *Group[Req, Res]) startDeferred() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.busy {
		g.due = true
		return
	}
	g.promoteDeferredLocked()
}

// promoteDeferredLocked makes the first deferred request still wanted the
// leader of a new batch, and reports whether there was one.
func (g *Group[Req, Res]) promoteDeferredLocked() bool {
	g.deferred = slices.DeleteFunc(g.deferred, func(p *request[Req, Res]) bool { return p.abandoned })
	if len(g.deferred) == 0 {
		return false
	}
	next := g.deferred[0]
	g.deferred = g.deferred[1:]
	g.busy, g.due = true, false
	next.promoted = true
	next.wake <- struct{}{}
	return true
}

// wait waits for r, queued, to be committed or promoted to leader, and
// returns its answer.
func (g *Group[Req, Res]) wait(ctx context.Context, r *request[Req, Res]) (Res, error) {
	select {
	case <-r.wake:
	case <-ctx.Done():
		g.mu.Lock()
		if !r.taken && !r.promoted && !r.abandoned {
			r.abandoned = true
			g.mu.Unlock()
			var zero Res
			return zero, ctx.Err()
		}
		g.mu.Unlock()
		<-r.wake // already committed, promoted or expired: the signal is on its way
	}
	g.mu.Lock()
	promoted := r.promoted && !r.done
	g.mu.Unlock()
	if promoted {
		g.lead(ctx, r)
	}
	return g.answer(r)
}

// boundLocked starts the bound of queued request r's wait, arming the
// queue's timer when it is not: requests queue in the order their waits
// end, so the timer only ever needs the earliest.
func (g *Group[Req, Res]) boundLocked(r *request[Req, Res]) {
	if g.Wait <= 0 {
		return
	}
	r.until = time.Now().Add(g.Wait)
	if g.expiring {
		return
	}
	g.expiring = true
	if g.expiry == nil {
		g.expiry = time.AfterFunc(g.Wait, g.expire)
	} else {
		g.expiry.Reset(g.Wait)
	}
}

// expire is the queue timer's: every request still queued whose wait has
// ended leaves the queue, answered with context.DeadlineExceeded, and the
// timer is armed again for the earliest wait left, if any. A lapse of the
// timer that finds no wait ended (the requests it was armed for were
// committed meanwhile) only arms it again.
func (g *Group[Req, Res]) expire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	var next time.Time
	drop := func(p *request[Req, Res]) bool {
		switch {
		case p.abandoned:
			return true
		case p.until.After(now):
			if next.IsZero() || p.until.Before(next) {
				next = p.until
			}
			return false
		}
		p.abandoned, p.err = true, context.DeadlineExceeded
		p.wake <- struct{}{}
		return true
	}
	g.pending = slices.DeleteFunc(g.pending, drop)
	g.deferred = slices.DeleteFunc(g.deferred, drop)
	if next.IsZero() {
		g.expiring = false
		return
	}
	g.expiry.Reset(next.Sub(now))
}

func (g *Group[Req, Res]) answer(r *request[Req, Res]) (Res, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return r.res, r.err
}

// Busy reports whether a batch is being committed: a request made now
// would wait for it.
func (g *Group[Req, Res]) Busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.busy
}

// Waiting reports how many requests wait for a batch: queued behind the
// commit in progress or deferred, not yet in one. Tests use it to know that
// callers have joined the queue.
func (g *Group[Req, Res]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, p := range slices.Concat(g.pending, g.deferred) {
		if !p.abandoned {
			n++
		}
	}
	return n
}

// lead commits r with up to Max-1 queued requests, the deferred ones
// after the others, then hands the leadership to the next queued request,
// or ends it.
func (g *Group[Req, Res]) lead(ctx context.Context, r *request[Req, Res]) {
	g.mu.Lock()
	batch := []*request[Req, Res]{r}
	g.pending = g.fill(&batch, g.pending)
	g.deferred = g.fill(&batch, g.deferred)
	if len(g.deferred) == 0 && g.timer != nil {
		g.timer.Stop()
		g.due = false
	}
	g.mu.Unlock()

	reqs := make([]Req, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.Bound)
	res, err := g.CommitFunc(bctx, reqs)
	cancel()
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("groupcommit: %d answers for %d requests", len(res), len(batch))
	}

	g.mu.Lock()
	for i, p := range batch {
		p.done = true
		if err != nil {
			p.err = err
		} else {
			p.res = res[i]
		}
		if p != r {
			p.wake <- struct{}{}
		}
	}
	g.handOffLocked()
	g.mu.Unlock()
}

// fill moves the requests of queue that are still wanted into *batch, up
// to Max, marking them taken, and returns those left over.
func (g *Group[Req, Res]) fill(batch *[]*request[Req, Res], queue []*request[Req, Res]) []*request[Req, Res] {
	for i, p := range queue {
		if p.abandoned {
			continue
		}
		if len(*batch) == g.Max {
			return slices.Clone(queue[i:])
		}
		p.taken = true
		*batch = append(*batch, p)
	}
	return nil
}

// handOffLocked promotes the first queued request to leader, else the
// first deferred one whose wait ran out, or ends the commit in progress
// (deferred requests wait for their timer or another request's batch).
func (g *Group[Req, Res]) handOffLocked() {
	for len(g.pending) > 0 {
		next := g.pending[0]
		g.pending[0] = nil
		g.pending = g.pending[1:]
		if next.abandoned {
			continue
		}
		next.promoted = true
		next.wake <- struct{}{}
		return
	}
	g.pending = nil
	if g.due && g.promoteDeferredLocked() {
		return
	}
	g.busy = false
	g.idleFrom = time.Now()
}
