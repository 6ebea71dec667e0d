package intake_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// With RetryOutOfOrder, at most MaxQueued failed updates wait in this
// process for their retry's due time. A failure beyond that bound waits in
// the store: its retry runs when a sweep finds it due, not on a timer of
// its own at its due time.
func TestOutOfOrderRetryWaitersBoundedByMaxQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		delays := map[int64]time.Duration{1: time.Hour, 2: time.Minute}
		var mu sync.Mutex
		runs := map[int64]int{}
		r := newRunner(t, intake.Config{
			Store:           store,
			MaxQueued:       1,
			RetryOutOfOrder: true,
			SweepInterval:   intake.MaxSweepInterval, // no periodic sweep during the test
			Handler: func(_ context.Context, u intake.Update) error {
				mu.Lock()
				runs[u.ID]++
				n := runs[u.ID]
				mu.Unlock()
				if n == 1 {
					return intake.RetryLater(errBoom, delays[u.ID])
				}
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r) // update 1 waits an hour for its retry, off its line
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		idle(t, r) // update 2 failed too: its retry, a minute away, finds the one waiter's place taken

		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if got := row(t, store, 2); got.State != intake.StateFailed || got.Attempts != 1 {
			t.Fatalf("update 2 is %q after %d attempts a minute past its retry's due time, want failed after 1: "+
				"a second retry waited in the process beyond MaxQueued (1)", got.State, got.Attempts)
		}

		// The sweep is what runs it.
		if n := sweep(t, r); n != 1 {
			t.Fatalf("Sweep scheduled %d, want 1 (update 2, due)", n)
		}
		idle(t, r)
		if got := row(t, store, 2); got.State != intake.StateCompleted || got.Attempts != 2 {
			t.Fatalf("update 2 is %q after %d attempts, want completed after 2", got.State, got.Attempts)
		}
		if got := row(t, store, 1); got.State != intake.StateFailed {
			t.Fatalf("update 1 is %q, want failed: its retry is an hour away", got.State)
		}
	})
}
