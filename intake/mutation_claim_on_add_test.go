package intake_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

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

// A reservation released by a duplicate hands its claim token back:
// however many duplicates arrive, a new update is still claimed and run.
func TestDuplicatesReturnTheirClaimTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		r := newRunner(t, intake.Config{
			Store:         store,
			MaxConcurrent: 1, // a handful of claim tokens
			Handler:       func(context.Context, intake.Update) error { return nil },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		for range 10 {
			mustAccept(t, r, msg(1, 1), intake.Duplicate)
		}
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := r.Idle(ctx); err != nil {
			t.Fatalf("Idle: %v: the new update never got a claim token", err)
		}
		if got := row(t, store, 2); got.State != intake.StateCompleted {
			t.Fatalf("update 2 is %q, want completed", got.State)
		}
	})
}

// An update accepted while MaxQueued is reached is recorded unclaimed and
// left to the sweep, even when a claim token is free.
func TestClaimOnAddRespectsMaxQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClaimingStore()
		release := make(chan struct{})
		r := newRunner(t, intake.Config{
			Store:     store,
			MaxQueued: 1,
			Handler: func(ctx context.Context, u intake.Update) error {
				if u.ID == 1 {
					<-release
				}
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		synctest.Wait()
		got := row(t, store, 2)
		close(release)
		if got.State != intake.StatePending {
			t.Fatalf("update 2 is %q while MaxQueued (1) was reached, want pending", got.State)
		}
	})
}
