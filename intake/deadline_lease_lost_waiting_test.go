package intake_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// An update with a deadline that loses its lease while it waits for a
// slot on the deadline lane is left unsettled, to run again, and not ended
// expired: its deadline has not passed, and the row may no longer be its
// attempt's to settle. (A runner that expired it wrote a settlement for a
// lease it had lost, and reported an expiry that never happened.)
func TestDeadlineUpdateLosingItsLeaseForASlotIsNotExpired(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		// Every renewal of update 2's first attempt is refused: its lease
		// is lost at its first renewal, a quarter of a lease after its
		// claim, while update 1 holds the lane's only slot.
		store.RenewFunc = func(ctx context.Context, id intake.Identity, until, now time.Time) (bool, error) {
			if id.UpdateID == 2 && id.Attempt == 1 {
				return false, nil
			}
			return store.Store.Renew(ctx, id, until, now)
		}
		var rec recorder
		store.SettleFunc = func(ctx context.Context, id intake.Identity, s intake.Settlement) (bool, error) {
			rec.add("settle %d/%d %s", id.UpdateID, id.Attempt, s.State)
			return store.Store.Settle(ctx, id, s)
		}
		release := make(chan struct{})
		unblock := sync.OnceFunc(func() { close(release) })
		defer unblock() // a failed check must not leave update 1's handler blocked
		r := newRunner(t, intake.Config{Store: store, LeaseDuration: 4 * time.Second,
			Deadlines: intake.Deadlines{MaxConcurrent: 1},
			AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
				if u.ID == 1 {
					<-release
				}
				rec.add("handled %d/%d", u.ID, a.Attempt)
				return nil
			},
			Observer: intake.Observer{
				ExpireFunc:    func(e intake.Expiry) { rec.add("expired %d", e.UpdateID) },
				LeaseLostFunc: func(id intake.Identity) { rec.add("lease lost %d/%d", id.UpdateID, id.Attempt) },
			},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		synctest.Wait() // update 1's handler holds the deadline lane's only slot
		mustAccept(t, r, callbackQuery(2, 8), intake.Accepted)
		time.Sleep(2 * time.Second) // past update 2's first renewal, well before its deadline
		synctest.Wait()

		if got, want := rec.get(), []string{"lease lost 2/1"}; !slices.Equal(got, want) {
			t.Fatalf("events while update 1 held the slot: %q, want %q (no settlement, no expiry)", got, want)
		}
		if got := row(t, store, 2); got.State != intake.StateProcessing || got.Attempts != 1 || got.Expired() {
			t.Fatalf("update 2 = %s, attempt %d, expired %v; want processing under its first attempt, left to be run again",
				got.State, got.Attempts, got.Expired())
		}
		unblock()
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("update 1 = %s, want completed", got.State)
		}
	})
}
