package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

func TestInspect(t *testing.T) {
	t.Parallel()
	storetest.RunInspect(t, func(t *testing.T) intake.Store {
		st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "updates.db"), sqlitestore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	})
}
