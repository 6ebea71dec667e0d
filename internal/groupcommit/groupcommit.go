// Package groupcommit shares one durable commit among concurrent callers
// (leader/follower group commit).
//
// A caller that finds no commit in progress becomes the leader and commits
// at once, with no timer and so no added latency when idle. Callers that
// arrive while a commit runs queue up. When it ends, one goroutine commits
// the queued requests, up to Max a batch, batch after batch until the queue
// is empty, so under load the next batch starts the moment the last one is
// answered rather than once a woken caller is scheduled. The queue is
// bounded by the number of concurrent callers.
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

	mu       sync.Mutex
	busy     bool // a batch is being committed (by a leader or run)
	pending  []*request[Req, Res]
	deferred []*request[Req, Res] // Defer's, waiting for a batch someone else starts
	idleFrom time.Time            // when the last batch ended and none followed
	timer    *time.Timer          // starts a batch for the deferred; armed while any wait
	due      bool                 // the timer fired: the deferred make a batch of their own
}

type request[Req, Res any] struct {
	ctx  context.Context // the first request's values ride in its batch's context
	req  Req
	wake chan struct{} // receives once: answered

	// Guarded by Group.mu.
	taken     bool // in a batch: its caller waits for the outcome
	abandoned bool // the caller stopped waiting before its batch began
	res       Res
	err       error
}

func newRequest[Req, Res any](ctx context.Context, req Req) *request[Req, Res] {
	return &request[Req, Res]{ctx: ctx, req: req, wake: make(chan struct{}, 1)}
}

// Do commits req, alone or in a batch with concurrent callers, and returns
// its answer. When ctx ends while req still waits for a batch, Do returns
// ctx.Err() and req is never committed; once its batch began, Do waits for
// the batch's outcome (bounded by Bound), so a caller never mistakes a
// committed request for a failed one.
func (g *Group[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	r := newRequest[Req, Res](ctx, req)
	g.mu.Lock()
	if !g.busy {
		g.lead(r)
		return g.answer(r)
	}
	g.pending = append(g.pending, r)
	g.mu.Unlock()
	return g.wait(ctx, r)
}

// Defer is Do for a request in no hurry. While the group is busy, or was
// less than d ago, req does not start a batch of its own: it waits, at
// most about d, to ride in the next batch another request starts. When
// none starts, a batch starts for it. A group idle for longer than d
// commits req at once, as Do does. Cancellation is as for Do.
//
// Under steady load that saves a commit per deferred request: a store
// defers what nobody waits on (a completion's record), and the commits
// the waiting requests make anyway carry it.
func (g *Group[Req, Res]) Defer(ctx context.Context, req Req, d time.Duration) (Res, error) {
	r := newRequest[Req, Res](ctx, req)
	g.mu.Lock()
	if !g.busy && time.Since(g.idleFrom) > d {
		g.lead(r)
		return g.answer(r)
	}
	g.deferred = append(g.deferred, r)
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

// startDeferred is the timer's: the deferred requests are due. With a batch
// running, the next batch takes them even when nobody else is queued; with
// none running, a batch starts for them now.
func (g *Group[Req, Res]) startDeferred() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.due = true
	if g.busy {
		return
	}
	if batch := g.nextLocked(); batch != nil {
		g.busy = true
		go g.run(batch)
	}
}

// wait waits for r, queued, to be answered, and returns its answer.
func (g *Group[Req, Res]) wait(ctx context.Context, r *request[Req, Res]) (Res, error) {
	select {
	case <-r.wake:
	case <-ctx.Done():
		g.mu.Lock()
		if !r.taken {
			r.abandoned = true
			g.mu.Unlock()
			var zero Res
			return zero, ctx.Err()
		}
		g.mu.Unlock()
		<-r.wake // its batch began: its outcome is at most Bound away
	}
	return g.answer(r)
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

// lead, called with g.mu held on an idle group, commits r at once in the
// caller's goroutine, with the deferred requests that fit. When requests
// queued meanwhile, a goroutine of its own commits them (run), so the
// caller is answered now. It returns with g.mu released.
func (g *Group[Req, Res]) lead(r *request[Req, Res]) {
	g.busy = true
	r.taken = true
	batch := []*request[Req, Res]{r}
	g.deferred = g.fill(&batch, g.deferred)
	g.settleDeferredLocked()
	g.mu.Unlock()
	if next := g.commit(batch); next != nil {
		go g.run(next)
	}
}

// run commits batch and then every batch queued behind it, until the queue
// is empty.
func (g *Group[Req, Res]) run(batch []*request[Req, Res]) {
	for batch != nil {
		batch = g.commit(batch)
	}
}

// commit commits batch, answers its requests and returns the next batch,
// already taken from the queue, or nil when there is none and the group is
// idle again.
func (g *Group[Req, Res]) commit(batch []*request[Req, Res]) []*request[Req, Res] {
	reqs := make([]Req, len(batch))
	for i, p := range batch {
		reqs[i] = p.req
	}
	bctx, cancel := context.WithTimeout(context.WithoutCancel(batch[0].ctx), g.Bound)
	res, err := g.CommitFunc(bctx, reqs)
	cancel()
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("groupcommit: %d answers for %d requests", len(res), len(batch))
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	for i, p := range batch {
		if err != nil {
			p.err = err
		} else {
			p.res = res[i]
		}
		p.wake <- struct{}{} // buffered: a leader answered in its own goroutine never reads it
	}
	next := g.nextLocked()
	if next == nil {
		g.busy = false
		g.idleFrom = time.Now()
	}
	return next
}

// nextLocked takes the next batch from the queue: the queued requests, up to
// Max, then the deferred ones that fit. Deferred requests alone make a batch
// only once due. It returns nil when there is nothing to commit.
func (g *Group[Req, Res]) nextLocked() []*request[Req, Res] {
	var batch []*request[Req, Res]
	g.pending = g.fill(&batch, g.pending)
	if len(batch) == 0 && !g.due {
		return nil
	}
	g.deferred = g.fill(&batch, g.deferred)
	g.settleDeferredLocked()
	if len(batch) == 0 {
		return nil
	}
	return batch
}

// settleDeferredLocked stops the deferred requests' timer once none is left.
func (g *Group[Req, Res]) settleDeferredLocked() {
	if len(g.deferred) == 0 {
		g.due = false
		if g.timer != nil {
			g.timer.Stop()
		}
	}
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
