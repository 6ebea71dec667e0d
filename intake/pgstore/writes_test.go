package pgstore_test

import (
	"context"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// batchLog records a store's shared transactions. Its first transaction
// waits until want writes have entered the store, so that the others queue
// up behind it and share the next ones.
type batchLog struct {
	want    int64
	entered atomic.Int64
	allIn   chan struct{}
	first   atomic.Bool

	mu        sync.Mutex
	batches   [][]int64 // update ids of each shared transaction, in run order
	merged    [][]int64 // update ids of each statement of merged settlements
	uncommits [][]int64 // those rolled back
	gateLate  bool      // the first transaction gave up waiting
}

// bounded limits every wait of these tests.
const bounded = 10 * time.Second

func logBatches(st *pgstore.Store, want int) *batchLog {
	l := &batchLog{want: int64(want), allIn: make(chan struct{})}
	pgstore.SetBatchHooks(st, pgstore.BatchHooks{
		Enter: func() {
			if l.entered.Add(1) == l.want {
				close(l.allIn)
			}
		},
		Batch: func(ids []int64) {
			l.mu.Lock()
			l.batches = append(l.batches, slices.Clone(ids))
			l.mu.Unlock()
			if l.first.CompareAndSwap(false, true) {
				select {
				case <-l.allIn:
				case <-time.After(bounded):
					l.mu.Lock()
					l.gateLate = true
					l.mu.Unlock()
				}
			}
		},
		End: func(ids []int64, committed bool) {
			if !committed {
				l.mu.Lock()
				l.uncommits = append(l.uncommits, slices.Clone(ids))
				l.mu.Unlock()
			}
		},
		Merged: func(ids []int64) {
			l.mu.Lock()
			l.merged = append(l.merged, slices.Clone(ids))
			l.mu.Unlock()
		},
	})
	return l
}

// rolledBack reports whether a shared transaction was rolled back.
func (l *batchLog) rolledBack() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.uncommits) != 0
}

// mergedWith returns the update ids of the merged settlement statement
// that settled id, or nil.
func (l *batchLog) mergedWith(id int64) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.merged {
		if slices.Contains(m, id) {
			return m
		}
	}
	return nil
}

// run calls f(0), and once it leads a shared transaction (held until all
// want writes entered the store), f(1) … f(n-1) concurrently; it returns
// when all have returned. The writes of f(1) … f(n-1) thus queue behind
// f(0)'s.
func (l *batchLog) run(t *testing.T, n int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { f(0) })
	waitFor(t, bounded, "the first write to lead", func() (bool, error) { return l.first.Load(), nil })
	for i := 1; i < n; i++ {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}

// largest returns the size of the largest shared transaction.
func (l *batchLog) largest(t *testing.T) int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gateLate {
		t.Fatalf("only %d of %d writes entered the store within %v", l.entered.Load(), l.want, bounded)
	}
	m := 0
	for _, b := range l.batches {
		m = max(m, len(b))
	}
	return m
}

// claimRows adds and claims rows 1..n and returns their identities.
func claimRows(t *testing.T, st *pgstore.Store, n int) []intake.Identity {
	t.Helper()
	ids := make([]intake.Identity, n)
	for i := range ids {
		mustAdd(t, st, int64(i+1), 0)
		ids[i] = mustClaimOwned(t, st, int64(i+1), claimOpts(0, 10_000))
	}
	return ids
}

func completed(ms int64) intake.Settlement {
	return intake.Settlement{State: intake.StateCompleted, At: at(ms)}
}

// TestConcurrentWritesShareTransactions: settlements made at once commit in
// fewer transactions than there are settlements, and each still gets its
// own answer.
func TestConcurrentWritesShareTransactions(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	const n = 40
	ids := claimRows(t, st, n)
	stale := ids[n-1]
	stale.ClaimID = "not-the-claim"
	l := logBatches(st, n+1)

	oks := make([]bool, n+1)
	errs := make([]error, n+1)
	l.run(t, n+1, func(i int) {
		if i == n { // a stale identity: refused, inside a shared transaction
			oks[i], errs[i] = st.Settle(t.Context(), stale, completed(10))
			return
		}
		oks[i], errs[i] = st.Settle(t.Context(), ids[i], completed(100))
	})
	for i := range n {
		if errs[i] != nil || !oks[i] {
			t.Fatalf("settle %d = %v, %v; want true", i+1, oks[i], errs[i])
		}
	}
	if errs[n] != nil || oks[n] {
		t.Fatalf("settle with a stale identity = %v, %v; want false", oks[n], errs[n])
	}
	if m := l.largest(t); m < 2 {
		t.Fatalf("%d concurrent writes never shared a transaction: %v", n+1, l.batches)
	}
	stats, err := st.Stats(t.Context())
	if err != nil || stats.Count[intake.StateCompleted] != n {
		t.Fatalf("Stats = %+v, %v; want %d completed", stats, err, n)
	}
	t.Logf("%d writes in %d transactions", n+1, len(l.batches))
}

// TestFailingWriteInBatchDoesNotFailOthers: a statement that fails rolls its
// shared transaction back; the other writes of it are run again alone and
// succeed, and the failing one gets its own error.
func TestFailingWriteInBatchDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	const n = 12
	ids := claimRows(t, st, n)
	l := logBatches(st, n)

	oks := make([]bool, n)
	errs := make([]error, n)
	l.run(t, n, func(i int) {
		s := completed(100)
		if i == n/2 {
			// Not valid UTF-8: PostgreSQL refuses the text.
			s = intake.Settlement{State: intake.StateFailed, At: at(100), RetryAt: at(200), Error: "bad \xff\x00"}
		}
		oks[i], errs[i] = st.Settle(t.Context(), ids[i], s)
	})
	if errs[n/2] == nil {
		t.Fatalf("the invalid settlement succeeded (%v)", oks[n/2])
	}
	for i := range n {
		if i != n/2 && (errs[i] != nil || !oks[i]) {
			t.Fatalf("settle %d next to a failing one = %v, %v; want true", i+1, oks[i], errs[i])
		}
	}
	l.largest(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	shared := false
	for _, b := range l.uncommits {
		shared = shared || (len(b) > 1 && slices.Contains(b, ids[n/2].UpdateID))
	}
	if !shared {
		t.Fatalf("the failing write never failed a shared transaction: batches %v, rolled back %v", l.batches, l.uncommits)
	}
	row, ok, err := st.Get(t.Context(), ids[n/2].UpdateID)
	if err != nil || !ok || row.State != intake.StateProcessing {
		t.Fatalf("the failed settlement's row = %+v, %v, %v; want still processing", row, ok, err)
	}
}

// TestBatchRunsWritesInUpdateIDOrder: a shared transaction runs its writes
// sorted by update id, so two processes' transactions lock rows in the same
// order.
func TestBatchRunsWritesInUpdateIDOrder(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	const n = 16
	ids := claimRows(t, st, n)
	l := logBatches(st, n)
	l.run(t, n, func(i int) {
		id := ids[(i*7)%n] // started out of order
		if ok, err := st.Renew(t.Context(), id, at(20_000), at(100)); err != nil || !ok {
			t.Errorf("renew %d = %v, %v", id.UpdateID, ok, err)
		}
	})
	if m := l.largest(t); m < 2 {
		t.Fatalf("no shared transaction: %v", l.batches)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, b := range l.batches {
		if !slices.IsSorted(b) {
			t.Fatalf("a shared transaction ran writes in the order %v", b)
		}
	}
}

func TestOrderWritesKeepsOrderWithinARow(t *testing.T) {
	t.Parallel()
	got := pgstore.OrderWrites([]int64{5, 3, 5, 1, 3, 5})
	want := []int{3, 1, 4, 0, 2, 5}
	if !slices.Equal(got, want) {
		t.Fatalf("OrderWrites = %v, want %v", got, want)
	}
}

// TestLockedRowDoesNotStallOtherWrites: while a domain transaction holds a
// row through OwnsTx, a renewal of that row waits for it (as a lone write
// would), and writes of other rows commit meanwhile.
func TestLockedRowDoesNotStallOtherWrites(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	ctx := t.Context()
	const n = 6
	ids := claimRows(t, st, n)
	tx := holdRow(t, st, pool, ids[0])

	type result struct {
		ok  bool
		err error
	}
	renewed := make(chan result, 1)
	go func() {
		ok, err := st.Renew(ctx, ids[0], at(20_000), at(100))
		renewed <- result{ok, err}
	}()
	waitFor(t, bounded, "the renewal to wait on the row lock", func() (bool, error) {
		var k int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%'`).Scan(&k)
		return k > 0, err
	})

	// The other rows settle, at once and concurrently, while tx is open.
	sctx, cancel := context.WithTimeout(ctx, bounded)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range ids[1:] {
		wg.Go(func() {
			if ok, err := st.Settle(sctx, id, completed(100)); err != nil || !ok {
				t.Errorf("settle %d while row 1 is locked = %v, %v", id.UpdateID, ok, err)
			}
		})
	}
	wg.Wait()
	select {
	case r := <-renewed:
		t.Fatalf("the renewal returned %+v while the fenced transaction was open", r)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-renewed:
		if r.err != nil || !r.ok {
			t.Fatalf("renewal after the commit = %+v, want true", r)
		}
	case <-time.After(bounded):
		t.Fatal("the renewal did not proceed after the commit")
	}
}

// TestCancelledWriteIsNotCommitted: a write whose context ends while it
// waits for a shared transaction reports the cancellation and changes
// nothing.
func TestCancelledWriteIsNotCommitted(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	ids := claimRows(t, st, 2)
	ctx, cancel := context.WithCancel(t.Context())
	hold := make(chan struct{})
	var held atomic.Bool
	pgstore.SetBatchHooks(st, pgstore.BatchHooks{
		Enter: func() {},
		Batch: func([]int64) {
			if held.CompareAndSwap(false, true) {
				<-hold
			}
		},
	})
	var wg sync.WaitGroup
	wg.Go(func() {
		if ok, err := st.Settle(t.Context(), ids[0], completed(100)); err != nil || !ok {
			t.Errorf("settle 1 = %v, %v", ok, err)
		}
	})
	waitFor(t, bounded, "the first settlement to lead", func() (bool, error) { return held.Load(), nil })
	errc := make(chan error, 1)
	go func() {
		_, err := st.Settle(ctx, ids[1], completed(100))
		errc <- err
	}()
	cancel()
	var err error
	select {
	case err = <-errc:
	case <-time.After(bounded):
		t.Fatal("the cancelled settlement did not return")
	}
	close(hold)
	wg.Wait()
	if err == nil {
		t.Fatal("a settlement cancelled while queued reported success")
	}
	row, _, gerr := st.Get(t.Context(), ids[1].UpdateID)
	if gerr != nil || row.State != intake.StateProcessing {
		t.Fatalf("row 2 = %+v, %v; want still processing", row, gerr)
	}
}

// TestTwoStoresClaimingTheSameRowsEachWinOnce: two stores on one table (as
// two processes would be) claim the same rows at once, in opposite orders.
// Their shared transactions meet on rows the other holds; no claim fails,
// none waits forever, and every row is won exactly once.
func TestTwoStoresClaimingTheSameRowsEachWinOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	table := uniqueTable()
	var stores [2]*pgstore.Store
	for k := range stores {
		st, err := pgstore.New(t.Context(), poolFor(t, url), pgstore.Config{Table: table})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		stores[k] = st
	}
	const rows, perStore = 200, 8
	for id := int64(1); id <= rows; id++ {
		mustAdd(t, stores[0], id, 0)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 4*bounded)
	defer cancel()
	var wins [rows + 1]atomic.Int32
	var wg sync.WaitGroup
	for k, st := range stores {
		for g := range perStore {
			wg.Go(func() {
				for j := range rows {
					id := int64(j + 1)
					if k == 1 {
						id = rows - int64(j)
					}
					if (int(id)+g)%perStore != 0 && (int(id)+g)%3 != 0 {
						continue // each goroutine claims a spread subset
					}
					ident, ok, err := st.Claim(ctx, id, claimOpts(10, 10_000))
					if err != nil {
						t.Errorf("store %d: Claim(%d): %v", k, id, err)
						return
					}
					if ok {
						wins[id].Add(1)
						if ident.Attempt != 1 {
							t.Errorf("store %d won %d with attempt %d", k, id, ident.Attempt)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	for id := 1; id <= rows; id++ {
		if w := wins[id].Load(); w != 1 {
			t.Fatalf("row %d was won %d times", id, w)
		}
	}
}

// TestSharedTransactionsAreBounded: more concurrent writes than
// MaxWriteBatch queue up; no transaction takes more than MaxWriteBatch, and
// the one after the held leader takes exactly that many.
func TestSharedTransactionsAreBounded(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	n := pgstore.MaxWriteBatch + 40
	ids := claimRows(t, st, n)
	l := logBatches(st, n)
	l.run(t, n, func(i int) {
		if ok, err := st.Settle(t.Context(), ids[i], completed(100)); err != nil || !ok {
			t.Errorf("settle %d = %v, %v", i+1, ok, err)
		}
	})
	if m := l.largest(t); m != pgstore.MaxWriteBatch {
		t.Fatalf("largest shared transaction %d writes, want %d: %d transactions", m, pgstore.MaxWriteBatch, len(l.batches))
	}
}

func TestMergeSettlesTakesSettlementsOfRowsWrittenOnce(t *testing.T) {
	t.Parallel()
	ids := []int64{5, 3, 5, 1, 3, 7, 8, 9, 2}
	settles := []bool{true, true, true, true, false, true, false, true, true}
	merged, rest := pgstore.MergeSettles(ids, settles)
	// Sorted: 1(3) 2(8) 3(1) 3(4) 5(0) 5(2) 7(5) 8(6) 9(7). Rows 3 and 5
	// have two writes each, 8's write is no settlement.
	if want := []int{3, 8, 5, 7}; !slices.Equal(merged, want) {
		t.Fatalf("merged = %v, want %v", merged, want)
	}
	if want := []int{1, 4, 0, 2, 6}; !slices.Equal(rest, want) {
		t.Fatalf("rest = %v, want %v", rest, want)
	}
	// A single mergeable settlement runs in its own form.
	merged, rest = pgstore.MergeSettles([]int64{4, 4, 6}, []bool{true, true, true})
	if merged != nil || !slices.Equal(rest, []int{0, 1, 2}) {
		t.Fatalf("MergeSettles with one candidate = %v, %v; want none merged", merged, rest)
	}
}

// settleCase is settlement i of TestMergedSettlementsAnswerEach's mix, on
// the row claimed as id: the identity to settle with, the settlement, and
// whether it applies.
func settleCase(i int, id intake.Identity) (intake.Identity, intake.Settlement, bool) {
	rec := &intake.AttemptRecord{
		// The identity's fields are taken from id, whatever these hold.
		UpdateID: 999_999, Attempt: 99, ClaimID: "ignored",
		Process: "proc-" + string(rune('a'+i%3)), StartedAt: at(int64(i)), EndedAt: at(int64(50 + i)),
		Outcome: intake.AttemptCompleted, Status: 200 + i,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`),
	}
	switch i % 7 {
	case 0: // applies at the lease's last instant, with a record
		return id, intake.Settlement{State: intake.StateCompleted, At: at(10_000), Attempt: rec}, true
	case 1: // applies, no record
		return id, intake.Settlement{State: intake.StateFailed, At: at(100), RetryAt: at(5_000 + int64(i)), Error: "boom"}, true
	case 2: // applies, with a record without header or body
		rec.Outcome, rec.Error, rec.Header, rec.Body = intake.AttemptFailed, "gave up", nil, nil
		return id, intake.Settlement{State: intake.StateAbandoned, At: at(200), Error: "gave up", Attempt: rec}, true
	case 3: // a stale claim id
		id.ClaimID = "not-the-claim"
		return id, intake.Settlement{State: intake.StateCompleted, At: at(100), Attempt: rec}, false
	case 4: // a stale attempt
		id.Attempt++
		return id, intake.Settlement{State: intake.StateFailed, At: at(100), RetryAt: at(300), Error: "x", Attempt: rec}, false
	case 5: // the lease lapsed before the settlement
		return id, intake.Settlement{State: intake.StateCompleted, At: at(10_001), Attempt: rec}, false
	default: // applies; completed clears the error
		return id, intake.Settlement{State: intake.StateCompleted, At: at(300), Error: "dropped"}, true
	}
}

// settledView is what a settlement leaves of update id in st: its row and
// its history, with the claim id (random per store) replaced by whether it
// is the one claimID.
func settledView(t *testing.T, st *pgstore.Store, id int64, claimID string) (intake.Row, []intake.AttemptRecord) {
	t.Helper()
	row, ok, err := st.Get(t.Context(), id)
	if err != nil || !ok {
		t.Fatalf("Get(%d) = %v, %v", id, ok, err)
	}
	norm := func(c string) string {
		if c == claimID {
			return "the claim"
		}
		return c
	}
	row.ClaimID = norm(row.ClaimID)
	recs, err := st.Attempts(t.Context(), id)
	if err != nil {
		t.Fatalf("Attempts(%d): %v", id, err)
	}
	for k := range recs {
		recs[k].ClaimID = norm(recs[k].ClaimID)
	}
	return row, recs
}

// TestMergedSettlementsAnswerEach: settlements of distinct updates made at
// once run as one statement in a shared transaction; each gets its own
// answer (applied for the owner's identity; not for a stale claim id, a
// stale attempt or a lapsed lease), and the rows and attempt records they
// leave are those the same settlements leave made one at a time.
func TestMergedSettlementsAnswerEach(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	one, _ := newStore(t) // the same settlements, one at a time
	const n = 57
	ids := claimRows(t, st, n)
	oneIDs := claimRows(t, one, n)
	l := logBatches(st, n)

	oks := make([]bool, n)
	errs := make([]error, n)
	l.run(t, n, func(i int) {
		id, s, _ := settleCase(i, ids[i])
		oks[i], errs[i] = st.Settle(t.Context(), id, s)
	})
	for i := range n {
		_, _, want := settleCase(i, ids[i])
		if errs[i] != nil || oks[i] != want {
			t.Errorf("settle %d (case %d) = %v, %v; want %v", i+1, i%7, oks[i], errs[i], want)
		}
	}
	l.largest(t)
	// f(0) led alone; the others queued behind it and shared the next
	// transaction, in one statement.
	if m := l.mergedWith(ids[1].UpdateID); len(m) != n-1 {
		t.Fatalf("settlements 2 to %d were not merged into one statement: merged %v, batches %v", n, l.merged, l.batches)
	}
	if l.rolledBack() {
		t.Fatalf("a shared transaction was rolled back (its writes then ran alone): %v", l.uncommits)
	}
	for i := range n {
		id, s, want := settleCase(i, oneIDs[i])
		if ok, err := one.Settle(t.Context(), id, s); err != nil || ok != want {
			t.Fatalf("settle %d alone = %v, %v; want %v", i+1, ok, err, want)
		}
	}
	for i := range n {
		row, recs := settledView(t, st, ids[i].UpdateID, ids[i].ClaimID)
		oneRow, oneRecs := settledView(t, one, oneIDs[i].UpdateID, oneIDs[i].ClaimID)
		if !reflect.DeepEqual(row, oneRow) {
			t.Errorf("update %d (case %d) merged: %+v\none at a time: %+v", i+1, i%7, row, oneRow)
		}
		if !reflect.DeepEqual(recs, oneRecs) {
			t.Errorf("history of %d (case %d) merged: %+v\none at a time: %+v", i+1, i%7, recs, oneRecs)
		}
		_, s, applied := settleCase(i, ids[i])
		wantRecs := 0
		if applied && s.Attempt != nil {
			wantRecs = 1
		}
		if len(recs) != wantRecs {
			t.Errorf("update %d (case %d) has %d attempt records, want %d", i+1, i%7, len(recs), wantRecs)
		}
		wantState := intake.StateProcessing
		if applied {
			wantState = s.State
		}
		if row.State != wantState {
			t.Errorf("update %d (case %d) is %s, want %s", i+1, i%7, row.State, wantState)
		}
	}
}

// TestMergedSettlementsKeepOneSettlePerRow: two settlements of one attempt
// in one shared transaction are not merged with the others: exactly one of
// them applies, and the row and history are the winner's.
func TestMergedSettlementsKeepOneSettlePerRow(t *testing.T) {
	t.Parallel()
	st, _ := newStore(t)
	const n = 10
	ids := claimRows(t, st, n)
	twice := ids[4]
	l := logBatches(st, n+1)

	oks := make([]bool, n+1)
	errs := make([]error, n+1)
	l.run(t, n+1, func(i int) {
		switch i {
		case 4: // twice, completed
			oks[i], errs[i] = st.Settle(t.Context(), twice, intake.Settlement{State: intake.StateCompleted, At: at(100),
				Attempt: &intake.AttemptRecord{StartedAt: at(1), EndedAt: at(100), Outcome: intake.AttemptCompleted, Status: 200}})
		case n: // twice, failed
			oks[i], errs[i] = st.Settle(t.Context(), twice, intake.Settlement{State: intake.StateFailed, At: at(100),
				RetryAt: at(500), Error: "second",
				Attempt: &intake.AttemptRecord{StartedAt: at(1), EndedAt: at(100), Outcome: intake.AttemptFailed, Status: 500}})
		default:
			oks[i], errs[i] = st.Settle(t.Context(), ids[i], completed(100))
		}
	})
	for i := range n {
		if i != 4 && (errs[i] != nil || !oks[i]) {
			t.Errorf("settle %d = %v, %v; want true", i+1, oks[i], errs[i])
		}
	}
	if errs[4] != nil || errs[n] != nil || oks[4] == oks[n] {
		t.Fatalf("two settlements of update %d = (%v, %v) and (%v, %v); want exactly one applied",
			twice.UpdateID, oks[4], errs[4], oks[n], errs[n])
	}
	l.largest(t)
	l.mu.Lock()
	var shared bool
	for _, b := range l.batches {
		k := 0
		for _, id := range b {
			if id == twice.UpdateID {
				k++
			}
		}
		shared = shared || k == 2
	}
	l.mu.Unlock()
	if !shared {
		t.Fatalf("the two settlements of %d never shared a transaction: %v", twice.UpdateID, l.batches)
	}
	if m := l.mergedWith(twice.UpdateID); m != nil {
		t.Fatalf("a twice-settled update was merged: %v", m)
	}
	if m := l.mergedWith(ids[5].UpdateID); len(m) < 2 {
		t.Fatalf("the other settlements were not merged: %v", l.merged)
	}
	if l.rolledBack() {
		t.Fatalf("a shared transaction was rolled back (its writes then ran alone): %v", l.uncommits)
	}
	row, recs := settledView(t, st, twice.UpdateID, twice.ClaimID)
	wantState, wantStatus := intake.StateCompleted, 200
	if oks[n] {
		wantState, wantStatus = intake.StateFailed, 500
	}
	if row.State != wantState || len(recs) != 1 || recs[0].Status != wantStatus {
		t.Fatalf("update %d = %+v with history %+v; want %s with the winner's one record", twice.UpdateID, row, recs, wantState)
	}
}

// TestMergedSettlementOfHeldRowRunsAlone: a settlement whose row another
// transaction holds (OwnsTx) is dropped from the merged statement and run
// alone, waiting for the row; the others merged with it commit meanwhile.
func TestMergedSettlementOfHeldRowRunsAlone(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	ctx := t.Context()
	const n, held = 8, 3
	ids := claimRows(t, st, n)
	tx := holdRow(t, st, pool, ids[held])
	l := logBatches(st, n)

	sctx, cancel := context.WithTimeout(ctx, 2*bounded)
	defer cancel()
	oks := make([]bool, n)
	errs := make([]error, n)
	settle := func(i int) {
		rec := &intake.AttemptRecord{StartedAt: at(1), EndedAt: at(100), Outcome: intake.AttemptCompleted, Status: 200 + i}
		oks[i], errs[i] = st.Settle(sctx, ids[i], intake.Settlement{State: intake.StateCompleted, At: at(100), Attempt: rec})
	}
	// As l.run, but the held row's settlement is waited for apart.
	var others sync.WaitGroup
	others.Go(func() { settle(0) })
	waitFor(t, bounded, "the first write to lead", func() (bool, error) { return l.first.Load(), nil })
	ran := make(chan struct{})
	for i := 1; i < n; i++ {
		if i == held {
			go func() { defer close(ran); settle(i) }()
			continue
		}
		others.Go(func() { settle(i) })
	}
	othersDone := make(chan struct{})
	go func() { others.Wait(); close(othersDone) }()
	select {
	case <-othersDone: // while tx still holds the row
	case <-time.After(bounded):
		t.Fatal("the other settlements did not return while a row of their batch was held")
	}
	for i := range n {
		if i != held && (errs[i] != nil || !oks[i]) {
			t.Errorf("settle %d while row %d is held = %v, %v; want true", i+1, held+1, oks[i], errs[i])
		}
	}
	if m := l.mergedWith(ids[held].UpdateID); len(m) < 2 {
		t.Fatalf("the held row's settlement was not in a merged statement: %v", l.merged)
	}
	waitFor(t, bounded, "the held row's settlement to wait on its lock", func() (bool, error) {
		var k int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%rec_after%'`).Scan(&k)
		return k > 0, err
	})
	select {
	case <-ran:
		t.Fatalf("the held row's settlement returned %v, %v while its row was held", oks[held], errs[held])
	default:
	}
	// Held, the row was not settled, nor its record written.
	if row, recs := settledView(t, st, ids[held].UpdateID, ids[held].ClaimID); row.State != intake.StateProcessing || len(recs) != 0 {
		t.Fatalf("held update = %+v with history %+v; want processing, no record", row, recs)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ran:
	case <-time.After(bounded):
		t.Fatal("the held row's settlement did not proceed after the commit")
	}
	if errs[held] != nil || !oks[held] {
		t.Fatalf("the held row's settlement after the commit = %v, %v; want true", oks[held], errs[held])
	}
	for i := range n {
		row, recs := settledView(t, st, ids[i].UpdateID, ids[i].ClaimID)
		if row.State != intake.StateCompleted || len(recs) != 1 || recs[0].Status != 200+i {
			t.Errorf("update %d = %+v with history %+v; want completed with its one record", i+1, row, recs)
		}
	}
	if l.rolledBack() {
		t.Fatalf("a shared transaction was rolled back (its writes then ran alone): %v", l.uncommits)
	}
}

// TestCancelledLoneWriteReportsWhatHappened: a settlement of a row that a
// domain transaction holds (OwnsTx) runs alone and waits for the row lock.
// When its caller's context ends meanwhile, what it reports must agree
// with the row: an error only if the settlement did not apply, however
// the domain transaction ends afterwards.
func TestCancelledLoneWriteReportsWhatHappened(t *testing.T) {
	t.Parallel()
	st, pool := newStore(t)
	ctx := t.Context()
	ids := claimRows(t, st, 1)
	tx := holdRow(t, st, pool, ids[0])

	type result struct {
		ok  bool
		err error
	}
	sctx, cancel := context.WithCancel(ctx)
	settled := make(chan result, 1)
	go func() {
		ok, err := st.Settle(sctx, ids[0], completed(100))
		settled <- result{ok, err}
	}()
	waitFor(t, bounded, "the settlement to wait on the row lock", func() (bool, error) {
		var k int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE%'`).Scan(&k)
		return k > 0, err
	})
	cancel()
	var r result
	select {
	case r = <-settled:
	case <-time.After(bounded):
		t.Fatal("the cancelled settlement did not return")
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// Whatever the settlement's statement still does at the server is done
	// once no statement waits on a lock.
	waitFor(t, bounded, "no statement waiting on a lock", func() (bool, error) {
		var k int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&k)
		return k == 0, err
	})
	waitServerIdle(t, pool)
	row, _, err := st.Get(ctx, ids[0].UpdateID)
	if err != nil {
		t.Fatal(err)
	}
	applied := row.State == intake.StateCompleted
	t.Logf("settlement reported ok=%v err=%v; row %s", r.ok, r.err, row.State)
	if applied != (r.err == nil && r.ok) {
		t.Fatalf("settlement reported ok=%v err=%v, but the row is %s afterwards", r.ok, r.err, row.State)
	}
}
