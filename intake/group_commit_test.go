package intake_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Concurrent Accept calls share one AddBatch each while a commit runs, in
// batches of at most MaxBatch.
func TestGroupCommitBatchesConcurrentAccepts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		entered := make(chan struct{})
		release := make(chan struct{})
		store.AddBatchFunc = func(ctx context.Context, us []intake.AddRequest) ([]intake.AddResult, error) {
			if store.Calls("AddBatch") == 1 {
				close(entered)
				<-release
			}
			return store.Store.AddBatch(ctx, us)
		}
		r := newRunner(t, intake.Config{Store: store, Handler: nop, MaxBatch: 4})
		results := make([]intake.Acceptance, 12)
		var wg sync.WaitGroup
		wg.Go(func() { results[1], _ = r.Accept(context.Background(), msg(1, 1)) })
		<-entered // the first commit runs; the rest queue behind it
		for id := 2; id <= 11; id++ {
			wg.Go(func() { results[id], _ = r.Accept(context.Background(), msg(int64(id), 1)) })
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		for id := 1; id <= 11; id++ {
			if results[id] != intake.Accepted {
				t.Errorf("Accept %d = %v", id, results[id])
			}
		}
		if got, want := store.BatchSizes(), []int{1, 4, 4, 2}; !slices.Equal(got, want) {
			t.Fatalf("AddBatch sizes %v, want %v (11 accepts in 4 commits)", got, want)
		}
		if store.Calls("Add") != 0 {
			t.Fatalf("Add called %d times beside AddBatch", store.Calls("Add"))
		}
	})
}

// A lone Accept commits at once: no batch window, no timer.
func TestGroupCommitLoneAcceptNotDelayed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		r := newRunner(t, intake.Config{Store: store, Handler: nop})
		t0 := time.Now()
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		// In the bubble the clock moves only when every goroutine waits, so
		// any timer on the way would show here.
		if waited := time.Since(t0); waited != 0 {
			t.Fatalf("a lone Accept waited %v", waited)
		}
		if got := store.BatchSizes(); !slices.Equal(got, []int{1}) {
			t.Fatalf("AddBatch sizes %v, want [1]", got)
		}
	})
}

// Duplicates inside one batch: the first wins. A failed batch fails every
// caller in it, and a caller that stops waiting does not hold up others.
func TestGroupCommitDuplicatesErrorsAndCancellation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		entered := make(chan struct{})
		release := make(chan struct{})
		fail := false
		store.AddBatchFunc = func(ctx context.Context, us []intake.AddRequest) ([]intake.AddResult, error) {
			if store.Calls("AddBatch") == 1 {
				close(entered)
				<-release
			}
			if fail {
				return nil, errBoom
			}
			return store.Store.AddBatch(ctx, us)
		}
		r := newRunner(t, intake.Config{Store: store, Handler: nop})
		var wg sync.WaitGroup
		var first intake.Acceptance
		wg.Go(func() { first, _ = r.Accept(context.Background(), msg(1, 1)) })
		<-entered
		dup := make([]intake.Acceptance, 2)
		for i := range dup {
			wg.Go(func() { dup[i], _ = r.Accept(context.Background(), msg(2, 1)) })
		}
		cctx, cancel := context.WithCancel(context.Background())
		var cancelledErr error
		wg.Go(func() { _, cancelledErr = r.Accept(cctx, msg(3, 1)) })
		synctest.Wait()
		cancel()
		synctest.Wait()
		close(release)
		wg.Wait()
		slices.Sort(dup)
		if first != intake.Accepted || dup[0] != intake.Accepted || dup[1] != intake.Duplicate {
			t.Fatalf("results %v %v, want accepted, then one accepted and one duplicate", first, dup)
		}
		if !errors.Is(cancelledErr, context.Canceled) {
			t.Fatalf("cancelled Accept = %v", cancelledErr)
		}
		if got := store.BatchSizes(); !slices.Equal(got, []int{1, 2}) {
			t.Fatalf("AddBatch sizes %v, want [1 2] (the cancelled caller left the queue)", got)
		}

		fail = true
		_, err := r.Accept(context.Background(), msg(4, 1))
		if !errors.Is(err, errBoom) {
			t.Fatalf("Accept with a failing AddBatch = %v, want the store error", err)
		}
	})
}

// A caller that stops waiting once its update's commit has begun is
// answered by that commit: the update is recorded, so Accept says so
// rather than fail a write that happened (the webhook would answer 503 for
// an update it stored).
func TestGroupCommitCancelledDuringItsCommitIsAccepted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		release := make(chan struct{})
		store.AddBatchFunc = func(ctx context.Context, us []intake.AddRequest) ([]intake.AddResult, error) {
			<-release
			return store.Store.AddBatch(ctx, us)
		}
		r := newRunner(t, intake.Config{Store: store, Handler: nop})
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = r.Accept(context.Background(), msg(1, 1)) })
		synctest.Wait() // 1's commit runs
		wg.Go(func() { _, _ = r.Accept(context.Background(), msg(2, 2)) })
		synctest.Wait() // 2 queues first
		cctx, cancel := context.WithCancel(context.Background())
		var (
			got intake.Acceptance
			err error
		)
		wg.Go(func() { got, err = r.Accept(cctx, msg(3, 3)) })
		synctest.Wait() // then 3
		release <- struct{}{}
		synctest.Wait() // the commit of 2 and 3 begins
		if sizes := store.BatchSizes(); !slices.Equal(sizes, []int{1, 2}) {
			t.Fatalf("AddBatch sizes %v, want [1 2] begun", sizes)
		}
		cancel()
		synctest.Wait()
		close(release)
		wg.Wait()
		if err != nil || got != intake.Accepted {
			t.Fatalf("Accept cancelled while its commit ran = %v, %v; want Accepted: the update was recorded", got, err)
		}
		if _, ok, _ := store.Get(context.Background(), 3); !ok {
			t.Fatal("update 3 was not recorded")
		}
	})
}
