package pgstore_test

import (
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake/pgstore"
)

// FuzzValidateTable: whatever ValidateTable accepts is a plain identifier
// that fits PostgreSQL's limit with the schema's suffixes, and Schema fills it
// in verbatim; whatever it refuses, Schema and Migrations refuse too.
func FuzzValidateTable(f *testing.F) {
	for _, s := range []string{"telegram_updates", "", "a; DROP TABLE b", `x"y`, "1a", "_", "Ab9_", "a-b", "é", strings.Repeat("z", 56)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := pgstore.ValidateTable(name)
		ddl, serr := pgstore.Schema(name)
		_, merr := pgstore.Migrations(name)
		if err != nil {
			if serr == nil || merr == nil {
				t.Fatalf("ValidateTable refused %q (%v) but Schema or Migrations accepted it", name, err)
			}
			return
		}
		if serr != nil || merr != nil {
			t.Fatalf("ValidateTable accepted %q but Schema: %v, Migrations: %v", name, serr, merr)
		}
		if len(name) == 0 || len(name)+len("_settled") > 63 || name[0] >= '0' && name[0] <= '9' {
			t.Fatalf("accepted %q: empty, too long or starts with a digit", name)
		}
		for _, c := range []byte(name) {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				t.Fatalf("accepted %q with byte %q", name, c)
			}
		}
		if !strings.Contains(ddl, "CREATE TABLE "+name+" (") || strings.Contains(ddl, "{{") {
			t.Fatalf("Schema(%q) does not fill in the name:\n%s", name, ddl)
		}
	})
}
