package pgstore_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
)

func TestTableNameIsCheckedBeforeSQL(t *testing.T) {
	t.Parallel()
	bad := []string{
		"updates; DROP TABLE users",
		"with-dash",
		"1starts_with_digit",
		`quoted"name`,
		"space name",
		"ünïcode",
		strings.Repeat("a", pgstore.MaxTableNameLen+1),
	}
	for _, name := range bad {
		if err := pgstore.ValidateTable(name); err == nil {
			t.Errorf("ValidateTable(%q) accepted it", name)
		}
		if _, err := pgstore.Schema(name); err == nil {
			t.Errorf("Schema(%q) accepted it", name)
		}
		// The zero pool is never used: the name is refused before any SQL.
		_, err := pgstore.New(t.Context(), new(pgxpool.Pool), pgstore.Config{Table: name})
		if ce, ok := errors.AsType[*pgstore.ConfigError](err); !ok || ce.Field != "Table" {
			t.Errorf("New with table %q = %v, want a *ConfigError for Table", name, err)
		}
	}
	for _, good := range []string{"telegram_updates", "_x", "Updates2", strings.Repeat("a", pgstore.MaxTableNameLen)} {
		if err := pgstore.ValidateTable(good); err != nil {
			t.Errorf("ValidateTable(%q) = %v, want nil", good, err)
		}
	}
}

func TestNewRejectsNilPool(t *testing.T) {
	t.Parallel()
	if _, err := pgstore.New(t.Context(), nil, pgstore.Config{}); err == nil {
		t.Fatal("New(nil pool) succeeded")
	}
}

func TestSchemaScriptMakesACurrentTable(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ddl, err := pgstore.Schema("bot_updates")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), ddl); err != nil {
		t.Fatalf("applying Schema: %v", err)
	}
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "bot_updates", NoCreate: true})
	if err != nil {
		t.Fatalf("New with NoCreate on the table Schema made: %v", err)
	}
	// The store works at the durable level on it: claim, own, exhaust, list.
	mustAdd(t, st, 7, 0)
	id := mustClaimOwned(t, st, 7, claimOpts(10, 1000))
	if ok, err := st.Owns(t.Context(), id, at(500)); err != nil || !ok {
		t.Fatalf("Owns = %v, %v; want true", ok, err)
	}
	if ok, err := st.Exhaust(t.Context(), id, at(600), "boom"); err != nil || !ok {
		t.Fatalf("Exhaust = %v, %v", ok, err)
	}
	ex, err := st.DueExhaustions(t.Context(), intake.ExhaustionQuery{Limit: 10})
	if err != nil || len(ex) != 1 || ex[0].Identity != id {
		t.Fatalf("DueExhaustions = %+v, %v; want the exhaustion of %+v", ex, err, id)
	}
	// New without NoCreate finds the recorded version current: no DDL runs
	// (the script's CREATE TABLE would fail if it did).
	if _, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "bot_updates"}); err != nil {
		t.Fatalf("New on a current table: %v", err)
	}
	if row, ok, err := st.Get(t.Context(), 7); err != nil || !ok || !row.Unacknowledged() {
		t.Fatalf("row after a second New = %+v, %v, %v; want the exhaustion kept", row, ok, err)
	}
}

func TestMigrationsAreNumberedAndNamed(t *testing.T) {
	t.Parallel()
	ms, err := pgstore.Migrations("t")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range ms {
		if m.Version != i+1 || m.Name == "" || strings.Contains(m.SQL, "{{") {
			t.Errorf("migration %d = version %d name %q (placeholders left: %v)", i, m.Version, m.Name, strings.Contains(m.SQL, "{{"))
		}
	}
	if !strings.Contains(ms[0].SQL, "claim_id") || !strings.Contains(ms[0].SQL, "FUNCTION t_owns(") {
		t.Errorf("migration 1 should make claim_id and t_owns:\n%s", ms[0].SQL)
	}
}

func TestMissingTableWithoutCreationIsAnError(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	_, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "absent", NoCreate: true})
	if !errors.Is(err, pgstore.ErrNoTable) || !strings.Contains(err.Error(), "absent") {
		t.Fatalf("New on a missing table = %v, want ErrNoTable naming the table", err)
	}

	// A table dropped under a running store: every call says so, none hangs.
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "dropped"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), "DROP TABLE dropped"); err != nil {
		t.Fatal(err)
	}
	_, err = st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte("{}"), ReceivedAt: at(0)})
	if !errors.Is(err, pgstore.ErrNoTable) {
		t.Fatalf("Add on a dropped table = %v, want ErrNoTable", err)
	}
	_, err = st.Due(t.Context(), intake.DueQuery{Now: at(0), PendingBefore: at(0), Limit: 5})
	if !errors.Is(err, pgstore.ErrNoTable) {
		t.Fatalf("Due on a dropped table = %v, want ErrNoTable", err)
	}
}

// unrecordedTable creates the table as migration 1 makes it, without
// recording a schema version: a table this store did not make.
func unrecordedTable(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	ms, err := pgstore.Migrations(table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), ms[0].SQL); err != nil {
		t.Fatalf("migration 1: %v", err)
	}
}

func TestATableWithoutARecordedSchemaIsRefused(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	unrecordedTable(t, pool, "unrecorded")
	_, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "unrecorded", NoCreate: true})
	if !errors.Is(err, pgstore.ErrNotMigrated) || !strings.Contains(err.Error(), "unrecorded") {
		t.Fatalf("New with NoCreate on a table with no recorded schema = %v, want ErrNotMigrated naming the table", err)
	}
	// Without NoCreate the store does not adopt it either: migration 1
	// fails on the existing table, and New with it.
	if _, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "unrecorded"}); err == nil || !strings.Contains(err.Error(), "001_create_table") {
		t.Fatalf("New on a table with no recorded schema = %v, want the failure of migration 001", err)
	}
}

func TestConcurrentNewsMigrateOnce(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	url := pool.Config().ConnString()
	const n = 4
	stores := make([]*pgstore.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		p := poolFor(t, url)
		wg.Go(func() { stores[i], errs[i] = pgstore.New(t.Context(), p, pgstore.Config{Table: "fresh"}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("New %d of %d racing on a new table: %v", i+1, n, err)
		}
	}
	mustAdd(t, stores[0], 1, 0)
	id := mustClaimOwned(t, stores[1], 1, claimOpts(30, 100))
	if ok, err := stores[2].Owns(t.Context(), id, at(50)); err != nil || !ok {
		t.Fatalf("Owns on another store = %v, %v", ok, err)
	}
	var owned bool
	if err := pool.QueryRow(t.Context(), "SELECT fresh_owns($1, $2, $3, $4)", id.UpdateID, id.Attempt, id.ClaimID, at(50).UnixMilli()).Scan(&owned); err != nil || !owned {
		t.Fatalf("fresh_owns = %v, %v; want true", owned, err)
	}
}
