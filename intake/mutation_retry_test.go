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
