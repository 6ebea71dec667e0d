package intake_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

func nop(context.Context, intake.Update) error { return nil }

// Port of reference test 17: a pending update waits PendingGrace for its
// own process, then any process takes it; finished ones are forgotten after
// Retention.
func TestPendingGraceAndRetention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var calls atomic.Int32
		r := newRunner(t, intake.Config{
			Store:        store,
			PendingGrace: time.Second,
			Retention:    5 * time.Second,
			Handler:      func(context.Context, intake.Update) error { calls.Add(1); return nil },
		})
		start(t, r)
		// Another process recorded update 1 a moment ago.
		if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: msg(1, 1), ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second - time.Millisecond)
		if n := sweep(t, r); n != 0 {
			t.Fatalf("sweep within the grace scheduled %d", n)
		}
		time.Sleep(time.Millisecond)
		if n := sweep(t, r); n != 1 {
			t.Fatalf("sweep after the grace scheduled %d, want 1", n)
		}
		idle(t, r)
		time.Sleep(5 * time.Second)
		sweep(t, r)
		mustAccept(t, r, msg(1, 1), intake.Duplicate)
		time.Sleep(time.Millisecond)
		sweep(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if calls.Load() != 2 {
			t.Fatalf("handled %d times, want 2 (once more after pruning)", calls.Load())
		}
	})
}

// Port of reference test 18: the sweep runs on its own every SweepInterval,
// and takes over a row no process scheduled (here one recorded behind the
// runner's back, as another process would).
func TestBackgroundSweepRunsEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := make(chan time.Time, 2)
		store := memstore.New()
		r := newRunner(t, intake.Config{
			Store:         store,
			SweepInterval: 10 * time.Millisecond,
			PendingGrace:  time.Nanosecond,
			Handler: func(context.Context, intake.Update) error {
				calls <- time.Now()
				return nil
			},
		})
		start(t, r)
		t0 := time.Now()
		if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: msg(1, 1), ReceivedAt: t0}); err != nil {
			t.Fatal(err)
		}
		if first := <-calls; first.Sub(t0) != 10*time.Millisecond {
			t.Fatalf("row handled after %v, want at the first background sweep (10ms)", first.Sub(t0))
		}
	})
}

// Port of reference test 19: Close during the initial sweep prevents that
// start from installing the background sweep.
func TestCloseDuringInitialSweepInstallsNoTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		entered := make(chan struct{})
		release := make(chan struct{})
		store.DueFunc = func(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
			if store.Calls("Due") == 1 {
				close(entered)
				<-release
			}
			return store.Store.Due(ctx, q)
		}
		r := newRunner(t, intake.Config{Store: store, SweepInterval: 10 * time.Millisecond, Handler: nop})
		startErr := make(chan error, 1)
		go func() { startErr <- r.Start(context.Background()) }()
		<-entered
		closeErr := make(chan error, 1)
		go func() { closeErr <- r.Close(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-closeErr:
			t.Fatalf("Close returned %v while the initial sweep was blocked", err)
		default:
		}
		close(release)
		if err := <-startErr; err != nil {
			t.Fatalf("Start: %v", err)
		}
		if err := <-closeErr; err != nil {
			t.Fatalf("Close: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
		if n := store.Calls("Due"); n != 1 {
			t.Fatalf("Due called %d times, want 1 (no background sweep)", n)
		}

		// Port of reference test 20: a fresh lifecycle starts afterwards,
		// handles new updates, and its timer runs.
		start(t, r)
		mustAccept(t, r, msg(3, 3), intake.Accepted)
		idle(t, r)
		before := store.Calls("Due")
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		if store.Calls("Due") != before+1 {
			t.Fatalf("Due calls %d → %d over one interval, want one background sweep", before, store.Calls("Due"))
		}
		if got := row(t, store, 3); got.State != intake.StateCompleted {
			t.Fatalf("update accepted in the new lifecycle is %q, want completed", got.State)
		}
	})
}

// Port of reference test 21: a failed initial sweep leaves Start
// retryable.
func TestFailedInitialSweepLeavesStartRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.DueFunc = func(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
			if store.Calls("Due") == 1 {
				return nil, errBoom
			}
			return store.Store.Due(ctx, q)
		}
		r := newRunner(t, intake.Config{Store: store, Handler: nop})
		if err := r.Start(t.Context()); !errors.Is(err, errBoom) {
			t.Fatalf("first Start = %v, want the store error", err)
		}
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		synctest.Wait()
		if got := row(t, store, 1); got.State != intake.StatePending {
			t.Fatalf("an update accepted after a failed Start is %q, want pending (not scheduled)", got.State)
		}
		start(t, r)
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("after the second Start the update is %q, want completed", got.State)
		}
	})
}

// Port of reference test 22: concurrent starts share one failed initial
// sweep, and a later Start tries again.
func TestConcurrentStartsShareOneInitialSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		release := make(chan struct{})
		store.DueFunc = func(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
			if store.Calls("Due") == 1 {
				<-release
				return nil, errBoom
			}
			return store.Store.Due(ctx, q)
		}
		r := newRunner(t, intake.Config{Store: store, Handler: nop})
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() { errs[i] = r.Start(context.Background()) })
		}
		synctest.Wait()
		close(release)
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, errBoom) || err.Error() != errs[0].Error() {
				t.Fatalf("Start %d = %v, want the shared store error %v", i, err, errs[0])
			}
		}
		if n := store.Calls("Due"); n != 1 {
			t.Fatalf("Due called %d times by concurrent starts, want 1", n)
		}
		start(t, r)
		if n := store.Calls("Due"); n != 2 {
			t.Fatalf("Due called %d times after a retried Start, want 2", n)
		}
		start(t, r) // started: returns at once
		if n := store.Calls("Due"); n != 2 {
			t.Fatalf("Start on a started runner swept again (%d Due calls)", n)
		}
	})
}

// Port of reference test 23: at most MaxConcurrent handlers run at once.
func TestMaxConcurrentBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, peak, done atomic.Int32
		r := newRunner(t, intake.Config{
			Store:         memstore.New(),
			MaxConcurrent: 2,
			Handler: func(context.Context, intake.Update) error {
				n := running.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(time.Second)
				running.Add(-1)
				done.Add(1)
				return nil
			},
		})
		start(t, r)
		for id := int64(1); id <= 6; id++ {
			mustAccept(t, r, msg(id, 100+id), intake.Accepted)
		}
		idle(t, r)
		if peak.Load() != 2 || done.Load() != 6 {
			t.Fatalf("peak %d over %d handled, want 2 over 6", peak.Load(), done.Load())
		}
	})
}

// Close waits for handlers in flight; when its context ends first it
// cancels them with ErrClosed and returns the context's error.
func TestCloseDeadlineCancelsHungHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		causes := make(chan error, 1)
		ignoring := make(chan struct{})
		r, err := intake.New(intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				if u.ID == 2 {
					<-ignoring // a handler that ignores its context
					return nil
				}
				<-ctx.Done()
				causes <- context.Cause(ctx)
				return ctx.Err()
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		synctest.Wait() // both handlers run
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close = %v, want DeadlineExceeded", err)
		}
		if waited := time.Since(t0); waited != 3*time.Second {
			t.Fatalf("Close returned after %v, want at its deadline", waited)
		}
		if cause := <-causes; !errors.Is(cause, intake.ErrClosed) {
			t.Fatalf("handler cause %v, want ErrClosed", cause)
		}
		if err := r.Close(context.Background()); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		close(ignoring)
		synctest.Wait()
		// Neither attempt settled after the forced close: both rows are left
		// processing, for a reclaim when their leases lapse.
		for _, id := range []int64{1, 2} {
			if got := row(t, store, id); got.State != intake.StateProcessing {
				t.Errorf("row %d is %q after a forced close, want processing", id, got.State)
			}
		}
	})
}

// Close without Start, twice, is fine; Close drops updates that were only
// waiting on their line.
func TestCloseWithoutStartAndDropsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		r, err := intake.New(intake.Config{Store: store, Handler: nop})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := r.Close(t.Context()); err != nil {
				t.Fatalf("Close without Start = %v", err)
			}
		}
		release := make(chan struct{})
		var handled []int64
		r2 := newRunner(t, intake.Config{Store: store, Handler: func(_ context.Context, u intake.Update) error {
			handled = append(handled, u.ID)
			<-release
			return nil
		}})
		start(t, r2)
		mustAccept(t, r2, msg(1, 1), intake.Accepted)
		mustAccept(t, r2, msg(2, 1), intake.Accepted) // waits behind 1
		synctest.Wait()
		closed := make(chan error)
		go func() { closed <- r2.Close(context.Background()) }()
		synctest.Wait()
		close(release)
		if err := <-closed; err != nil {
			t.Fatalf("Close = %v", err)
		}
		if len(handled) != 1 || row(t, store, 2).State != intake.StatePending {
			t.Fatalf("handled %v, row 2 %q; want only 1 handled and 2 left pending", handled, row(t, store, 2).State)
		}
		mustAccept(t, r2, msg(3, 3), intake.Accepted) // recorded after Close, not scheduled
		synctest.Wait()
		if got := row(t, store, 3).State; got != intake.StatePending {
			t.Fatalf("update accepted after Close is %q, want pending", got)
		}
	})
}

// A handler that Close cancels at its drain deadline on the update's last
// attempt does not make the update an exhaustion: the row is left
// processing, as a killed process leaves it, with a store that would
// still write the exhaustion after the cancellation (SQLite).
func TestCloseDeadlineNeverExhaustsTheLastAttempt(t *testing.T) {
	t.Parallel()
	store, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "intake.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	running := make(chan struct{})
	failed := make(chan intake.Failure, 1)
	var exhausted atomic.Int32
	r, err := intake.New(intake.Config{
		Store:       store,
		MaxAttempts: 1,
		Handler: func(ctx context.Context, u intake.Update) error {
			close(running)
			<-ctx.Done()
			return errors.New("the app is still refusing") // not the context's error: a failure
		},
		ExhaustionHandler: func(context.Context, intake.Exhaustion) error { exhausted.Add(1); return nil },
		Observer: intake.Observer{
			ExhaustFunc: func(intake.Exhaustion) { exhausted.Add(1) },
			FailureFunc: func(f intake.Failure) { failed <- f },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	closeGivingUp(t, r, running)
	select {
	case f := <-failed:
		if !f.Retrying {
			t.Errorf("failure reported as not retried: %+v", f)
		}
	case <-time.After(time.Minute):
		t.Fatal("the cancelled attempt's failure was never reported")
	}
	if got := row(t, store, 1); got.State != intake.StateProcessing {
		t.Errorf("row is %q after a forced close on its last attempt, want processing (not given up)", got.State)
	}
	if n := exhausted.Load(); n != 0 {
		t.Errorf("%d exhaustions delivered", n)
	}
}

// closeGivingUp starts r, accepts update 1 and, once its handler signals
// running (the handler then waits for its context), closes r with a
// deadline of 50 ms, which must end before the handler returns.
func closeGivingUp(t *testing.T, r *intake.Runner, running <-chan struct{}) {
	t.Helper()
	start(t, r)
	mustAccept(t, r, msg(1, 1), intake.Accepted)
	<-running
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := r.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
}
