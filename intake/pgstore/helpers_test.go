package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/storetest"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// newPool returns a pool on a fresh database, closed when the test ends.
func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return poolFor(t, pgtest.URL(t))
}

func poolFor(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	return poolWith(t, url, nil)
}

// poolWith is poolFor whose connections set the runtime parameters params.
func poolWith(t *testing.T, url string, params map[string]string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 8
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// newStore returns a store on a fresh database and its pool.
func newStore(t *testing.T) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	pool := newPool(t)
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return st, pool
}

var tableSeq atomic.Int64

// uniqueTable names a table no other test in this binary uses.
func uniqueTable() string { return fmt.Sprintf("updates_%d", tableSeq.Add(1)) }

// base is the tests' clock origin: 13-digit Unix milliseconds.
var base = time.UnixMilli(1_767_225_600_000).UTC()

func at(msOffset int64) time.Time { return base.Add(time.Duration(msOffset) * time.Millisecond) }

func claimOpts(nowMS, leaseMS int64) intake.ClaimOpts {
	return intake.ClaimOpts{Now: at(nowMS), LeaseUntil: at(leaseMS), MaxAttempts: 5}
}

func mustAdd(t *testing.T, st intake.Store, id int64, receivedMS int64) {
	t.Helper()
	ok, err := st.Add(t.Context(), intake.Incoming{UpdateID: id, Body: fmt.Appendf(nil, `{"update_id":%d}`, id), ReceivedAt: at(receivedMS)})
	if err != nil || !ok {
		t.Fatalf("Add(%d) = %v, %v; want true", id, ok, err)
	}
}

func mustClaimOwned(t *testing.T, st *pgstore.Store, id int64, o intake.ClaimOpts) intake.Identity {
	t.Helper()
	ident, ok, err := st.Claim(t.Context(), id, o)
	if err != nil || !ok {
		t.Fatalf("Claim(%d) = %v, %v, %v; want a claim", id, ident, ok, err)
	}
	return ident
}

// waitFor polls cond until it holds, failing the test after limit. It is for
// conditions only observable by asking the database.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), limit)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("gave up after %v waiting for %s", limit, what)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// addBatch records us unclaimed; see [storetest.Add].
var addBatch = storetest.Add

// waitServerIdle waits until no statement but its own runs in the test's
// database: whatever a cancelled caller left running at the server has
// ended, committed or not.
func waitServerIdle(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	waitFor(t, bounded, "no other statement running", func() (bool, error) {
		var k int
		err := pool.QueryRow(t.Context(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()`).Scan(&k)
		return k == 0, err
	})
}

// holdRow begins a domain transaction on pool that holds id's row, as an
// app's would through OwnsTx at 50 ms; it is rolled back at the end of the
// test unless committed before.
func holdRow(t *testing.T, st *pgstore.Store, pool *pgxpool.Pool, id intake.Identity) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	if owned, err := st.OwnsTx(t.Context(), tx, id, at(50)); err != nil || !owned {
		t.Fatalf("OwnsTx = %v, %v", owned, err)
	}
	return tx
}
