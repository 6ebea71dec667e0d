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
		if err == nil || !strings.Contains(err.Error(), "Config.Table") {
			t.Errorf("New with table %q = %v, want an error naming Config.Table", name, err)
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

func TestSchemaRunsTwiceAndIsTheStoresTable(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ddl, err := pgstore.Schema("bot_updates")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if _, err := pool.Exec(t.Context(), ddl); err != nil {
			t.Fatalf("applying Schema, run %d: %v", i+1, err)
		}
	}
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "bot_updates", NoCreate: true})
	if err != nil {
		t.Fatalf("New on the table Schema made: %v", err)
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
	// New without NoCreate applies the schema a third time, harmlessly.
	if _, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "bot_updates"}); err != nil {
		t.Fatalf("New applying the schema again: %v", err)
	}
	if row, ok, err := st.Get(t.Context(), 7); err != nil || !ok || !row.Unacknowledged() {
		t.Fatalf("row after re-applying the schema = %+v, %v, %v; want the exhaustion kept", row, ok, err)
	}
}

func TestMigrationsAreNumberedAndNamed(t *testing.T) {
	t.Parallel()
	ms, err := pgstore.Migrations("t")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Fatalf("got %d migrations, want at least 2", len(ms))
	}
	for i, m := range ms {
		if m.Version != i+1 || m.Name == "" || strings.Contains(m.SQL, "{{") {
			t.Errorf("migration %d = version %d name %q (placeholders left: %v)", i, m.Version, m.Name, strings.Contains(m.SQL, "{{"))
		}
	}
	if !strings.Contains(ms[1].SQL, "claim_id") || !strings.Contains(ms[1].SQL, "FUNCTION t_owns(") {
		t.Errorf("migration 2 should add claim_id and t_owns:\n%s", ms[1].SQL)
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

// legacyTable creates a table as migration 1 alone leaves it: before claim
// identities.
func legacyTable(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	ms, err := pgstore.Migrations(table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(t.Context(), ms[0].SQL); err != nil {
		t.Fatalf("migration 1: %v", err)
	}
}

func hasClaimID(t *testing.T, pool *pgxpool.Pool, table string) bool {
	t.Helper()
	var n int
	err := pool.QueryRow(t.Context(),
		`SELECT count(*) FROM information_schema.columns WHERE table_name = $1 AND column_name = 'claim_id'`, table).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n == 1
}

func TestLegacyTableServesBaseMethodsOnly(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	legacyTable(t, pool, "legacy")
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "legacy", NoCreate: true})
	if err != nil {
		t.Fatalf("New on a legacy table: %v", err)
	}
	ctx := t.Context()

	// The base methods work.
	mustAdd(t, st, 1, 0)
	mustAdd(t, st, 2, 0)
	res, err := st.AddBatch(ctx, []intake.Incoming{{UpdateID: 2, Body: []byte("{}")}, {UpdateID: 3, Body: []byte("{}")}})
	if err != nil || len(res) != 2 || res[0] || !res[1] {
		t.Fatalf("AddBatch = %v, %v; want [false true]", res, err)
	}
	if a, ok, err := st.Claim(ctx, 1, claimOpts(10, 100)); err != nil || !ok || a != 1 {
		t.Fatalf("Claim = %d, %v, %v; want attempt 1", a, ok, err)
	}
	if ok, err := st.Renew(ctx, 1, 1, at(200), at(50)); err != nil || !ok {
		t.Fatalf("Renew = %v, %v", ok, err)
	}
	if ok, err := st.Settle(ctx, 1, 1, intake.Settlement{State: intake.StateFailed, At: at(60), RetryAt: at(70), Error: "x"}); err != nil || !ok {
		t.Fatalf("Settle failed = %v, %v", ok, err)
	}
	due, err := st.Due(ctx, intake.DueQuery{Now: at(80), PendingBefore: at(80), Limit: 10})
	if err != nil || len(due) != 3 || due[0].UpdateID != 1 {
		t.Fatalf("Due = %v, %v; want 1, 2, 3", due, err)
	}
	if a, ok, err := st.Claim(ctx, 1, claimOpts(80, 300)); err != nil || !ok || a != 2 {
		t.Fatalf("second Claim = %d, %v, %v; want attempt 2", a, ok, err)
	}
	if ok, err := st.Settle(ctx, 1, 2, intake.Settlement{State: intake.StateCompleted, At: at(90)}); err != nil || !ok {
		t.Fatalf("Settle completed = %v, %v", ok, err)
	}
	if n, err := st.Prune(ctx, at(91)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	// A spend without durable exhaustion needs no claim_id either.
	one := intake.ClaimOpts{Now: at(100), LeaseUntil: at(110), MaxAttempts: 1}
	if _, ok, err := st.Claim(ctx, 2, one); err != nil || !ok {
		t.Fatalf("Claim 2 = %v, %v", ok, err)
	}
	if _, ok, err := st.Claim(ctx, 2, intake.ClaimOpts{Now: at(200), LeaseUntil: at(300), MaxAttempts: 1}); err != nil || ok {
		t.Fatalf("spending Claim 2 = %v, %v; want false", ok, err)
	}
	if ok, err := st.Requeue(ctx, 2, at(400)); err != nil || !ok {
		t.Fatalf("Requeue = %v, %v", ok, err)
	}

	// The fenced and durable methods say the migration is missing.
	id := intake.Identity{UpdateID: 3, Attempt: 1, ClaimID: "c"}
	durable := claimOpts(500, 600)
	durable.DurableExhaustion = true
	calls := map[string]func() error{
		"ClaimOwned":    func() error { _, _, err := st.ClaimOwned(ctx, 3, claimOpts(500, 600)); return err },
		"Claim durable": func() error { _, _, err := st.Claim(ctx, 3, durable); return err },
		"RenewOwned":    func() error { _, err := st.RenewOwned(ctx, id, at(700), at(500)); return err },
		"Owns":          func() error { _, err := st.Owns(ctx, id, at(500)); return err },
		"SettleOwned": func() error {
			_, err := st.SettleOwned(ctx, id, intake.Settlement{State: intake.StateCompleted, At: at(500)})
			return err
		},
		"Exhaust":               func() error { _, err := st.Exhaust(ctx, id, at(500), "x"); return err },
		"DueExhaustions":        func() error { _, err := st.DueExhaustions(ctx, intake.ExhaustionQuery{Limit: 5}); return err },
		"AcknowledgeExhaustion": func() error { _, err := st.AcknowledgeExhaustion(ctx, id, at(500)); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, pgstore.ErrNotMigrated) || !strings.Contains(err.Error(), "pgstore.Schema") {
			t.Errorf("%s on a legacy table = %v, want ErrNotMigrated pointing to pgstore.Schema", name, err)
		}
	}
	if hasClaimID(t, pool, "legacy") {
		t.Fatal("a store with NoCreate changed the table")
	}
	// Row 3 is still pending and claimable by the base method.
	if a, ok, err := st.Claim(ctx, 3, claimOpts(800, 900)); err != nil || !ok || a != 1 {
		t.Fatalf("Claim 3 after the refused fenced calls = %d, %v, %v; want attempt 1", a, ok, err)
	}
}

func TestNewUpgradesAnOldTableUnderConcurrentUpgraders(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	legacyTable(t, pool, "old")
	legacy, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "old", NoCreate: true})
	if err != nil {
		t.Fatal(err)
	}
	mustAdd(t, legacy, 1, 0)
	if _, ok, err := legacy.Claim(t.Context(), 1, claimOpts(10, 20)); err != nil || !ok {
		t.Fatalf("legacy Claim = %v, %v", ok, err)
	}

	// Two processes start at once, each with its own pool, and both upgrade.
	url := pool.Config().ConnString()
	pools := []*pgxpool.Pool{poolFor(t, url), poolFor(t, url)}
	stores := make([]*pgstore.Store, len(pools))
	errs := make([]error, len(pools))
	var wg sync.WaitGroup
	for i, p := range pools {
		wg.Go(func() { stores[i], errs[i] = pgstore.New(t.Context(), p, pgstore.Config{Table: "old"}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("upgrader %d: %v", i, err)
		}
	}
	if !hasClaimID(t, pool, "old") {
		t.Fatal("claim_id missing after the upgrade")
	}
	// The old row, whose lease lapsed, is reclaimed with an identity.
	id := mustClaimOwned(t, stores[0], 1, claimOpts(30, 100))
	if id.Attempt != 2 || id.ClaimID == "" {
		t.Fatalf("ClaimOwned after the upgrade = %+v, want attempt 2 with a claim id", id)
	}
	if ok, err := stores[1].Owns(t.Context(), id, at(50)); err != nil || !ok {
		t.Fatalf("Owns on the other store = %v, %v", ok, err)
	}
	var owned bool
	if err := pool.QueryRow(t.Context(), "SELECT old_owns($1, $2, $3, $4)", id.UpdateID, id.Attempt, id.ClaimID, at(50).UnixMilli()).Scan(&owned); err != nil || !owned {
		t.Fatalf("old_owns = %v, %v; want true", owned, err)
	}
}
