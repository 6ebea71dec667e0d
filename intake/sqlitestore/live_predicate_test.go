package sqlitestore_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// livePredicate is the predicate of the live index in migration 009.
func livePredicate(t *testing.T) string {
	t.Helper()
	ms, err := sqlitestore.Migrations("telegram_updates")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 9 {
		t.Fatalf("%d migrations, want at least 9", len(ms))
	}
	m := regexp.MustCompile(`(?s)CREATE INDEX "telegram_updates_live" ON "telegram_updates" \([^)]*\)\s*WHERE (.*?);`).FindStringSubmatch(ms[8].SQL)
	if m == nil {
		t.Fatalf("migration 009 builds no live index:\n%s", ms[8].SQL)
	}
	return strings.Join(strings.Fields(m[1]), " ")
}

// indexDef is the definition of the index named name in db, its spaces
// collapsed, or "" when there is none.
func indexDef(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var def string
	err := db.QueryRowContext(t.Context(), `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = ?`, name).Scan(&def)
	if err == sql.ErrNoRows {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(def), " ")
}

// longInList matches an IN list of three constants or more.
var longInList = regexp.MustCompile(`(?i)\bIN\s*\(\s*'[^']*'\s*,\s*'[^']*'\s*,`)

// Every partial index's predicate, and every trigger's condition, is
// evaluated on each write of a row it covers; none holds an IN list of
// more than two constants, which SQLite evaluates by building a temporary
// b-tree in every statement (migration 009). The chat index, built by the
// first strict call, is checked too.
func TestNoWriteEvaluatesALongINList(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "tgrelay.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DueInOrder(ctx, intake.DueQuery{Now: base, PendingBefore: base, Limit: 1}, ""); err != nil {
		t.Fatal(err)
	}
	rows, err := s.DB().QueryContext(ctx, `SELECT type, name, sql FROM sqlite_master WHERE type IN ('index', 'trigger') AND sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := 0
	for rows.Next() {
		var typ, name, def string
		if err := rows.Scan(&typ, &name, &def); err != nil {
			t.Fatal(err)
		}
		seen++
		if longInList.MatchString(def) {
			t.Errorf("%s %s evaluates an IN list of three or more constants on each write:\n%s", typ, name, def)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if seen < 6 {
		t.Fatalf("read %d indexes and triggers, want the table's (at least 6)", seen)
	}
	if def := indexDef(t, s.DB(), "telegram_updates_chat"); def == "" {
		t.Fatal("DueInOrder built no chat index")
	}
}

// The README's way back to an older build: on a table past migration 10,
// its statements put the live, chat, (state, due_at) and settled indexes
// back in the form an older build names (its sweep and its strict check
// prepare), and record step 7. The next open by this build takes the table forward again, and the
// store works, the rows kept.
func TestReadmeRollback(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)To roll back to an\\s+older build.*?```\n.*?<<'SQL'\n(.*?)SQL\n").FindSubmatch(readme)
	if m == nil {
		t.Fatal("the README has no SQL block after \"To roll back to an older build\"")
	}
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "tgrelay.db")
	db := closedTableOfOneChat(t, path, true)
	if _, err := db.ExecContext(ctx, string(m[1])); err != nil {
		t.Fatalf("the README's statements: %v", err)
	}
	// An older build's sweep and strict check, as it prepares them.
	for _, q := range []string{
		`SELECT update_id FROM "telegram_updates" INDEXED BY "telegram_updates_live"
			WHERE state IN ('pending', 'processing', 'failed') AND received_at <= ?1 ORDER BY update_id LIMIT 10`,
		`SELECT 1 FROM "telegram_updates" AS o INDEXED BY "telegram_updates_chat"
			WHERE o.chat = ?1 AND o.update_id < ?2 AND o.state IN ('pending', 'processing', 'failed')`,
	} {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			t.Fatalf("an older build's statement after the README's: %v\n%s", err, q)
		}
		st.Close()
	}
	if indexDef(t, db, "telegram_updates_due") == "" {
		t.Fatal("after the README's statements the table has no (state, due_at) index, which an older build counts by")
	}
	if v := versionOf(t, db); v != 7 {
		t.Fatalf("the README's statements record step %d, want 7", v)
	}

	again, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("this build on the rolled-back table: %v", err)
	}
	defer again.Close()
	ms, err := sqlitestore.Migrations("telegram_updates")
	if err != nil {
		t.Fatal(err)
	}
	if v := versionOf(t, db); v != ms[len(ms)-1].Version {
		t.Fatalf("reopened, the table is at step %d, want %d", v, ms[len(ms)-1].Version)
	}
	if def := indexDef(t, db, "telegram_updates_live"); !strings.Contains(def, livePredicate(t)) {
		t.Fatalf("reopened, the live index is\n%s\nwant migration 009's predicate %s", def, livePredicate(t))
	}
	if def := indexDef(t, db, "telegram_updates_due"); def != "" {
		t.Fatalf("reopened, the table keeps %s, which migration 010 drops", def)
	}
	if def := indexDef(t, db, "telegram_updates_settled"); !strings.Contains(def, "(state, settled_at)") {
		t.Fatalf("reopened, the settled index is %s; want migration 010's, led by the state", def)
	}
	strictOrderRebuilt(t, again, db, base.Add(time.Second), "reopened")
	if st, err := again.Stats(ctx); err != nil || st.Count[intake.StatePending] != 2 || st.Count[intake.StateCompleted] != 0 {
		t.Fatalf("reopened, Stats = %+v, %v; want the 2 pending rows", st, err)
	}
	if _, ok, err := again.Claim(context.WithoutCancel(ctx), 2, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Minute), MaxAttempts: 3}); err != nil || !ok {
		t.Fatalf("Claim(2) after the round trip: %v, %v", ok, err)
	}
}

// versionOf reads the default table's recorded schema step.
func versionOf(t *testing.T, db *sql.DB) int {
	t.Helper()
	var v int
	if err := db.QueryRowContext(t.Context(), `SELECT version FROM tgrelay_schema_version WHERE table_name = 'telegram_updates'`).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// closedTableOfOneChat makes the store's table in a new file at path with
// updates 1 and 2 of chat "7", closes the store (after a strict listing,
// which builds the chat index, when strict is set) and returns the file
// opened without the store, closed with the test.
func closedTableOfOneChat(t *testing.T, path string, strict bool) *sql.DB {
	t.Helper()
	ctx := t.Context()
	s := storeOfOneChat(t, path)
	if strict {
		if _, err := s.DueInOrder(ctx, intake.DueQuery{Now: base, PendingBefore: base, Limit: 1}, ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// storeOfOneChat opens a store on a new file at path and records updates
// 1 and 2 of chat "7" in it.
func storeOfOneChat(t *testing.T, path string) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 2; id++ {
		if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: base, Chat: "7"}); err != nil {
			s.Close()
			t.Fatal(err)
		}
	}
	return s
}

// strictOrderRebuilt checks s, over the two-row table of one chat
// (closedTableOfOneChat) in db, after an upgrade (when says which): a
// strict listing at now lists update 1 alone, 2 being behind it, and the
// chat index it built is this build's.
func strictOrderRebuilt(t *testing.T, s *sqlitestore.Store, db *sql.DB, now time.Time, when string) {
	t.Helper()
	rows, err := s.DueInOrder(t.Context(), intake.DueQuery{Now: now, PendingBefore: now, Limit: 10}, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].UpdateID != 1 {
		t.Fatalf("%s, DueInOrder lists %v, want update 1 (2 is behind it)", when, rows)
	}
	if got, want := chatIndexDef(t, db), builtChatIndexDef(t); got != want {
		t.Fatalf("%s, the strict call built the chat index\n%s\nwant\n%s", when, got, want)
	}
}
