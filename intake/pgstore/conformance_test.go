package pgstore_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

// TestConformance runs the store contract's conformance suite at the durable
// level, with the batch and admin capabilities, on a real PostgreSQL. All
// cases share one database; each gets a fresh table.
func TestConformance(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	storetest.Run(t, func(t *testing.T) intake.Store {
		st, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: uniqueTable()})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return st
	})
}
