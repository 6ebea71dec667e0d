package intake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A retry delay finer than the stores' millisecond is rounded up, never
// down: the retry is never due before the policy's delay has passed.
func TestRetryDueNeverBeforeItsDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const delay = 1500 * time.Microsecond
		store := memstore.New()
		var failedAt time.Time
		r := newRunner(t, intake.Config{
			Store: store,
			AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
				if a.Attempt == 1 {
					failedAt = time.Now()
					return errBoom
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return delay, true },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r) // returns while the retry waits for its due time
		got := row(t, store, 1)
		if got.State != intake.StateFailed {
			t.Fatalf("row %q after the first attempt, want failed", got.State)
		}
		if earliest := failedAt.Add(delay); got.DueAt.Before(earliest) {
			t.Fatalf("retry due %v after the failure, want at least the delay %v", got.DueAt.Sub(failedAt), delay)
		}
		if want := failedAt.Add(2 * time.Millisecond); !got.DueAt.Equal(want) {
			t.Fatalf("retry due %v after the failure, want %v (the delay rounded up to the millisecond)", got.DueAt.Sub(failedAt), want.Sub(failedAt))
		}
	})
}

// A retry the store refused to record (the attempt lost its row) is not
// waited for: the chat's line moves on at once to its next update instead
// of holding it until the retry would have been due.
func TestRefusedRetryDoesNotHoldTheLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.SettleFunc = func(ctx context.Context, id intake.Identity, s intake.Settlement) (bool, error) {
			if s.State == intake.StateFailed {
				return false, nil // another process has the row now
			}
			return store.Store.Settle(ctx, id, s)
		}
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				if u.ID == 1 {
					return errBoom
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return time.Hour, true },
		})
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		mustAccept(t, r, msg(2, 1), intake.Accepted)
		start(t, r)
		idle(t, r)
		if got := row(t, store, 2); got.State != intake.StateCompleted {
			t.Fatalf("the chat's next update is %q, want completed: a refused retry held its line", got.State)
		}
	})
}

// An update scheduled behind its chat's update waiting for a retry is held
// too: Idle does not wait for it.
func TestIdleWhileALaterUpdateJoinsAHeldLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				if u.ID == 1 {
					return errBoom
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return time.Hour, true },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r) // update 1 waits for its retry
		mustAccept(t, r, msg(2, 1), intake.Accepted)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := r.Idle(ctx); err != nil {
			t.Fatalf("Idle: %v, while the chat's updates wait for a retry an hour away", err)
		}
		if got := row(t, store, 2); got.State != intake.StatePending {
			t.Fatalf("update 2 is %q, want pending behind its chat's retry", got.State)
		}
	})
}
