package pgstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// chatIndexDef is the definition of table's chat index, or "" when it has
// none.
func chatIndexDef(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	var def *string
	if err := pool.QueryRow(t.Context(), `SELECT pg_get_indexdef(to_regclass($1::text))`, table+"_chat").Scan(&def); err != nil {
		t.Fatal(err)
	}
	if def == nil {
		return ""
	}
	return *def
}

// The chat index exists only once strict order is asked of a table: a
// new table has none (migration 008), a store in process order never
// builds it, the first strict calls build it as migration 005 did (two
// stores at once, while a third adds), and it stays.
func TestChatIndexIsBuiltOnDemand(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, pool := newStore(t)
	if def := chatIndexDef(t, pool, s.Table()); def != "" {
		t.Fatalf("a new table has a chat index: %s", def)
	}
	for id := int64(1); id <= 3; id++ {
		if ok, err := s.Add(ctx, intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: at(0), Chat: "7"}); err != nil || !ok {
			t.Fatalf("Add(%d) = %v, %v", id, ok, err)
		}
	}
	if _, ok, err := s.Claim(ctx, 1, claimOpts(0, 60_000)); err != nil || !ok {
		t.Fatalf("Claim(1) = %v, %v", ok, err)
	}
	if _, err := s.Due(ctx, intake.DueQuery{Now: at(0), PendingBefore: at(0), Limit: 10}); err != nil {
		t.Fatal(err)
	}
	if def := chatIndexDef(t, pool, s.Table()); def != "" {
		t.Fatalf("a store in process order built a chat index: %s", def)
	}

	other, err := pgstore.New(ctx, pool, pgstore.Config{Table: s.Table()})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i, st := range []*pgstore.Store{s, other} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows, err := st.DueInOrder(ctx, intake.DueQuery{Now: at(0), PendingBefore: at(0), Limit: 50}, "")
			for _, r := range rows {
				// 2 is held behind 1, which is processing under a live
				// lease, and 3 behind 2; the added rows have no chat.
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
			_, err := other.Add(context.WithoutCancel(ctx), intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: at(0)})
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
	def := chatIndexDef(t, pool, s.Table())
	if want := "(chat, update_id) INCLUDE (state, due_at) WHERE (state = ANY (ARRAY['pending'::text, 'processing'::text, 'failed'::text]))"; !strings.Contains(def, want) {
		t.Fatalf("after strict order calls the chat index is %q; want migration 005's, %q", def, want)
	}
	// Strict claims go through it: 2 is held behind 1 until 1 settles.
	if _, ok, err := other.ClaimInOrder(ctx, 2, claimOpts(0, 60_000), intake.ProcessClaim{}); err != nil || ok {
		t.Fatalf("ClaimInOrder(2) behind a processing 1: %v, %v; want refused", ok, err)
	}
	// A store opened later finds it and keeps it.
	again, err := pgstore.New(ctx, pool, pgstore.Config{Table: s.Table()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := again.ClaimInOrder(ctx, 3, claimOpts(0, 60_000), intake.ProcessClaim{}); err != nil {
		t.Fatal(err)
	}
	if got := chatIndexDef(t, pool, s.Table()); got != def {
		t.Fatalf("after another store's strict call the chat index is %q; want it kept, %q", got, def)
	}
}

// ChatIndexSQL is the statement for an owner to build the index before
// the first strict call, which then finds it built; it refuses a name
// that is not a table name.
func TestChatIndexSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, pool := newStore(t)
	stmt, err := pgstore.ChatIndexSQL(s.Table())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, stmt); err != nil {
		t.Fatalf("ChatIndexSQL's statement: %v\n%s", err, stmt)
	}
	def := chatIndexDef(t, pool, s.Table())
	if def == "" {
		t.Fatalf("ChatIndexSQL's statement built no chat index:\n%s", stmt)
	}
	if _, err := s.DueInOrder(ctx, intake.DueQuery{Now: at(0), PendingBefore: at(0), Limit: 1}, ""); err != nil {
		t.Fatalf("DueInOrder on a table whose owner built the chat index: %v", err)
	}
	if _, err := pgstore.ChatIndexSQL("updates; DROP TABLE x"); err == nil {
		t.Fatal("ChatIndexSQL accepted a name that is not a table name")
	}
}

// A build of the chat index that fails (here, held back by a lock past
// its caller's deadline) fails its strict call with the reason and is
// tried again by the next one.
func TestChatIndexBuildFailsThenRetries(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, pool := newStore(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+s.Table()+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = s.DueInOrder(short, intake.DueQuery{Now: at(0), PendingBefore: at(0), Limit: 1}, "")
	cancel()
	if err == nil || !strings.Contains(err.Error(), "build the chat index") {
		t.Fatalf("DueInOrder while the table is locked past its deadline = %v; want the build's failure", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if def := chatIndexDef(t, pool, s.Table()); def != "" {
		t.Fatalf("a failed build left a chat index: %s", def)
	}
	if _, _, err := s.ClaimInOrder(ctx, 1, claimOpts(0, 60_000), intake.ProcessClaim{}); err != nil {
		t.Fatalf("ClaimInOrder after the failed build: %v", err)
	}
	if def := chatIndexDef(t, pool, s.Table()); def == "" {
		t.Fatal("the strict call after a failed build built no chat index")
	}
}

// ChatIndexState tells a doctor whether the chat index is built and, if
// not, whether the store's role may build it: the owner may, a role with
// only the rights to read and write the table may not, and a strict call
// by that role fails naming ChatIndexSQL until the owner ran it.
func TestChatIndexStateOfOwnerAndNot(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := pgtest.URL(t)
	pool := poolFor(t, db)
	s, err := pgstore.New(ctx, pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if built, may, err := s.ChatIndexState(ctx); err != nil || built || !may {
		t.Fatalf("owner, no index: built %v, may build %v, %v; want false, true", built, may, err)
	}

	wpool := poolFor(t, pgtest.WriterURL(t, db))
	w, err := pgstore.New(ctx, wpool, pgstore.Config{Table: s.Table(), NoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	if built, may, err := w.ChatIndexState(ctx); err != nil || built || may {
		t.Fatalf("a writer without ownership, no index: built %v, may build %v, %v; want false, false", built, may, err)
	}
	_, err = w.DueInOrder(ctx, intake.DueQuery{Now: at(0), PendingBefore: at(0), Limit: 1}, "")
	if err == nil || !strings.Contains(err.Error(), "ChatIndexSQL") {
		t.Fatalf("DueInOrder by a role that may not build the chat index = %v; want an error naming ChatIndexSQL", err)
	}

	stmt, err := pgstore.ChatIndexSQL(s.Table())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, stmt); err != nil {
		t.Fatal(err)
	}
	if built, _, err := w.ChatIndexState(ctx); err != nil || !built {
		t.Fatalf("after the owner built it: built %v, %v; want true", built, err)
	}
	if _, err := w.DueInOrder(ctx, intake.DueQuery{Now: at(0), PendingBefore: at(0), Limit: 1}, ""); err != nil {
		t.Fatalf("DueInOrder by the writer once the owner built the index: %v", err)
	}
}
