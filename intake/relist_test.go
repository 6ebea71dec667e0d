package intake_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// requeueRun is a runner, never started, over one stored update whose
// first attempt fails and whose later ones succeed. On the first failure,
// once the attempt settled the row and before its line unqueues the
// update, an operator requeues the row and a sweep runs: the sweep lists
// the row due, and must skip it, still queued.
type requeueRun struct {
	store *claimingStore // counts the claims asked of it (claim_on_add_test.go)
	r     *intake.Runner

	mu        sync.Mutex
	handled   []intake.Update // the updates the handler was given, in order
	requeued  bool            // the requeue in the failure's observer took the row
	relisted  int             // what that sweep newly scheduled
	sweepErr  error
	late      int // LateFunc calls
	exhausted int // ExhaustionHandler calls
}

// newRequeueRun records body as update 1, received ago (past the pending
// grace), and builds the runner of cfg over it. A LateFunc or an
// ExhaustionHandler of cfg is replaced by one that counts its calls; an
// ExpireFunc of cfg, by the requeue (else FailureFunc makes it).
func newRequeueRun(t *testing.T, body []byte, ago time.Duration, cfg intake.Config) *requeueRun {
	t.Helper()
	q := &requeueRun{store: newClaimingStore()}
	received := time.Now().Add(-ago).Truncate(time.Millisecond)
	if ok, err := q.store.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: body, ReceivedAt: received}); err != nil || !ok {
		t.Fatalf("Add = %v, %v", ok, err)
	}
	cfg.Store = q.store
	cfg.Handler = func(_ context.Context, u intake.Update) error {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.handled = append(q.handled, u)
		if len(q.handled) == 1 {
			return errors.New("the first attempt fails")
		}
		return nil
	}
	requeueAndSweep := func() {
		ctx := context.Background()
		ok, err := q.store.Requeue(ctx, 1, time.Now())
		if err != nil {
			t.Errorf("Requeue: %v", err)
		}
		n, serr := q.r.Sweep(ctx)
		q.mu.Lock()
		q.requeued, q.relisted, q.sweepErr = ok, n, serr
		q.mu.Unlock()
	}
	// An expiry settles the row after its failure is told: the requeue
	// then comes once it is told expired.
	if cfg.Observer.ExpireFunc != nil {
		cfg.Observer.ExpireFunc = func(intake.Expiry) { requeueAndSweep() }
	} else {
		cfg.Observer.FailureFunc = func(intake.Failure) { requeueAndSweep() }
	}
	if cfg.Deadlines.LateFunc != nil {
		cfg.Deadlines.LateFunc = func(context.Context, intake.Update) {
			q.mu.Lock()
			q.late++
			q.mu.Unlock()
		}
	}
	if cfg.ExhaustionHandler != nil {
		cfg.ExhaustionHandler = func(context.Context, intake.Exhaustion) error {
			q.mu.Lock()
			q.exhausted++
			q.mu.Unlock()
			return nil
		}
	}
	q.r = newRunner(t, cfg)
	return q
}

// A row an operator requeues while this process still has its update
// queued (its attempt settled it, and its line has not yet unqueued it) is
// skipped by a sweep; the line then schedules it again as it unqueues it,
// with no sweep: Idle returns only once the requeued update ran. That
// holds for an abandoned update, for an exhausted one (which is then no
// exhaustion to deliver), for one with a deadline, on its own lane
// (which its late call, still armed for the first attempt, does not
// decline: the update runs again), and for one that expired (its retry
// would have come after its deadline).
func TestRequeuedWhileQueuedRunsAgainAtOnce(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, intake.Update) {}
	for _, tc := range []struct {
		name string
		body []byte
		cfg  intake.Config
	}{
		{"abandoned", msg(1, 5), intake.Config{}},
		{"exhausted", msg(1, 5), intake.Config{ExhaustionHandler: func(context.Context, intake.Exhaustion) error { return nil }}},
		// Received a minute ago: past the pending grace, an hour before
		// its deadline.
		{"deadline", callbackQuery(1, 5), intake.Config{PendingGrace: time.Second,
			Deadlines: intake.Deadlines{CallbackQuery: intake.MaxDeadline, LateFunc: noop}}},
		// Its retry would come after its deadline, so it expires.
		{"expired", callbackQuery(1, 5), intake.Config{PendingGrace: time.Second, MaxAttempts: 5,
			RetryFunc: func(error, int) (time.Duration, bool) { return 24 * time.Hour, true },
			Deadlines: intake.Deadlines{CallbackQuery: intake.MaxDeadline, LateFunc: noop},
			Observer:  intake.Observer{ExpireFunc: func(intake.Expiry) {}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := tc.cfg
			if cfg.MaxAttempts == 0 {
				cfg.MaxAttempts = 1 // the first failure ends the row
			}
			q := newRequeueRun(t, tc.body, time.Minute, cfg)
			if n := sweep(t, q.r); n != 1 {
				t.Fatalf("the first sweep scheduled %d, want 1", n)
			}
			idle(t, q.r)
			q.mu.Lock()
			handled, requeued, relisted, serr := len(q.handled), q.requeued, q.relisted, q.sweepErr
			q.mu.Unlock()
			if !requeued || relisted != 0 || serr != nil {
				t.Fatalf("the requeue took the row %v; the sweep after it scheduled %d, %v; want true, 0 (still queued), nil",
					requeued, relisted, serr)
			}
			if got := row(t, q.store, 1); handled != 2 || got.State != intake.StateCompleted {
				t.Fatalf("once Idle returned: handled %d times, row %q; want 2, completed (run again with no sweep)",
					handled, got.State)
			}
			if err := q.r.Close(t.Context()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			q.mu.Lock()
			defer q.mu.Unlock()
			if q.late != 0 || q.exhausted != 0 {
				t.Errorf("LateFunc called %d times, ExhaustionHandler %d; want 0, 0 (the update was requeued, and then answered)",
					q.late, q.exhausted)
			}
			if tc.name == "deadline" && q.handled[1].Deadline.IsZero() {
				t.Errorf("the requeued update ran without its deadline")
			}
		})
	}
}

// A row requeued while its update waits on its line for an in-process
// retry is skipped by a sweep too, and left to the retry: the update runs
// once more, with one claim, and nothing schedules it a third time.
func TestRequeuedWhileHeldForRetryRunsOnce(t *testing.T) {
	t.Parallel()
	completed := make(chan struct{})
	q := newRequeueRun(t, msg(1, 5), time.Minute, intake.Config{
		RetryFunc: func(error, int) (time.Duration, bool) { return time.Millisecond, true },
		Observer: intake.Observer{SettleFunc: func(_ intake.Identity, s intake.State) {
			if s == intake.StateCompleted {
				close(completed)
			}
		}},
	})
	if n := sweep(t, q.r); n != 1 {
		t.Fatalf("the first sweep scheduled %d, want 1", n)
	}
	select {
	case <-completed:
	case <-t.Context().Done():
		t.Fatal("the retry never completed")
	}
	idle(t, q.r)
	if err := q.r.Close(t.Context()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.requeued || q.relisted != 0 || q.sweepErr != nil {
		t.Fatalf("the requeue took the row %v; the sweep after it scheduled %d, %v; want true, 0 (held for its retry), nil",
			q.requeued, q.relisted, q.sweepErr)
	}
	q.store.mu.Lock()
	claims := q.store.claims
	q.store.mu.Unlock()
	if got := row(t, q.store, 1); len(q.handled) != 2 || claims != 2 || got.State != intake.StateCompleted {
		t.Fatalf("handled %d times with %d claims, row %q; want 2, 2, completed", len(q.handled), claims, got.State)
	}
}

// A row an operator requeues while its exhaustion is being delivered is
// skipped by a sweep, the delivery still running; the delivery's end
// schedules it again, with no sweep: Idle returns only once the requeued
// update ran.
func TestRequeuedWhileDeliveredRunsAgainAtOnce(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	received := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	if ok, err := st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: msg(1, 5), ReceivedAt: received}); err != nil || !ok {
		t.Fatalf("Add = %v, %v", ok, err)
	}
	var (
		mu                 sync.Mutex
		handled, delivered int
		requeued           bool
		relisted           int
		sweepErr           error
		r                  *intake.Runner
	)
	r = newRunner(t, intake.Config{
		Store:       st,
		MaxAttempts: 1, // the first failure exhausts the row
		Handler: func(context.Context, intake.Update) error {
			mu.Lock()
			defer mu.Unlock()
			if handled++; handled == 1 {
				return errors.New("the first attempt fails")
			}
			return nil
		},
		ExhaustionHandler: func(ctx context.Context, e intake.Exhaustion) error {
			ok, err := st.Requeue(ctx, e.UpdateID, time.Now())
			if err != nil {
				t.Errorf("Requeue: %v", err)
			}
			n, serr := r.Sweep(ctx)
			mu.Lock()
			defer mu.Unlock()
			delivered++
			requeued, relisted, sweepErr = ok, n, serr
			return nil
		},
	})
	if n := sweep(t, r); n != 1 {
		t.Fatalf("the first sweep scheduled %d, want 1", n)
	}
	idle(t, r)
	mu.Lock()
	defer mu.Unlock()
	if delivered != 1 || !requeued || relisted != 0 || sweepErr != nil {
		t.Fatalf("delivered %d; the requeue took the row %v; the sweep after it scheduled %d, %v; want 1, true, 0 (still delivering), nil",
			delivered, requeued, relisted, sweepErr)
	}
	if got := row(t, st, 1); handled != 2 || got.State != intake.StateCompleted {
		t.Fatalf("once Idle returned: handled %d times, row %q; want 2, completed (run again with no sweep)", handled, got.State)
	}
}
