package intake

import (
	"context"
	"sync"
	"sync/atomic"
)

// workers runs a lifecycle's short tasks, chat lines and settlements, on
// goroutines that outlive them. A goroutine that finishes a task waits for
// the next one, up to maxIdle goroutines at once, until ctx ends or trim
// lets it go; a task that finds none waiting gets a goroutine of its own.
//
// A fresh goroutine starts with a small stack and grows it, by copying,
// into the forward's deep call chain: in bench relay that copying was 5%
// of serve's CPU, and a goroutine per chat line and per settlement paid it
// for every update. A waiting worker keeps its grown stack (until the
// garbage collector shrinks an idle one).
type workers struct {
	ctx     context.Context
	tasks   chan func() // unbuffered: a send succeeds only into a waiting worker
	idle    atomic.Int32
	maxIdle int32
	started atomic.Int64   // goroutines started, for tests
	wg      sync.WaitGroup // every goroutine started, until it returns
}

func newWorkers(ctx context.Context, maxIdle int) *workers {
	return &workers{ctx: ctx, tasks: make(chan func()), maxIdle: int32(maxIdle)}
}

// Go runs f on a waiting worker, or on a new goroutine when none waits. It
// never blocks. f accounts for itself (the run's WaitGroup): an idle
// worker is no work of the run's, so Close does not wait for it.
func (w *workers) Go(f func()) {
	select {
	case w.tasks <- f:
	default:
		w.started.Add(1)
		w.wg.Add(1)
		go w.work(f)
	}
}

// work runs f, then waits for more tasks while fewer than maxIdle workers
// wait, and until ctx ends.
func (w *workers) work(f func()) {
	defer w.wg.Done()
	for {
		f()
		f = nil // hold nothing of the finished task while waiting
		if w.idle.Add(1) > w.maxIdle {
			w.idle.Add(-1)
			return
		}
		select {
		case f = <-w.tasks:
			w.idle.Add(-1)
			if f == nil { // trim
				return
			}
		case <-w.ctx.Done():
			w.idle.Add(-1)
			return
		}
	}
}

// trim lets half of the waiting workers go (the last one too), so that a
// burst's goroutines do not outlive it: the sweep calls it at every tick
// (30 s by default), and a few quiet minutes leave none. Under load the
// few it lets go are started again as needed.
func (w *workers) trim() {
	for n := (w.idle.Load() + 1) / 2; n > 0; n-- {
		select {
		case w.tasks <- nil:
		default:
			return // none waits any more
		}
	}
}

// wait waits until every worker has returned. Called once ctx has ended
// and no task runs any more (Close, after a complete drain), it returns as
// soon as the idle workers have seen ctx end.
func (w *workers) wait() { w.wg.Wait() }
