package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

func TestSchemaVersionOfACurrentTable(t *testing.T) {
	t.Parallel()
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "v.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	v, latest, err := st.SchemaVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	ms, err := sqlitestore.Migrations(sqlitestore.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	if v != latest || latest != ms[len(ms)-1].Version {
		t.Errorf("SchemaVersion = %d, %d; want both %d", v, latest, ms[len(ms)-1].Version)
	}
}
