package pgstore_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
)

func TestBigIDsAndMillisecondTimesRoundTrip(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	ctx := t.Context()
	big := int64(1) << 40
	received := time.UnixMilli(1_767_225_600_123).UTC() // 13 digits, odd millisecond
	body := []byte("{\"update_id\":1099511627776,\"x\":\"\x00\xff\"}")
	if ok, err := st.Add(ctx, intake.Incoming{UpdateID: big, Body: body, ReceivedAt: received}); err != nil || !ok {
		t.Fatalf("Add = %v, %v", ok, err)
	}
	row, ok, err := st.Get(ctx, big)
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if row.UpdateID != big || !row.ReceivedAt.Equal(received) || !row.DueAt.Equal(received) || !bytes.Equal(row.Body, body) {
		t.Fatalf("row = id %d received %v due %v body %q; want %d, %v, %v, %q", row.UpdateID, row.ReceivedAt, row.DueAt, row.Body, big, received, received, body)
	}
	due, err := st.Due(ctx, intake.DueQuery{Now: received, PendingBefore: received, Limit: 1})
	if err != nil || len(due) != 1 || due[0].UpdateID != big {
		t.Fatalf("Due = %v, %v; want %d", due, err, big)
	}
	lease := received.Add(30 * time.Second)
	id := mustClaimOwned(t, st, big, intake.ClaimOpts{Now: received, LeaseUntil: lease, MaxAttempts: 3})
	if id.UpdateID != big {
		t.Fatalf("identity %+v", id)
	}
	// The lease is live through its last millisecond and not one after.
	if ok, err := st.Owns(ctx, id, lease); err != nil || !ok {
		t.Fatalf("Owns at the lease end = %v, %v; want true", ok, err)
	}
	if ok, err := st.Owns(ctx, id, lease.Add(time.Millisecond)); err != nil || ok {
		t.Fatalf("Owns 1 ms after the lease end = %v, %v; want false", ok, err)
	}
	exhausted := lease.Add(-time.Millisecond)
	if ok, err := st.Exhaust(ctx, id, exhausted, "gave up"); err != nil || !ok {
		t.Fatalf("Exhaust = %v, %v", ok, err)
	}
	after := big - 1
	ex, err := st.DueExhaustions(ctx, intake.ExhaustionQuery{Limit: 5, After: &after})
	if err != nil || len(ex) != 1 || ex[0].Identity != id || !ex[0].ExhaustedAt.Equal(exhausted) || ex[0].Error != "gave up" {
		t.Fatalf("DueExhaustions = %+v, %v", ex, err)
	}
	if ex, err := st.DueExhaustions(ctx, intake.ExhaustionQuery{Limit: 5, After: &big}); err != nil || len(ex) != 0 {
		t.Fatalf("DueExhaustions after %d = %+v, %v; want none", big, ex, err)
	}
}

func TestAddBatchIsOneInsert(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	ctx := t.Context()
	mustAdd(t, st, 5, 0)
	in := []intake.Incoming{
		{UpdateID: 4, Body: []byte("first"), ReceivedAt: at(1)},
		{UpdateID: 5, Body: []byte("exists"), ReceivedAt: at(1)},
		{UpdateID: 4, Body: []byte("second"), ReceivedAt: at(2)},
		{UpdateID: 6, Body: nil, ReceivedAt: at(3)},
	}
	got, err := addBatch(ctx, st, in)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, false, false, true}; !slices.Equal(got, want) {
		t.Fatalf("AddBatch = %v, want %v", got, want)
	}
	row, _, err := st.Get(ctx, 4)
	if err != nil || string(row.Body) != "first" {
		t.Fatalf("row 4 body = %q, %v; want the first one", row.Body, err)
	}
	if got, err := addBatch(ctx, st, nil); err != nil || len(got) != 0 {
		t.Fatalf("AddBatch(nil) = %v, %v", got, err)
	}

	// On error nothing is recorded: a cancelled batch leaves no row.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := addBatch(cctx, st, []intake.Incoming{{UpdateID: 9, Body: []byte("x")}}); err == nil {
		t.Fatal("AddBatch with a cancelled ctx succeeded")
	}
	var n int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM telegram_updates").Scan(&n); err != nil || n != 3 {
		t.Fatalf("rows = %d, %v; want 3", n, err)
	}
}

func TestDueSkipsRowsLockedByAnotherSweeper(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	ctx := t.Context()
	for id := int64(1); id <= 10; id++ {
		mustAdd(t, st, id, 0)
	}
	q := intake.DueQuery{Now: at(100), PendingBefore: at(100), Limit: 4}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	first, err := st.DueTx(ctx, tx, q)
	if err != nil {
		t.Fatal(err)
	}
	// Another sweeper, while the first holds its page, gets the next rows
	// at once instead of the same ones (or waiting).
	second, err := st.Due(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(first), []int64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("first page = %v, want %v", got, want)
	}
	if got, want := ids(second), []int64{5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("second page while the first is locked = %v, want %v", got, want)
	}
	// Two sweepers in transactions at once: disjoint pages.
	tx2, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx2.Rollback(context.Background())
	third, err := st.DueTx(ctx, tx2, q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(third), []int64{5, 6, 7, 8}; !slices.Equal(got, want) {
		t.Fatalf("page of a second transaction = %v, want %v", got, want)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := st.Due(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(again), []int64{1, 2, 3, 4}; !slices.Equal(got, want) {
		t.Fatalf("page after the first sweeper ended = %v, want %v", got, want)
	}
}

func ids(us []intake.StoredUpdate) []int64 {
	out := make([]int64, len(us))
	for i, u := range us {
		out[i] = u.UpdateID
	}
	return out
}

// fence is one way of checking ownership inside a domain transaction.
type fence struct {
	name string
	// begin opens a domain transaction, checks id at at inside it, writes
	// the effect row when owned, and returns whether it owned and a commit
	// function.
	begin func(t *testing.T, st *pgstore.Store, pool *pgxpool.Pool, id intake.Identity, at time.Time) (owned bool, commit func() error)
}

var fences = []fence{
	{"OwnsTx", func(t *testing.T, st *pgstore.Store, pool *pgxpool.Pool, id intake.Identity, when time.Time) (bool, func() error) {
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		owned, err := st.OwnsTx(t.Context(), tx, id, when)
		if err != nil {
			t.Fatal(err)
		}
		writeEffect(t, tx, id)
		return owned, func() error { return tx.Commit(t.Context()) }
	}},
	{"OwnsSQLTx", func(t *testing.T, st *pgstore.Store, pool *pgxpool.Pool, id intake.Identity, when time.Time) (bool, func() error) {
		db := stdlib.OpenDBFromPool(pool)
		t.Cleanup(func() { _ = db.Close() })
		tx, err := db.BeginTx(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback() })
		owned, err := st.OwnsSQLTx(t.Context(), tx, id, when)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(t.Context(), "INSERT INTO effects (update_id, attempt) VALUES ($1, $2)", id.UpdateID, id.Attempt); err != nil {
			t.Fatal(err)
		}
		return owned, tx.Commit
	}},
	{"SQL function", func(t *testing.T, st *pgstore.Store, pool *pgxpool.Pool, id intake.Identity, when time.Time) (bool, func() error) {
		// What an app in another language does: plain SQL in its own
		// transaction.
		tx, err := pool.Begin(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
		var owned bool
		if err := tx.QueryRow(t.Context(), "SELECT "+st.Table()+"_owns(update_id => $1, attempt => $2, claim_id => $3, at_ms => $4)", id.UpdateID, id.Attempt, id.ClaimID, when.UnixMilli()).Scan(&owned); err != nil {
			t.Fatal(err)
		}
		writeEffect(t, tx, id)
		return owned, func() error { return tx.Commit(t.Context()) }
	}},
}

func writeEffect(t *testing.T, tx pgx.Tx, id intake.Identity) {
	t.Helper()
	if _, err := tx.Exec(t.Context(), "INSERT INTO effects (update_id, attempt) VALUES ($1, $2)", id.UpdateID, id.Attempt); err != nil {
		t.Fatal(err)
	}
}

// fenceFixture is a store with an effects table beside it and update 1
// claimed at 0ms under a lease to 1000ms.
func fenceFixture(t *testing.T) (*pgstore.Store, *pgxpool.Pool, intake.Identity) {
	t.Helper()
	st, pool := newStore(t)
	if _, err := pool.Exec(t.Context(), "CREATE TABLE effects (update_id bigint, attempt int)"); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, st, 1, 0)
	return st, pool, mustClaimOwned(t, st, 1, claimOpts(0, 1000))
}

// TestFenceLocksOutReclaimUntilCommit: a domain transaction that checked
// ownership holds the update row, so a reclaim after the lease lapsed waits
// for its commit, then gets attempt 2; the effect committed under attempt 1.
func TestFenceLocksOutReclaimUntilCommit(t *testing.T) {
	t.Parallel()
	for _, f := range fences {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			st, pool, id := fenceFixture(t)
			ctx := t.Context()

			owned, commit := f.begin(t, st, pool, id, at(900))
			if !owned {
				t.Fatal("the live claim does not own its update")
			}

			type result struct {
				id  intake.Identity
				ok  bool
				err error
			}
			started := time.Now()
			reclaimed := make(chan result, 1)
			go func() {
				// The lease lapsed at 1000: claimable at 2000.
				nid, ok, err := st.Claim(ctx, 1, claimOpts(2000, 3000))
				reclaimed <- result{nid, ok, err}
			}()
			// The reclaim is seen waiting on a row lock in the server.
			waitFor(t, 10*time.Second, "the reclaim to wait on the row lock", func() (bool, error) {
				var n int
				err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
					WHERE datname = current_database() AND wait_event_type = 'Lock' AND (query LIKE 'UPDATE%' OR query LIKE 'WITH cur AS%')`).Scan(&n)
				return n > 0, err
			})
			// It stays blocked while the domain transaction is open.
			hold := time.NewTimer(50 * time.Millisecond)
			select {
			case r := <-reclaimed:
				t.Fatalf("the reclaim returned %+v while the fenced transaction was open", r)
			case <-hold.C:
			}
			select {
			case r := <-reclaimed:
				t.Fatalf("the reclaim returned %+v while the fenced transaction was open", r)
			default:
			}
			if err := commit(); err != nil {
				t.Fatalf("commit: %v", err)
			}
			var r result
			select {
			case r = <-reclaimed:
			case <-time.After(10 * time.Second):
				t.Fatal("the reclaim did not proceed after the commit")
			}
			blocked := time.Since(started)
			if r.err != nil || !r.ok || r.id.Attempt != 2 || r.id.ClaimID == id.ClaimID {
				t.Fatalf("reclaim after commit = %+v, want attempt 2 with a new claim id", r)
			}
			t.Logf("the reclaim was blocked for %v", blocked)

			// The old identity no longer owns, through any fence.
			if owned, commit := f.begin(t, st, pool, id, at(2500)); owned {
				t.Fatal("the stale identity still owns after the reclaim")
			} else if err := commit(); err != nil {
				t.Fatal(err)
			}
			var effects int
			if err := pool.QueryRow(ctx, "SELECT count(*) FROM effects WHERE attempt = 1").Scan(&effects); err != nil || effects < 1 {
				t.Fatalf("effects of attempt 1 = %d, %v", effects, err)
			}
		})
	}
}

// TestFenceOnStaleIdentityTakesNoLock: a failed ownership check leaves the
// row free, so the current owner's settlement is not delayed.
func TestFenceOnStaleIdentityTakesNoLock(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	ctx := t.Context()
	mustAdd(t, st, 1, 0)
	id := mustClaimOwned(t, st, 1, claimOpts(0, 1000))
	stale := id
	stale.ClaimID = "not-the-claim"
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if owned, err := st.OwnsTx(ctx, tx, stale, at(10)); err != nil || owned {
		t.Fatalf("OwnsTx(stale) = %v, %v; want false", owned, err)
	}
	// Runs at once on another connection although tx is still open.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if ok, err := st.Settle(sctx, id, intake.Settlement{State: intake.StateCompleted, At: at(20)}); err != nil || !ok {
		t.Fatalf("Settle while a stale check's transaction is open = %v, %v", ok, err)
	}
}

// TestFenceComparesEveryField: each way of fencing a domain write owns the
// update only under the exact identity (update, attempt and claim id) and
// only while the lease is live, through its end inclusive, though no other
// claim took the row.
func TestFenceComparesEveryField(t *testing.T) {
	t.Parallel()
	for _, f := range fences {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			st, pool, id := fenceFixture(t)
			otherAttempt, otherClaim := id, id
			otherAttempt.Attempt++
			otherClaim.ClaimID = "not-the-claim"
			for _, c := range []struct {
				what string
				id   intake.Identity
				atMS int64
				want bool
			}{
				{"the live identity", id, 900, true},
				{"the live identity at the lease end", id, 1000, true},
				{"the live identity after the lease end, not reclaimed", id, 1001, false},
				{"another attempt with the claim's id", otherAttempt, 900, false},
				{"the attempt with another claim id", otherClaim, 900, false},
			} {
				owned, commit := f.begin(t, st, pool, c.id, at(c.atMS))
				if err := commit(); err != nil { // ends the transaction, and any lock it took
					t.Fatal(err)
				}
				if owned != c.want {
					t.Errorf("%s at %dms: owned = %v, want %v", c.what, c.atMS, owned, c.want)
				}
			}
		})
	}
}
