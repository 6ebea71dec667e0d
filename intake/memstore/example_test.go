package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A store walks one update through the intake's steps: record it, claim it
// under a lease, and settle it, after which it is no longer due.
func Example() {
	ctx := context.Background()
	store := memstore.New()
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	added, _ := store.Add(ctx, intake.Incoming{UpdateID: 42, Body: []byte(`{"update_id":42}`), ReceivedAt: t0})
	again, _ := store.Add(ctx, intake.Incoming{UpdateID: 42, Body: []byte(`{}`), ReceivedAt: t0})
	fmt.Println("added:", added, "duplicate added:", again)

	id, ok, _ := store.Claim(ctx, 42, intake.ClaimOpts{
		Now:         t0,
		LeaseUntil:  t0.Add(30 * time.Second),
		MaxAttempts: 3,
	})
	fmt.Println("claimed:", ok, "attempt:", id.Attempt)

	owns, _ := store.Owns(ctx, id, t0.Add(time.Second))
	fmt.Println("owns:", owns)

	settled, _ := store.Settle(ctx, id, intake.Settlement{State: intake.StateCompleted, At: t0.Add(2 * time.Second)})
	fmt.Println("settled:", settled)

	due, _ := store.Due(ctx, intake.DueQuery{Now: t0.Add(time.Hour), PendingBefore: t0.Add(time.Hour), Limit: 10})
	fmt.Println("due:", len(due))

	pruned, _ := store.Prune(ctx, t0.Add(time.Hour))
	fmt.Println("pruned:", pruned)
	// Output:
	// added: true duplicate added: false
	// claimed: true attempt: 1
	// owns: true
	// settled: true
	// due: 0
	// pruned: 1
}
