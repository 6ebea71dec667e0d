package intake

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// committer groups concurrent adds into one [BatchStore.AddBatch]
// (leader/follower group commit). A caller that finds no commit in progress
// becomes the leader and commits at once, with no timer and no added
// latency. Callers that arrive while a commit runs queue up; when it ends,
// the first of them leads the next commit of up to max queued adds. The
// queue is bounded by the number of concurrent callers.
type committer struct {
	store BatchStore
	max   int
	bound time.Duration // bound of one AddBatch

	mu      sync.Mutex
	busy    bool // a leader is committing
	pending []*addReq
}

type addReq struct {
	in   Incoming
	wake chan struct{} // receives once: committed, or promoted to leader

	// Guarded by committer.mu.
	promoted  bool
	done      bool
	abandoned bool // the caller stopped waiting
	added     bool
	err       error
}

func newCommitter(s BatchStore, max int, bound time.Duration) *committer {
	return &committer{store: s, max: max, bound: bound}
}

// add records in, alone or in a batch with concurrent callers.
func (c *committer) add(ctx context.Context, in Incoming) (bool, error) {
	req := &addReq{in: in, wake: make(chan struct{}, 1)}
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		c.lead(ctx, req)
	} else {
		c.pending = append(c.pending, req)
		c.mu.Unlock()
		select {
		case <-req.wake:
		case <-ctx.Done():
			c.mu.Lock()
			if !req.done && !req.promoted {
				req.abandoned = true
				c.mu.Unlock()
				return false, ctx.Err()
			}
			c.mu.Unlock()
			<-req.wake // already committed or promoted: the signal is on its way
		}
		c.mu.Lock()
		promoted := req.promoted && !req.done
		c.mu.Unlock()
		if promoted {
			c.lead(ctx, req)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return req.added, req.err
}

// lead commits req with up to max-1 queued requests, then hands the
// leadership to the next queued request, or ends it.
func (c *committer) lead(ctx context.Context, req *addReq) {
	c.mu.Lock()
	batch := []*addReq{req}
	var rest []*addReq
	for i, p := range c.pending {
		if p.abandoned {
			continue
		}
		if len(batch) == c.max {
			rest = append(rest, c.pending[i:]...)
			break
		}
		batch = append(batch, p)
	}
	c.pending = rest
	c.mu.Unlock()

	ins := make([]Incoming, len(batch))
	for i, p := range batch {
		ins[i] = p.in
	}
	// The batch belongs to every caller in it: one caller's cancellation
	// must not fail the others.
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.bound)
	added, err := c.store.AddBatch(bctx, ins)
	cancel()
	if err == nil && len(added) != len(batch) {
		err = fmt.Errorf("AddBatch answered %d results for %d updates", len(added), len(batch))
	}

	c.mu.Lock()
	for i, p := range batch {
		p.done = true
		if err != nil {
			p.err = err
		} else {
			p.added = added[i]
		}
		if p != req {
			p.wake <- struct{}{}
		}
	}
	c.handOffLocked()
	c.mu.Unlock()
}

// handOffLocked promotes the first waiting request to leader, or ends the
// commit in progress when none waits.
func (c *committer) handOffLocked() {
	for len(c.pending) > 0 {
		next := c.pending[0]
		c.pending[0] = nil
		c.pending = c.pending[1:]
		if next.abandoned {
			continue
		}
		next.promoted = true
		next.wake <- struct{}{}
		return
	}
	c.pending = nil
	c.busy = false
}
