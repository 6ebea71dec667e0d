package gateway

import (
	"context"
	"sync"
)

// bodyBudget bounds the request body bytes that all calls hold in memory
// at once (Config.MaxBufferedTotal): each call takes its share before it
// reads, and gives it back when it has been answered. Safe for concurrent
// use.
type bodyBudget struct {
	mu    sync.Mutex
	free  int64
	freed chan struct{} // closed, and replaced, whenever bytes are given back
}

func newBodyBudget(n int64) *bodyBudget { return &bodyBudget{free: n, freed: make(chan struct{})} }

// take waits until n bytes are free and takes them, or returns ctx's cause
// when ctx ends first.
func (b *bodyBudget) take(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			return nil
		}
		freed := b.freed
		b.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// give returns n bytes taken earlier.
func (b *bodyBudget) give(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.free += n
	close(b.freed)
	b.freed = make(chan struct{})
}
