package intake_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// TestSweptExhaustionWaitsForRoom checks that an exhaustion a sweep finds
// needs room of its own in MaxQueued: with MaxQueued 1 and an update
// running, a due exhaustion is not delivered beside it; it is delivered
// once the update is done, by the catch-up sweep that room asks for.
func TestSweptExhaustionWaitsForRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		ctx := t.Context()
		at := time.Now()
		if _, err := store.Add(ctx, intake.Incoming{UpdateID: 1, Body: msg(1, 1), ReceivedAt: at}); err != nil {
			t.Fatal(err)
		}
		id, ok, err := store.Claim(ctx, 1, intake.ClaimOpts{Now: at, LeaseUntil: at.Add(time.Minute), MaxAttempts: 5})
		if err != nil || !ok {
			t.Fatalf("Claim = %v, %v", ok, err)
		}
		if ok, err := store.Exhaust(ctx, id, at, "given up"); err != nil || !ok {
			t.Fatalf("Exhaust = %v, %v", ok, err)
		}
		if _, err := store.Add(ctx, intake.Incoming{UpdateID: 2, Body: msg(2, 2), ReceivedAt: at}); err != nil {
			t.Fatal(err)
		}

		release := make(chan struct{})
		var rec recorder
		r := newRunner(t, intake.Config{
			Store:     store,
			MaxQueued: 1,
			Handler: func(ctx context.Context, u intake.Update) error {
				rec.add("update %d", u.ID)
				<-release
				return nil
			},
			ExhaustionHandler: func(ctx context.Context, e intake.Exhaustion) error {
				rec.add("exhaustion %d", e.UpdateID)
				return nil
			},
		})
		start(t, r) // its sweep schedules update 2 first, which fills MaxQueued
		synctest.Wait()
		if got, want := rec.get(), []string{"update 2"}; !slices.Equal(got, want) {
			close(release)
			t.Fatalf("while update 2 runs with MaxQueued 1: %q, want %q (the exhaustion waits for room)", got, want)
		}
		close(release)
		idle(t, r)
		synctest.Wait()
		idle(t, r)
		if got, want := rec.get(), []string{"update 2", "exhaustion 1"}; !slices.Equal(got, want) {
			t.Fatalf("after update 2: %q, want %q", got, want)
		}
		if got := row(t, store, 1); got.Unacknowledged() {
			t.Errorf("exhaustion 1 not acknowledged once delivered")
		}
	})
}
