package sqlschema

import (
	"errors"
	"strings"
	"testing"
	"testing/fstest"
)

func TestValidateTableAcceptsOnlyPlainShortIdentifiers(t *testing.T) {
	for _, bad := range []string{"", "1a", "a-b", `a"b`, "a b", "é", "a;DROP", strings.Repeat("a", MaxTableLen+1)} {
		if err := ValidateTable(bad); !errors.Is(err, ErrInvalidTable) {
			t.Errorf("ValidateTable(%q) = %v, want ErrInvalidTable", bad, err)
		}
	}
	for _, good := range []string{"a", "_", "Telegram_Updates2", strings.Repeat("a", MaxTableLen)} {
		if err := ValidateTable(good); err != nil {
			t.Errorf("ValidateTable(%q) = %v, want nil", good, err)
		}
	}
}

func TestLoadFillsTheTableAndRefusesGapsInTheNumbering(t *testing.T) {
	fsys := fstest.MapFS{
		"m/001_create.up.sql": {Data: []byte("CREATE TABLE {{table}} (x int);")},
		"m/002_index.up.sql":  {Data: []byte("CREATE INDEX {{table}}_x ON {{table}} (x);")},
		"m/README":            {Data: []byte("not a migration")},
	}
	ms, err := Load(fsys, "m", "t")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[1].Version != 2 || ms[1].Name != "index" || ms[1].SQL != "CREATE INDEX t_x ON t (x);" {
		t.Fatalf("Load = %+v", ms)
	}
	if Latest(ms) != 2 {
		t.Fatalf("Latest = %d, want 2", Latest(ms))
	}
	script := Script(ms, "T")
	if !strings.Contains(script, "VALUES ('t', 2)") {
		t.Errorf("Script does not record version 2 under the lower-case name:\n%s", script)
	}
	for name, files := range map[string]fstest.MapFS{
		"gap":       {"m/001_a.up.sql": {}, "m/003_c.up.sql": {}},
		"no name":   {"m/001.up.sql": {}},
		"not 001":   {"m/002_b.up.sql": {}},
		"empty dir": {},
	} {
		if _, err := Load(files, "m", "t"); err == nil {
			t.Errorf("Load accepted the %s case", name)
		}
	}
}
