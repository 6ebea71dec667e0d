package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/intake/storetest"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// Settlements that queue behind one transaction run batched in the next,
// and each still applies exactly when it would alone: the owner's
// settlements apply with their records; a wrong claim id, a wrong attempt,
// a lapsed lease or an unknown update change nothing and record nothing;
// of two identical settlements of one update exactly one applies.
func TestQueuedSettlementsRunBatched(t *testing.T) {
	t.Parallel()
	s, path := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	var (
		mu      sync.Mutex
		batched int // the most settlements one committed transaction batched
	)
	sqlitestore.OnTx(s, func(n int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			batched = max(batched, n)
		}
	})

	const owned = 70 // more than one chunk: 64 + 4 + 2
	var us []intake.Incoming
	for id := int64(1); id <= owned+6; id++ {
		us = append(us, intake.Incoming{UpdateID: id, Body: []byte(`{"update_id":1}`), ReceivedAt: base})
	}
	if _, err := storetest.Add(ctx, s, us); err != nil {
		t.Fatal(err)
	}
	leaseEnd := base.Add(time.Minute)
	ids := map[int64]intake.Identity{}
	for _, u := range us {
		id, ok, err := s.Claim(ctx, u.UpdateID, intake.ClaimOpts{Now: base, LeaseUntil: leaseEnd, MaxAttempts: 5})
		if err != nil || !ok {
			t.Fatalf("Claim(%d) = %v, %v", u.UpdateID, ok, err)
		}
		ids[u.UpdateID] = id
	}
	at := base.Add(time.Second)
	record := func() *intake.AttemptRecord {
		return &intake.AttemptRecord{StartedAt: base, EndedAt: at, Outcome: intake.AttemptCompleted, Status: 200}
	}
	type call struct {
		id   intake.Identity
		st   intake.Settlement
		want bool
	}
	var calls []call
	for id := int64(1); id <= owned; id++ {
		st := intake.Settlement{State: intake.StateCompleted, At: at, Attempt: record()}
		switch id % 3 {
		case 1:
			st = intake.Settlement{State: intake.StateFailed, At: at, RetryAt: at.Add(time.Hour), Error: "boom", Attempt: record()}
		case 2:
			st.Attempt = nil // no record asked for
		}
		calls = append(calls, call{ids[id], st, true})
	}
	done := intake.Settlement{State: intake.StateCompleted, At: at, Attempt: record()}
	wrongClaim, wrongAttempt := ids[owned+1], ids[owned+2]
	wrongClaim.ClaimID = "someone else"
	wrongAttempt.Attempt++
	calls = append(calls,
		call{wrongClaim, done, false},
		call{wrongAttempt, done, false},
		call{ids[owned+3], intake.Settlement{State: intake.StateCompleted, At: leaseEnd.Add(time.Millisecond), Attempt: record()}, false},
		call{intake.Identity{UpdateID: 999, Attempt: 1, ClaimID: "none"}, done, false},
		call{ids[owned+4], intake.Settlement{State: intake.StateAbandoned, At: at, Error: "gave up", Attempt: record()}, true},
	)
	twice := ids[owned+5]

	// Hold SQLite's write lock from another connection, so the first
	// write's transaction waits to begin and the rest queue behind it.
	lock := holdWriteLock(t, path)
	got := make([]bool, len(calls))
	var twiceApplied [2]bool
	var wg sync.WaitGroup
	settle := func(id intake.Identity, st intake.Settlement, dst *bool) {
		ok, err := s.Settle(ctx, id, st)
		if err != nil {
			t.Errorf("Settle(%d): %v", id.UpdateID, err)
		}
		*dst = ok
	}
	// Another write leads, waiting for the lock; every settlement queues
	// behind it.
	started := waitStarted(t, s)
	wg.Go(func() { _, _ = s.Renew(ctx, ids[owned+6], leaseEnd.Add(time.Minute), base) })
	started(1)
	wg.Go(func() { settle(twice, done, &twiceApplied[0]) })
	for i, c := range calls {
		wg.Go(func() { settle(c.id, c.st, &got[i]) })
	}
	wg.Go(func() { settle(twice, done, &twiceApplied[1]) })
	waitQueued(t, s, len(calls)+2)
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	mu.Lock()
	if batched < len(calls) {
		t.Errorf("the most settlements batched in one committed transaction: %d, want at least %d", batched, len(calls))
	}
	mu.Unlock()
	for i, c := range calls {
		if got[i] != c.want {
			t.Errorf("Settle(%d, %s) = %v, want %v", c.id.UpdateID, c.st.State, got[i], c.want)
		}
		if c.id.UpdateID == 999 {
			continue
		}
		row, ok, err := s.Get(ctx, c.id.UpdateID)
		if err != nil || !ok {
			t.Fatalf("Get(%d) = %v, %v", c.id.UpdateID, ok, err)
		}
		wantState, wantRecords := intake.StateProcessing, 0
		if c.want {
			wantState = c.st.State
			if c.st.Attempt != nil {
				wantRecords = 1
			}
		}
		if row.State != wantState {
			t.Errorf("update %d: state %s, want %s", c.id.UpdateID, row.State, wantState)
		}
		if c.want && c.st.State == intake.StateFailed && (!row.DueAt.Equal(c.st.RetryAt) || row.Error != c.st.Error) {
			t.Errorf("update %d failed: due %v error %q, want %v %q", c.id.UpdateID, row.DueAt, row.Error, c.st.RetryAt, c.st.Error)
		}
		recs, err := s.Attempts(ctx, c.id.UpdateID)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != wantRecords {
			t.Errorf("update %d: %d attempt records, want %d", c.id.UpdateID, len(recs), wantRecords)
		}
		for _, r := range recs {
			if r.Attempt != c.id.Attempt || r.ClaimID != c.id.ClaimID || r.Outcome != intake.AttemptCompleted {
				t.Errorf("update %d: record %+v, want the owner's identity", c.id.UpdateID, r)
			}
		}
	}
	if twiceApplied[0] == twiceApplied[1] {
		t.Errorf("two identical settlements of one update applied %v; want exactly one", twiceApplied)
	}
	if recs, err := s.Attempts(ctx, twice.UpdateID); err != nil || len(recs) != 1 {
		t.Errorf("update settled twice: %d records (%v), want 1", len(recs), err)
	}
}

// parkingStore opens a store with three claimed updates, a hook counting
// committed transactions by their batched settlements, and a second
// connection whose transaction holds SQLite's write lock until released.
func parkingStore(t *testing.T) (s *sqlitestore.Store, ids []intake.Identity, txs func() []int, lock *sql.Tx) {
	t.Helper()
	s, path := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	var (
		mu        sync.Mutex
		committed []int
	)
	txs = func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), committed...)
	}
	for id := int64(1); id <= 3; id++ {
		if _, err := storetest.Add(ctx, s, []intake.Incoming{{UpdateID: id, Body: []byte(`{"update_id":1}`), ReceivedAt: base}}); err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.Claim(ctx, id, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Minute), MaxAttempts: 5})
		if err != nil || !ok {
			t.Fatalf("Claim(%d) = %v, %v", id, ok, err)
		}
		ids = append(ids, got)
	}
	sqlitestore.OnTx(s, func(n int, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			committed = append(committed, n)
		}
	})
	return s, ids, txs, holdWriteLock(t, path)
}

// holdWriteLock takes SQLite's write lock on the file at path from a
// connection of its own, until the returned transaction ends (at the
// latest when the test does).
func holdWriteLock(t *testing.T, path string) *sql.Tx {
	t.Helper()
	other, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	lock, err := other.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lock.Rollback() })
	return lock
}

// settleLater settles id as completed at at in a goroutine of wg, and
// returns where it reports whether the settlement applied.
func settleLater(t *testing.T, wg *sync.WaitGroup, ctx context.Context, s *sqlitestore.Store, id intake.Identity, at time.Time) *bool {
	var applied bool
	wg.Go(func() {
		var err error
		if applied, err = s.Settle(ctx, id, intake.Settlement{State: intake.StateCompleted, At: at}); err != nil {
			t.Error(err)
		}
	})
	return &applied
}

// waitQueued waits until n writes wait for s's next transaction.
func waitQueued(t *testing.T, s *sqlitestore.Store, n int) {
	t.Helper()
	testkit.WaitFor(t, fmt.Sprintf("%d queued writes", n), func() bool { return sqlitestore.WaitingWrites(s) >= n })
}

// A settlement that finds the writer busy rides on the next write's
// transaction instead of committing one of its own.
func TestParkedSettlementRidesOnTheNextWrite(t *testing.T) {
	t.Parallel()
	s, ids, txs, lock := parkingStore(t)
	sqlitestore.ParkFor(s, time.Hour) // no flush by the timer in this test
	ctx := t.Context()
	at := base.Add(time.Second)
	var first, wg sync.WaitGroup
	started := waitStarted(t, s)
	first.Go(func() { _, _ = s.Renew(ctx, ids[0], base.Add(2*time.Minute), at) }) // leads, waits for the lock
	started(1)
	settled := settleLater(t, &wg, ctx, s, ids[1], at)
	waitQueued(t, s, 1)
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	first.Wait() // the first renewal committed
	testkit.WaitFor(t, "an idle writer", func() bool { return !sqlitestore.WriterBusy(s) })
	if got := txs(); len(got) != 1 {
		t.Fatalf("committed transactions (settlements in each) %v, want only the first renewal's: the settlement waits for the next write", got)
	}
	if _, err := s.Renew(ctx, ids[2], base.Add(2*time.Minute), at); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !*settled {
		t.Error("the parked settlement did not apply")
	}
	if got := txs(); len(got) != 2 || got[0] != 0 || got[1] != 1 {
		t.Errorf("committed transactions (settlements in each) %v, want [0 1]: the first renewal's alone, then the second's with the settlement", got)
	}
}

// With no other write coming, a parked settlement starts a transaction
// itself; one whose context ends while parked is never applied.
func TestParkedSettlementFlushesOrLeaves(t *testing.T) {
	t.Parallel()
	s, ids, txs, lock := parkingStore(t)
	ctx := t.Context()
	at := base.Add(time.Second)
	var wg sync.WaitGroup
	started := waitStarted(t, s)
	wg.Go(func() { _, _ = s.Renew(ctx, ids[0], base.Add(2*time.Minute), at) })
	started(1)
	cctx, cancel := context.WithCancel(ctx)
	var cancelled error
	wg.Go(func() {
		_, cancelled = s.Settle(cctx, ids[2], intake.Settlement{State: intake.StateCompleted, At: at})
	})
	settled := settleLater(t, &wg, ctx, s, ids[1], at)
	waitQueued(t, s, 2)
	cancel()
	// The cancelled one leaves the queue: wait until it has, since the
	// queue still holds two until its goroutine sees the cancellation.
	testkit.WaitFor(t, "the cancelled settlement to leave the queue", func() bool { return sqlitestore.WaitingWrites(s) == 1 })
	if err := lock.Rollback(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if !*settled {
		t.Error("the parked settlement did not apply")
	}
	if !errors.Is(cancelled, context.Canceled) {
		t.Errorf("settlement cancelled while parked = %v, want context.Canceled", cancelled)
	}
	if row, _, err := s.Get(ctx, ids[2].UpdateID); err != nil || row.State != intake.StateProcessing {
		t.Errorf("update of the cancelled settlement: %s (%v), want still processing", row.State, err)
	}
	if got := txs(); len(got) != 2 || got[1] != 1 {
		t.Errorf("committed transactions (settlements in each) %v, want the renewal's, then one of its own for the parked settlement", got)
	}
}

// waitStarted makes s count the groups of writes it starts and returns a
// function that waits until n started: a leader that started has formed
// its batch, and later writes wait for the next one.
func waitStarted(t *testing.T, s *sqlitestore.Store) func(n int64) {
	t.Helper()
	var started atomic.Int64
	sqlitestore.OnTxStart(s, func() { started.Add(1) })
	return func(n int64) {
		t.Helper()
		testkit.WaitFor(t, fmt.Sprintf("%d started groups of writes", n), func() bool { return started.Load() >= n })
	}
}
