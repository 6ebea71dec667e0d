package sqlitestore_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// oldTable is the table as the first release created it, without claim_id.
const oldTable = `CREATE TABLE telegram_updates (
    update_id INTEGER PRIMARY KEY, body TEXT NOT NULL, state TEXT NOT NULL,
    attempts INTEGER NOT NULL, due_at INTEGER NOT NULL, received_at INTEGER NOT NULL,
    settled_at INTEGER, error TEXT)`

// oldDatabase writes a database file holding an old table with one pending
// and one completed row, and returns its path.
func oldDatabase(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms := base.UnixMilli()
	for _, q := range []string{
		oldTable,
		`INSERT INTO telegram_updates VALUES (1, '{"update_id":1}', 'pending', 0, ?1, ?1, NULL, NULL)`,
		`INSERT INTO telegram_updates VALUES (2, '{"update_id":2}', 'completed', 1, ?1, ?1, ?1, NULL)`,
	} {
		if _, err := db.Exec(q, ms); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func columns(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM pragma_table_info('telegram_updates') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		out = append(out, n)
	}
	return out
}

func TestOpenUpgradesATableWithoutClaimID(t *testing.T) {
	t.Parallel()
	path := oldDatabase(t)
	ctx := t.Context()
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("Open on an old table: %v", err)
	}
	defer s.Close()
	if cols := strings.Join(columns(t, s.DB()), ","); !strings.HasSuffix(cols, ",claim_id") {
		t.Fatalf("columns after upgrade = %s; want claim_id added", cols)
	}
	id, ok, err := s.ClaimOwned(ctx, 1, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Minute), MaxAttempts: 3})
	if err != nil || !ok || id.Attempt != 1 || id.ClaimID == "" {
		t.Fatalf("ClaimOwned on an old row = %+v, %v, %v; want attempt 1 with a claim id", id, ok, err)
	}
	if owns, err := s.Owns(ctx, id, base); err != nil || !owns {
		t.Errorf("Owns = %v, %v", owns, err)
	}
	if r, ok, err := s.Get(ctx, 2); err != nil || !ok || r.State != intake.StateCompleted || r.ClaimID != "" {
		t.Errorf("old completed row = %+v, %v, %v; want kept as is", r, ok, err)
	}
	// Opening again finds everything applied and changes nothing.
	again, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	again.Close()
}

func TestUpgradeToleratesAnotherProcessWinningTheRace(t *testing.T) {
	t.Parallel()
	path := oldDatabase(t)
	ctx := t.Context()
	rival, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Close()
	hookRan := false
	s, err := sqlitestore.OpenWithBeforeAlter(ctx, path, sqlitestore.Config{}, func() {
		// The column appears after the check and before our ALTER.
		hookRan = true
		if _, err := rival.Exec(`ALTER TABLE telegram_updates ADD COLUMN claim_id TEXT`); err != nil {
			t.Errorf("rival ALTER: %v", err)
		}
	})
	if !hookRan {
		t.Fatal("the upgrade never reached its ALTER; the race was not staged")
	}
	if err != nil {
		t.Fatalf("Open after losing the upgrade race: %v", err)
	}
	defer s.Close()
	if _, ok, err := s.ClaimOwned(ctx, 1, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Minute), MaxAttempts: 3}); err != nil || !ok {
		t.Fatalf("ClaimOwned after the race = %v, %v", ok, err)
	}
}

func TestUpgradeFailsWhenTheColumnIsStillMissing(t *testing.T) {
	t.Parallel()
	path := oldDatabase(t)
	rival, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Close()
	// The ALTER fails for another reason (the table is gone); the recheck
	// finds no column, so the failure is reported.
	s, err := sqlitestore.OpenWithBeforeAlter(t.Context(), path, sqlitestore.Config{}, func() {
		if _, err := rival.Exec(`DROP TABLE telegram_updates`); err != nil {
			t.Errorf("rival DROP: %v", err)
		}
	})
	if err == nil {
		s.Close()
		t.Fatal("Open succeeded although claim_id was never added")
	}
	if !strings.Contains(err.Error(), "002_add_claim_id") {
		t.Errorf("error %q does not name the migration", err)
	}
}

func TestMigrationsPrintTheSchema(t *testing.T) {
	t.Parallel()
	ms, err := sqlitestore.Migrations("bot_updates")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.Version != i+1 || m.Name == "" || strings.Contains(m.SQL, "{{") {
			t.Errorf("migration %d = %d %q with SQL %q", i, m.Version, m.Name, m.SQL)
		}
	}
	schema, err := sqlitestore.Schema("bot_updates")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`CREATE TABLE IF NOT EXISTS "bot_updates"`, `ADD COLUMN claim_id`, `"bot_updates_due" ON "bot_updates" (state, due_at)`} {
		if !strings.Contains(schema, want) {
			t.Errorf("schema lacks %q", want)
		}
	}
	// The printed schema, run by another tool on an empty file, gives a
	// table the store opens and uses without changing it.
	path := filepath.Join(t.TempDir(), "own.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(schema); err != nil {
		t.Fatalf("running the schema: %v", err)
	}
	db.Close()
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{Table: "bot_updates"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ok, err := s.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte("{}"), ReceivedAt: base}); err != nil || !ok {
		t.Fatalf("Add = %v, %v", ok, err)
	}
}
