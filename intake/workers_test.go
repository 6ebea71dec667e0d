package intake

import (
	"context"
	"testing"
	"testing/synctest"
)

func TestWorkersReuseWaitingGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		w := newWorkers(ctx, 2)

		ran := 0
		w.Go(func() { ran++ })
		synctest.Wait() // the task ran; its goroutine waits for the next
		w.Go(func() { ran++ })
		synctest.Wait()
		if ran != 2 {
			t.Fatalf("%d tasks ran, want 2", ran)
		}
		if got := w.started.Load(); got != 1 {
			t.Fatalf("%d goroutines started for two tasks one after the other, want 1 (the second reuses the first)", got)
		}

		// Three tasks at once need three goroutines; only maxIdle (2) of
		// them stay once the tasks end.
		release := make(chan struct{})
		for range 3 {
			w.Go(func() { <-release })
		}
		synctest.Wait()
		if got := w.started.Load(); got != 3 {
			t.Fatalf("%d goroutines started in all, want 3 (one reused, two new)", got)
		}
		close(release)
		synctest.Wait()
		if got := w.idle.Load(); got != 2 {
			t.Fatalf("%d idle workers, want maxIdle = 2", got)
		}

		// When the lifecycle's context ends the idle workers return:
		// synctest.Test fails if any goroutine of the bubble is left.
		cancel()
		synctest.Wait()
		if got := w.idle.Load(); got != 0 {
			t.Fatalf("%d idle workers after the context ended, want 0", got)
		}
	})
}

func TestWorkersNeverBlockTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := newWorkers(ctx, 0) // nobody ever waits for a task
		release := make(chan struct{})
		for range 100 {
			w.Go(func() { <-release })
		}
		synctest.Wait()
		if got := w.started.Load(); got != 100 {
			t.Fatalf("%d goroutines for 100 blocked tasks, want 100", got)
		}
		close(release)
		synctest.Wait()
		if got := w.idle.Load(); got != 0 {
			t.Fatalf("%d idle workers with maxIdle 0, want 0", got)
		}
	})
}

func TestWorkersTrimLetsIdleOnesGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w := newWorkers(ctx, 10)
		release := make(chan struct{})
		for range 5 {
			w.Go(func() { <-release })
		}
		close(release)
		synctest.Wait()
		for _, want := range []int32{2, 1, 0, 0} { // 5 idle: 3 go, then 1, then the last
			w.trim()
			synctest.Wait()
			if got := w.idle.Load(); got != want {
				t.Fatalf("%d idle workers after a trim, want %d", got, want)
			}
		}
		// A trimmed pool still runs tasks, on a goroutine of their own.
		ran := make(chan struct{})
		w.Go(func() { close(ran) })
		<-ran
		if got := w.started.Load(); got != 6 {
			t.Fatalf("%d goroutines started, want 6", got)
		}
	})
}

func TestWorkersWaitReturnsOnceEveryWorkerLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		w := newWorkers(ctx, 10)
		for range 3 {
			w.Go(func() {})
		}
		release := make(chan struct{})
		w.Go(func() { <-release }) // still busy when ctx ends
		synctest.Wait()
		cancel()
		waited := make(chan struct{})
		go func() {
			w.wait()
			close(waited)
		}()
		synctest.Wait()
		select {
		case <-waited:
			t.Fatal("wait returned while a worker still ran its task")
		default:
		}
		close(release)
		synctest.Wait()
		select {
		case <-waited:
		default:
			t.Fatal("wait still blocked after the context ended and the last task returned")
		}
		if got := w.idle.Load(); got != 0 {
			t.Fatalf("%d idle workers after wait, want 0", got)
		}
	})
}
