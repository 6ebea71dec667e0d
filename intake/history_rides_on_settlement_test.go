package intake_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// historyRefusingStore is a memstore whose separate history writes
// (RecordAttempt) all fail; a record that rides on a settlement
// (Settlement.Attempt) is kept as memstore keeps it.
type historyRefusingStore struct {
	*memstore.Store
	separate atomic.Int32
}

func (s *historyRefusingStore) RecordAttempt(context.Context, intake.AttemptRecord) (bool, error) {
	s.separate.Add(1)
	return false, errors.New("history write refused")
}

// TestSettledAttemptRecordRidesOnItsSettlement checks that the record of
// an attempt the store settled (a failure with a retry, then a completion)
// is written by the settlement itself, in the same step, not by a second
// write after it: with every separate history write failing, both
// attempts are still in the history, and no separate write was made.
func TestSettledAttemptRecordRidesOnItsSettlement(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &historyRefusingStore{Store: memstore.New()}
		r := newRunner(t, intake.Config{
			Store: store,
			AttemptHandler: func(_ context.Context, _ intake.Update, a intake.Attempt) error {
				if a.Attempt == 1 {
					return errBoom
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return time.Second, true },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		time.Sleep(time.Second)
		synctest.Wait()
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateCompleted || got.Attempts != 2 {
			t.Fatalf("row %q after %d attempts, want completed after 2", got.State, got.Attempts)
		}
		recs, err := store.Attempts(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		want := []intake.AttemptOutcome{intake.AttemptFailed, intake.AttemptCompleted}
		if len(recs) != len(want) {
			t.Fatalf("history holds %d records, want %d (%v): a settled attempt's record did not ride on its settlement", len(recs), len(want), want)
		}
		for i, rec := range recs {
			if rec.Attempt != i+1 || rec.Outcome != want[i] {
				t.Errorf("record %d: attempt %d %q, want attempt %d %q", i, rec.Attempt, rec.Outcome, i+1, want[i])
			}
		}
		if n := store.separate.Load(); n != 0 {
			t.Errorf("%d separate history writes for attempts the store settled, want 0", n)
		}
	})
}
