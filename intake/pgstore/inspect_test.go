package pgstore_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

func TestInspect(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	storetest.RunInspect(t, func(t *testing.T) intake.Store {
		st, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: uniqueTable()})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return st
	})
}
