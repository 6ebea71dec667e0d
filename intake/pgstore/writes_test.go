package pgstore_test

import (
	"context"
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
	})
	return l
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
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if owned, err := st.OwnsTx(ctx, tx, ids[0], at(50)); err != nil || !owned {
		t.Fatalf("OwnsTx = %v, %v", owned, err)
	}

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
