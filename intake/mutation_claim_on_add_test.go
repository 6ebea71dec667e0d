package intake_test

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/tgrelay/tgrelay/intake"
)

// A claimed add that commits hands its reservation back: however many
// updates were claimed on add and handled, MaxQueued is as free as before.
func TestClaimOnAddReturnsItsRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		r := newRunner(t, intake.Config{
			Store:     store,
			MaxQueued: 2,
			Handler:   func(context.Context, intake.Update) error { return nil },
		})
		start(t, r)
		for id := int64(1); id <= 4; id++ {
			mustAccept(t, r, msg(id, id), intake.Accepted)
			idle(t, r)
			if got := row(t, store, id); got.State != intake.StateCompleted {
				t.Fatalf("update %d is %q after Idle, want completed: its room was taken", id, got.State)
			}
		}
	})
}
