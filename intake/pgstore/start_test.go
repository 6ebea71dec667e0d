package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// TestStartOnACurrentTableTakesNoLockOnIt: with the table locked in ACCESS
// EXCLUSIVE mode by another transaction (nothing can even read it), a store
// starting on the current schema still starts: it reads only the recorded
// schema version, and so can never queue behind, or in front of, the
// running relays' claims.
func TestStartOnACurrentTableTakesNoLockOnIt(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	pool := poolFor(t, url)
	if _, err := pgstore.New(t.Context(), pool, pgstore.Config{}); err != nil {
		t.Fatal(err)
	}
	var xmin string
	versionRow := `SELECT xmin::text FROM tgrelay_schema_version WHERE table_name = 'telegram_updates'`
	if err := pool.QueryRow(t.Context(), versionRow).Scan(&xmin); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(t.Context(), `LOCK TABLE telegram_updates IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// The bound only turns a store that waits for the lock into a failure
	// instead of a hang.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for i := range 3 {
		if _, err := pgstore.New(ctx, poolFor(t, url), pgstore.Config{}); err != nil {
			t.Fatalf("start %d with the table locked: %v (a start on a current schema must not touch the table)", i+1, err)
		}
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	var after string
	if err := pool.QueryRow(t.Context(), versionRow).Scan(&after); err != nil || after != xmin {
		t.Fatalf("the version row was rewritten by starts on a current schema (xmin %s -> %s, %v)", xmin, after, err)
	}
}

// TestStartingBesideThreeRunningStoresDisturbsNone: three stores claim and
// settle without pause while further stores start on the same table, one
// after another; no call anywhere fails, and every worker keeps going.
func TestStartingBesideThreeRunningStoresDisturbsNone(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	if _, err := pgstore.New(t.Context(), poolFor(t, url), pgstore.Config{}); err != nil {
		t.Fatal(err)
	}
	const workers = 3
	var (
		next    atomic.Int64
		stop    atomic.Bool
		errs    = make(chan error, 64)
		settled [workers]atomic.Int64
		wg      sync.WaitGroup
	)
	for w := range workers {
		st, err := pgstore.New(t.Context(), poolFor(t, url), pgstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			ctx := t.Context()
			for !stop.Load() {
				id := next.Add(1)
				if _, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: at(0)}); err != nil {
					errs <- err
					return
				}
				claim, ok, err := st.Claim(ctx, id, claimOpts(id, id+60_000))
				if err != nil || !ok {
					errs <- err
					return
				}
				if ok, err := st.Settle(ctx, claim, intake.Settlement{State: intake.StateCompleted, At: at(id + 1)}); err != nil || !ok {
					errs <- err
					return
				}
				settled[w].Add(1)
			}
		})
	}
	before := [workers]int64{}
	for round := range 5 {
		for w := range workers {
			before[w] = settled[w].Load()
		}
		if _, err := pgstore.New(t.Context(), poolFor(t, url), pgstore.Config{}); err != nil {
			t.Errorf("start %d beside the running stores: %v", round+1, err)
		}
		// Each worker settles more after the start: none is stuck behind it.
		for w := range workers {
			for settled[w].Load() < before[w]+3 && len(errs) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a running store's call failed or was refused while others started: %v", err)
	}
}

// TestStartsUpgradeATableThatIsBehindOnce: a table at schema version 1 (as
// an earlier release left it) is brought to the latest version by stores
// starting at once, each step applied once, under the advisory lock.
func TestStartsUpgradeATableThatIsBehindOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	pool := poolFor(t, url)
	ms, err := pgstore.Migrations("old")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 2 {
		t.Skip("only one migration: nothing to upgrade")
	}
	for _, q := range []string{ms[0].SQL,
		`CREATE TABLE tgrelay_schema_version (table_name TEXT PRIMARY KEY, version INTEGER NOT NULL)`,
		`INSERT INTO tgrelay_schema_version VALUES ('old', 1)`} {
		if _, err := pool.Exec(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "old", NoCreate: true}); !errors.Is(err, pgstore.ErrNotMigrated) {
		t.Fatalf("New(NoCreate) on a table at version 1 = %v, want ErrNotMigrated", err)
	}
	const n = 4
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		p := poolFor(t, url)
		wg.Go(func() { _, errs[i] = pgstore.New(t.Context(), p, pgstore.Config{Table: "old"}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d of %d upgrading the table: %v", i+1, n, err)
		}
	}
	var v int
	if err := pool.QueryRow(t.Context(), `SELECT version FROM tgrelay_schema_version WHERE table_name = 'old'`).Scan(&v); err != nil || v != ms[len(ms)-1].Version {
		t.Fatalf("version after the upgrade = %d, %v; want %d", v, err, ms[len(ms)-1].Version)
	}
	if _, err := pgstore.New(t.Context(), pool, pgstore.Config{Table: "old", NoCreate: true}); err != nil {
		t.Fatalf("New(NoCreate) after the upgrade: %v", err)
	}
}
