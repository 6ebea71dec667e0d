package sqlitestore_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// chatIndexes counts the chat indexes of the default table in db.
func chatIndexes(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'telegram_updates_chat'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// chatIndexDef is the definition of the default table's chat index, its
// spaces collapsed; the test fails when there is none.
func chatIndexDef(t *testing.T, db *sql.DB) string {
	t.Helper()
	def := indexDef(t, db, "telegram_updates_chat")
	if def == "" {
		t.Fatal("the table has no chat index")
	}
	return def
}

// migratedChatIndexDef is the chat index's definition in migration 005,
// which built it with the table until migration 008 dropped it, its
// spaces collapsed.
func migratedChatIndexDef(t *testing.T) string {
	t.Helper()
	ms, err := sqlitestore.Migrations("telegram_updates")
	if err != nil {
		t.Fatal(err)
	}
	stmt := regexp.MustCompile(`(?s)CREATE INDEX "telegram_updates_chat".*?;`).FindString(ms[4].SQL)
	if stmt == "" {
		t.Fatalf("migration 005 builds no chat index:\n%s", ms[4].SQL)
	}
	return strings.Join(strings.Fields(strings.TrimSuffix(stmt, ";")), " ")
}

// builtChatIndexDef is the chat index a strict call builds: migration
// 005's, with the live index's predicate of migration 009, its spaces
// collapsed.
func builtChatIndexDef(t *testing.T) string {
	t.Helper()
	const old = "WHERE state IN ('pending', 'processing', 'failed')"
	def := migratedChatIndexDef(t)
	if !strings.Contains(def, old) {
		t.Fatalf("migration 005's chat index has no %q: %s", old, def)
	}
	return strings.Replace(def, old, "WHERE "+livePredicate(t), 1)
}

// The chat index exists only once strict order is asked of a table: a
// new table has none (migration 008), a store in process order never
// builds it, the first strict call builds it as migration 005 did but
// with migration 009's predicate (while other stores write to the same
// file), and it stays.
func TestChatIndexIsBuiltOnDemand(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "intake.db")
	ctx := t.Context()
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n := chatIndexes(t, s.DB()); n != 0 {
		t.Fatalf("a new table has %d chat indexes, want none", n)
	}
	for id := int64(1); id <= 3; id++ {
		if _, err := s.Add(ctx, intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: base, Chat: "7"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Claim(ctx, 1, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Minute), MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Due(ctx, intake.DueQuery{Now: base, PendingBefore: base, Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if n := chatIndexes(t, s.DB()); n != 0 {
		t.Fatalf("a store in process order has %d chat indexes, want none", n)
	}

	// Two stores on the file ask for strict order at once, while a third
	// keeps adding.
	other, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i, st := range []*sqlitestore.Store{s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, err := st.DueInOrder(ctx, intake.DueQuery{Now: base, PendingBefore: base, Limit: 50}, "")
			for _, r := range rows {
				// Update 2 is held behind 1, which is processing under a
				// live lease, and 3 behind 2; the added rows have no chat.
				if r.UpdateID < 100 {
					t.Errorf("store %d: DueInOrder listed update %d, which is held behind update 1", i, r.UpdateID)
				}
			}
			errs <- err
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for id := int64(100); id < 120; id++ {
			_, err := other.Add(context.WithoutCancel(ctx), intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: base})
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := chatIndexes(t, s.DB()); n != 1 {
		t.Fatalf("after strict order calls the file has %d chat indexes, want 1", n)
	}
	if got, want := chatIndexDef(t, s.DB()), builtChatIndexDef(t); got != want {
		t.Fatalf("the chat index built on demand is\n%s\nwant migration 005's with migration 009's predicate\n%s", got, want)
	}
	// Strict claims go through it: 2 is held behind 1 until 1 settles.
	if _, ok, err := s.ClaimInOrder(ctx, 2, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Minute), MaxAttempts: 3}, intake.ProcessClaim{}); err != nil || ok {
		t.Fatalf("ClaimInOrder(2) behind a processing 1: %v, %v; want refused", ok, err)
	}

	// Reopened, the table keeps the index.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	if n := chatIndexes(t, again.DB()); n != 1 {
		t.Fatalf("reopened, the file has %d chat indexes, want 1", n)
	}
}
