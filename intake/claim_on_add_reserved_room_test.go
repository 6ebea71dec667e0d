package intake_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/tgrelay/tgrelay/intake"
)

// TestClaimOnAddReservationTakesRoom checks that an accept whose claimed
// add is still committing holds its place in MaxQueued: with MaxQueued 1
// and update 1's claimed add held in the store, an update of another chat
// accepted meanwhile is recorded unclaimed and left pending, not claimed
// and run beside it.
func TestClaimOnAddReservationTakesRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		hold := store.holdFirstAdd()
		release := make(chan struct{})
		var rec recorder
		r := newRunner(t, intake.Config{
			Store:         store,
			MaxQueued:     1,
			MaxConcurrent: 4,
			Handler: func(ctx context.Context, u intake.Update) error {
				rec.add("%d", u.ID)
				<-release
				return nil
			},
		})
		start(t, r)
		accepted := make(chan intake.Acceptance, 2)
		accept := func(body []byte) {
			a, err := r.Accept(t.Context(), body)
			if err != nil {
				t.Errorf("Accept: %v", err)
			}
			accepted <- a
		}
		go accept(msg(1, 1))
		synctest.Wait() // update 1 reserved its room; its claimed add waits in the store
		go accept(msg(2, 2))
		synctest.Wait() // update 2 waits for the next group commit
		close(hold)
		for range 2 {
			if a := <-accepted; a != intake.Accepted {
				t.Fatalf("Accept = %v, want accepted", a)
			}
		}
		synctest.Wait()
		asked2 := func() bool { store.mu.Lock(); defer store.mu.Unlock(); return store.asked[2] }()
		got2 := row(t, store, 2)
		ran := rec.get()
		close(release)
		if asked2 {
			t.Errorf("update 2's add asked for a claim while update 1's reservation held MaxQueued (1)")
		}
		if got2.State != intake.StatePending {
			t.Errorf("update 2 is %q while update 1 runs with MaxQueued 1, want pending", got2.State)
		}
		if len(ran) != 1 || ran[0] != "1" {
			t.Errorf("handlers started %q while MaxQueued is 1, want only [1]", ran)
		}
	})
}
