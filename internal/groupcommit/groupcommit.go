// Package groupcommit shares one durable commit among concurrent callers
// (leader/follower group commit).
//
// A caller that finds no commit in progress becomes the leader and commits
// at once, with no timer and so no added latency when idle. Callers that
// arrive while a commit runs queue up; when it ends, the first of them leads
// the next commit, of up to Max queued requests. The queue is bounded by the
// number of concurrent callers.
package groupcommit

import (
	"context"
	"fmt"
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

	mu      sync.Mutex
	busy    bool // a leader is committing
	pending []*request[Req, Res]
}

type request[Req, Res any] struct {
	req  Req
	wake chan struct{} // receives once: committed, or promoted to leader

	// Guarded by Group.mu.
	promoted  bool
	done      bool
	abandoned bool // the caller stopped waiting before its batch began
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
	} else {
		g.pending = append(g.pending, r)
		g.mu.Unlock()
		select {
		case <-r.wake:
		case <-ctx.Done():
			g.mu.Lock()
			if !r.done && !r.promoted {
				r.abandoned = true
				g.mu.Unlock()
				var zero Res
				return zero, ctx.Err()
			}
			g.mu.Unlock()
			<-r.wake // already committed or promoted: the signal is on its way
		}
		g.mu.Lock()
		promoted := r.promoted && !r.done
		g.mu.Unlock()
		if promoted {
			g.lead(ctx, r)
		}
	}
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
// commit in progress, not yet in one. Tests use it to know that callers
// have joined the queue.
func (g *Group[Req, Res]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, p := range g.pending {
		if !p.abandoned {
			n++
		}
	}
	return n
}

// lead commits r with up to Max-1 queued requests, then hands the
// leadership to the next queued request, or ends it.
func (g *Group[Req, Res]) lead(ctx context.Context, r *request[Req, Res]) {
	g.mu.Lock()
	batch := []*request[Req, Res]{r}
	var rest []*request[Req, Res]
	for i, p := range g.pending {
		if p.abandoned {
			continue
		}
		if len(batch) == g.Max {
			rest = append(rest, g.pending[i:]...)
			break
		}
		batch = append(batch, p)
	}
	g.pending = rest
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

// handOffLocked promotes the first waiting request to leader, or ends the
// commit in progress when none waits.
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
	g.busy = false
}
