package sqlitestore_test

import (
	"database/sql"
	"errors"
	"regexp"
	"testing"

	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// FuzzTableName checks the only text the store splices into SQL: a name is
// accepted exactly when it is a plain identifier, and an accepted name gives
// a schema that runs.
func FuzzTableName(f *testing.F) {
	for _, seed := range []string{
		"telegram_updates", "select", "_", "a-b", `x"; DROP TABLE y; --`, "", "1a",
		"ümlaut", "a b", "a\x00b", "tbl{{table}}", string(make([]byte, 64)),
	} {
		f.Add(seed)
	}
	plain := regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	f.Fuzz(func(t *testing.T, name string) {
		schema, err := sqlitestore.Schema(name)
		if !plain.MatchString(name) {
			if !errors.Is(err, sqlitestore.ErrInvalidConfig) {
				t.Fatalf("Schema(%q) error = %v, want ErrInvalidConfig", name, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("Schema(%q): %v", name, err)
		}
		db, err := sql.Open("sqlite", ":memory:")
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(schema); err != nil {
			t.Fatalf("schema for %q does not run: %v", name, err)
		}
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?`, name).Scan(&n); err != nil || n != 1 {
			t.Fatalf("schema for %q made %d tables named so (%v)", name, n, err)
		}
	})
}
