package intake_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/tgrelay/tgrelay/intake"
)

// slowSettleStore is a claimingStore whose completions wait for release:
// a store that commits them slowly.
type slowSettleStore struct {
	*claimingStore
	release chan struct{}
}

func (s *slowSettleStore) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	return s.claimingStore.Settle(ctx, id, st)
}

// handledLog records the updates handled, in order.
type handledLog struct {
	mu  sync.Mutex
	ids []int64
}

func (h *handledLog) handler(_ context.Context, u intake.Update) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ids = append(h.ids, u.ID)
	return nil
}

func (h *handledLog) get() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ids)
}

// startSlowSettling starts a runner of maxQueued on a slowSettleStore,
// logging the updates it handles.
func startSlowSettling(t *testing.T, maxQueued int) (*slowSettleStore, *handledLog, *intake.Runner) {
	store := &slowSettleStore{claimingStore: newClaimingStore(), release: make(chan struct{})}
	log := &handledLog{}
	r := newRunner(t, intake.Config{Store: store, MaxQueued: maxQueued, Handler: log.handler})
	start(t, r)
	return store, log, r
}

// Updates whose handlers returned and whose completions are committing do
// not count against MaxQueued: while a store commits completions slowly,
// the next accepted update is still claimed on add and handled at once,
// not left in the store for a sweep and a claim of its own.
func TestCommittingCompletionsLeaveMaxQueuedFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, log, r := startSlowSettling(t, 2)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		synctest.Wait() // 1 and 2 handled, their completions committing
		mustAccept(t, r, msg(3, 3), intake.Accepted)
		synctest.Wait()
		got := log.get()
		slices.Sort(got) // 1 and 2 are of different chats: either may run first
		store.mu.Lock()
		asked := store.asked[3]
		store.mu.Unlock()
		close(store.release)
		synctest.Wait() // the completions commit, and room frees for a catch-up sweep
		idle(t, r)
		if !slices.Equal(got, []int64{1, 2, 3}) || !asked {
			t.Fatalf("while 2 completions committed (MaxQueued 2): handled %v, update 3 claimed on add %v; want [1 2 3], true", got, asked)
		}
	})
}

// Committing completions have a bound of their own, four times MaxQueued,
// on each lane: past it an accepted update is left in the store, and
// handled once room frees.
func TestCommittingCompletionsHaveTheirOwnBound(t *testing.T) {
	for _, lane := range []struct {
		name   string
		update func(id, chat int64) []byte
	}{
		{"ordinary", msg},
		{"deadline", callbackQuery},
	} {
		t.Run(lane.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store, log, r := startSlowSettling(t, 1)
				for id := int64(1); id <= 4; id++ {
					mustAccept(t, r, lane.update(id, id), intake.Accepted)
					synctest.Wait()
				}
				mustAccept(t, r, lane.update(5, 5), intake.Accepted)
				synctest.Wait()
				before := log.get()
				if got := row(t, store, 5); got.State != intake.StatePending {
					t.Errorf("update 5 is %q with 4 completions committing (MaxQueued 1), want pending", got.State)
				}
				close(store.release)
				synctest.Wait() // the completions commit, and room frees for a catch-up sweep
				idle(t, r)
				if !slices.Equal(before, []int64{1, 2, 3, 4}) {
					t.Fatalf("handled %v while 4 completions committed, want [1 2 3 4]", before)
				}
				if got := log.get(); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
					t.Fatalf("handled %v once they committed, want [1 2 3 4 5]", got)
				}
			})
		})
	}
}

// Updates with a deadline whose completions are committing count apart
// from their lane's share of MaxQueued too; once committed they count
// nowhere, so an ordinary update then still finds room.
func TestCommittingDeadlineCompletions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store, log, r := startSlowSettling(t, 1)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		synctest.Wait() // 1 handled, its completion committing
		mustAccept(t, r, callbackQuery(2, 8), intake.Accepted)
		synctest.Wait()
		got := log.get()
		close(store.release)
		synctest.Wait()
		idle(t, r)
		if !slices.Equal(got, []int64{1, 2}) {
			t.Fatalf("handled %v while update 1's completion committed (MaxQueued 1), want [1 2]", got)
		}
		mustAccept(t, r, msg(3, 9), intake.Accepted)
		synctest.Wait()
		store.mu.Lock()
		asked := store.asked[3]
		store.mu.Unlock()
		if got := log.get(); !asked || !slices.Contains(got, 3) {
			t.Fatalf("after both completions committed, update 3 claimed on add %v, handled %v; want true and handled", asked, got)
		}
	})
}
