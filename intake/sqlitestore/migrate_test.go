package sqlitestore_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

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

func TestOpenRefusesATableWithoutARecordedSchema(t *testing.T) {
	t.Parallel()
	// A table no migration of this store made (here: an unreleased layout
	// without claim_id) is not adopted at a lower capability: Open fails.
	path := oldDatabase(t)
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err == nil {
		s.Close()
		t.Fatal("Open adopted a table whose schema version is not recorded")
	}
	if !strings.Contains(err.Error(), "001_create_table") {
		t.Errorf("error %q does not name the migration that failed", err)
	}
}

func TestConcurrentOpensMigrateOnceAndReopeningChangesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "new.db")
	openRacing(t, path, 4, "")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := sqlitestore.Migrations(sqlitestore.DefaultTable)
	if err != nil {
		t.Fatal(err)
	}
	var v, cookie int
	if err := db.QueryRow(`SELECT version FROM tgrelay_schema_version WHERE table_name = 'telegram_updates'`).Scan(&v); err != nil || v != ms[len(ms)-1].Version {
		t.Fatalf("recorded version = %d, %v; want %d", v, err, ms[len(ms)-1].Version)
	}
	const added = ",claim_id,owner,crashes,chat,rec_after,rec_process,rec_started_at,rec_ended_at,rec_outcome,rec_error,rec_status,rec_header,rec_body"
	if cols := strings.Join(columns(t, db), ","); !strings.HasSuffix(cols, added) {
		t.Fatalf("columns = %s; want %s last", cols, added[1:])
	}
	// SQLite's schema cookie changes with every DDL statement: reopening a
	// current table must leave it as it is.
	if err := db.QueryRow(`PRAGMA schema_version`).Scan(&cookie); err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	s.Close()
	var after int
	if err := db.QueryRow(`PRAGMA schema_version`).Scan(&after); err != nil || after != cookie {
		t.Fatalf("schema cookie %d -> %d (%v): reopening a current table ran DDL", cookie, after, err)
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
	for _, want := range []string{`CREATE TABLE "bot_updates"`, `claim_id    TEXT`, `"bot_updates_due" ON "bot_updates" (state, due_at)`, `tgrelay_schema_version`} {
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

// Processes creating one new file at once all open it: switching a new file
// to WAL takes a lock SQLite does not wait for under busy_timeout, so Open
// retries it (one round in a few dozen failed with "database is locked"
// before it did). 30 rounds of 4 racing opens, each on a new file.
func TestConcurrentCreatesAllOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for round := range 30 {
		openRacing(t, filepath.Join(dir, fmt.Sprintf("new-%d.db", round)), 4, fmt.Sprintf("round %d: ", round))
	}
}

// openRacing opens and closes path from n goroutines at once and fails t,
// its message prefixed by what, unless every one succeeds.
func openRacing(t *testing.T, path string, n int, what string) {
	t.Helper()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
			if err == nil {
				err = s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%sOpen %d of %d racing on a new file: %v", what, i+1, n, err)
		}
	}
}
