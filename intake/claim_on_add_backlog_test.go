package intake_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/tgrelay/tgrelay/intake"
)

// TestClaimOnAddNotWhileAnUpdateWaitsForRoom checks the last condition of
// a claim on add: nothing waits for room. With MaxQueued 4, four updates
// running and a fifth left in the store for lack of room, one of the four
// finishing frees room, but not enough for the catch-up sweep. An update of
// a new chat accepted then is recorded unclaimed, as Accept documents, and
// scheduled as any other: it runs under a claim of its own.
func TestClaimOnAddNotWhileAnUpdateWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		release := map[int64]chan struct{}{}
		for id := int64(1); id <= 6; id++ {
			release[id] = make(chan struct{})
		}
		r := newRunner(t, intake.Config{
			Store:         store,
			MaxQueued:     4,
			MaxConcurrent: 8,
			Handler: func(ctx context.Context, u intake.Update) error {
				<-release[u.ID]
				return nil
			},
		})
		start(t, r)
		defer func() {
			for id := int64(2); id <= 6; id++ {
				close(release[id])
			}
		}()
		for id := int64(1); id <= 5; id++ {
			mustAccept(t, r, msg(id, id), intake.Accepted)
		}
		synctest.Wait()
		if got := row(t, store, 5); got.State != intake.StatePending {
			t.Fatalf("update 5 is %q with MaxQueued (4) reached, want pending", got.State)
		}
		close(release[1])
		synctest.Wait()
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("update 1 is %q, want completed", got.State)
		}
		mustAccept(t, r, msg(6, 6), intake.Accepted)
		synctest.Wait()
		store.mu.Lock()
		asked := store.asked[6]
		store.mu.Unlock()
		if asked {
			t.Errorf("update 6's add asked for a claim while update 5 waited for room")
		}
		if got := row(t, store, 6); got.State != intake.StateProcessing || got.Attempts != 1 {
			t.Errorf("update 6 is %q after %d attempts, want processing after 1 (scheduled, claimed on its own)", got.State, got.Attempts)
		}
	})
}
