package intake_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// Rows already scheduled here cannot starve the rest: each sweep widens its
// page by their number.
func TestSweepDoesNotStarveBehindScheduledRows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		for id := int64(1); id <= 10; id++ {
			if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: id, Body: msg(id, 1), ReceivedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		release := make(chan struct{})
		var handled []int64
		r := newRunner(t, intake.Config{
			Store:        store,
			PageSize:     2,
			PendingGrace: time.Nanosecond,
			Handler: func(_ context.Context, u intake.Update) error {
				handled = append(handled, u.ID)
				<-release
				return nil
			},
		})
		start(t, r) // schedules 1 and 2; 1 runs and blocks the chat's line
		time.Sleep(time.Millisecond)
		// Row 1 is claimed (not due); 2 is due and scheduled. A fixed page of
		// 2 would list rows 2 and 3 forever after the next sweep.
		var got []int
		for range 3 {
			got = append(got, sweep(t, r))
		}
		close(release)
		idle(t, r)
		if want := []int{3, 3, 2}; !slices.Equal(got, want) {
			t.Fatalf("sweeps scheduled %v, want %v", got, want)
		}
		if !slices.Equal(handled, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
			t.Fatalf("handled %v, want 1..10 in order", handled)
		}
	})
}

// MaxQueued bounds what one runner holds scheduled. An accepted update
// beyond it is recorded but not scheduled; when room frees, a catch-up
// sweep takes it over without waiting for the pending grace.
func TestMaxQueuedBoundAndCatchUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		release := make(chan struct{})
		var handled []int64
		r := newRunner(t, intake.Config{
			Store:     store,
			MaxQueued: 2,
			Handler: func(_ context.Context, u intake.Update) error {
				handled = append(handled, u.ID)
				if u.ID == 1 {
					<-release
				}
				return nil
			},
		})
		start(t, r)
		t0 := time.Now()
		for id := int64(1); id <= 3; id++ {
			mustAccept(t, r, msg(id, 1), intake.Accepted)
		}
		synctest.Wait()
		if n, err := r.Sweep(t.Context()); err != nil || n != 0 {
			t.Fatalf("sweep with a full queue = %d, %v; want nothing scheduled", n, err)
		}
		close(release)
		synctest.Wait()
		idle(t, r)
		if !slices.Equal(handled, []int64{1, 2, 3}) {
			t.Fatalf("handled %v, want [1 2 3]", handled)
		}
		if waited := time.Since(t0); waited != 0 {
			t.Fatalf("the update beyond MaxQueued waited %v (the pending grace?)", waited)
		}
	})
}

// An observer that panics cannot lose an update.
func TestPanickingObserverIsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		boom := func() { panic("observer bug") }
		calls := 0
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(context.Context, intake.Update) error {
				calls++
				if calls == 1 {
					return errBoom
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return 0, true },
			Observer: intake.Observer{
				AcceptFunc:     func(int64, intake.Acceptance) { boom() },
				ClaimFunc:      func(intake.Identity) { boom() },
				SettleFunc:     func(intake.Identity, intake.State) { boom() },
				FailureFunc:    func(intake.Failure) { boom() },
				StoreErrorFunc: func(intake.Step, int64, error) { boom() },
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		sweep(t, r)
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateCompleted || calls != 2 {
			t.Fatalf("row %q after %d calls, want completed after 2", got.State, calls)
		}
	})
}

// The observer hears every step of a successful update.
func TestObserverEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ev recorder
		r := newRunner(t, intake.Config{
			Store:   memstore.New(),
			Handler: nop,
			Observer: intake.Observer{
				AcceptFunc: func(id int64, a intake.Acceptance) { ev.add("%v %d", a, id) },
				ClaimFunc:  func(id intake.Identity) { ev.add("claim %d/%d", id.UpdateID, id.Attempt) },
				SettleFunc: func(id intake.Identity, s intake.State) { ev.add("settle %d %s", id.UpdateID, s) },
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		mustAccept(t, r, msg(1, 1), intake.Duplicate)
		mustAccept(t, r, []byte(`[]`), intake.Invalid)
		want := []string{"accepted 1", "claim 1/1", "settle 1 completed", "duplicate 1", "invalid -1"}
		if got := ev.get(); !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}

// A line waiting for its predecessor holds no slot: with two slots, one
// busy chat with a queue cannot keep another chat waiting.
func TestWaitingLineHoldsNoSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		h := &handledOrder{hold: map[int64]chan struct{}{1: release}}
		r := newRunner(t, intake.Config{
			Store:         memstore.New(),
			MaxConcurrent: 2,
			Handler:       h.handle,
		})
		start(t, r)
		for id := int64(1); id <= 4; id++ { // 1..3 on chat 1, 4 on chat 2
			chat := int64(1)
			if id == 4 {
				chat = 2
			}
			mustAccept(t, r, msg(id, chat), intake.Accepted)
		}
		synctest.Wait()
		got := h.got()
		close(release)
		slices.Sort(got)
		if !slices.Equal(got, []int64{1, 4}) {
			t.Fatalf("while update 1 runs: handled %v, want 1 and 4", got)
		}
		idle(t, r)
		if order := h.got(); !slices.Equal(order[2:], []int64{2, 3}) {
			t.Fatalf("handled %v, want 2 then 3 after 1 and 4", order)
		}
	})
}

// A backlog larger than one page drains without waiting a SweepInterval
// per page: a full page asks for the next one as soon as it has mostly run.
func TestBacklogLargerThanAPageDrainsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		const n = 250
		for id := int64(1); id <= n; id++ {
			if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: id, Body: msg(id, id), ReceivedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		handled := 0
		r := newRunner(t, intake.Config{
			Store:         store,
			PageSize:      100,
			SweepInterval: time.Hour,
			Handler: func(context.Context, intake.Update) error {
				mu.Lock()
				handled++
				mu.Unlock()
				return nil
			},
		})
		t0 := time.Now()
		start(t, r)
		for {
			synctest.Wait()
			mu.Lock()
			h := handled
			mu.Unlock()
			if h == n || time.Since(t0) > 2*time.Hour {
				break
			}
			time.Sleep(time.Millisecond) // let the bubble's clock move if the runner waits on a timer
		}
		if handled != n {
			t.Fatalf("handled %d of %d", handled, n)
		}
		if waited := time.Since(t0); waited >= time.Hour {
			t.Fatalf("the backlog waited %v: a SweepInterval per page", waited)
		}
	})
}

// gatedDue is a store whose listing of due rows waits while its gate is
// shut: a test acts between a sweep's start and its listing.
type gatedDue struct {
	*memstore.Store
	mu   sync.Mutex
	gate chan struct{} // nil: open
}

func (s *gatedDue) shut() {
	s.mu.Lock()
	s.gate = make(chan struct{})
	s.mu.Unlock()
}

func (s *gatedDue) open() {
	s.mu.Lock()
	close(s.gate)
	s.gate = nil
	s.mu.Unlock()
}

func (s *gatedDue) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	s.mu.Lock()
	g := s.gate
	s.mu.Unlock()
	if g != nil {
		<-g
	}
	return s.Store.Due(ctx, q)
}

// An update accepted after room freed cannot overtake an earlier update of
// its chat that MaxQueued left in the store: until a sweep has scheduled
// the earlier one, the later one is left to the sweep too.
func TestUpdatesBeyondMaxQueuedKeepTheirChatsOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &gatedDue{Store: memstore.New()}
		release := map[int64]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
		h := &handledOrder{hold: release}
		r := newRunner(t, intake.Config{
			Store:         store,
			MaxQueued:     2,
			SweepInterval: time.Hour,
			Handler:       h.handle,
		})
		start(t, r)
		synctest.Wait() // the start-up sweep has listed the empty store
		// 1 runs, 2 waits on the chat's line, 3 finds no room and stays in
		// the store.
		for id := int64(1); id <= 3; id++ {
			mustAccept(t, r, msg(id, 1), intake.Accepted)
		}
		synctest.Wait()
		// 1 ends: room frees, and the catch-up sweep starts but lists
		// nothing yet.
		store.shut()
		close(release[1])
		synctest.Wait()
		// 4 arrives with room to spare, before the sweep has listed 3.
		mustAccept(t, r, msg(4, 1), intake.Accepted)
		store.open()
		close(release[2])
		synctest.Wait()
		idle(t, r)
		if handled := h.got(); !slices.Equal(handled, []int64{1, 2, 3, 4}) {
			t.Fatalf("handled %v, want the chat's order 1 2 3 4", handled)
		}
		for id := int64(1); id <= 4; id++ {
			if got := row(t, store, id); got.State != intake.StateCompleted {
				t.Errorf("update %d is %s, want completed", id, got.State)
			}
		}
	})
}

// Once the sweep has scheduled what was left behind, accepted updates are
// scheduled at once again: a chat that fell behind does not stay on the
// sweep's pace.
func TestAChatCaughtUpIsScheduledAtOnceAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		release := make(chan struct{})
		h := &handledOrder{hold: map[int64]chan struct{}{1: release}}
		r := newRunner(t, intake.Config{
			Store:         store,
			MaxQueued:     2,
			SweepInterval: time.Hour,
			PendingGrace:  time.Hour, // a sweep with the grace would list nothing recent
			Handler:       h.handle,
		})
		start(t, r)
		synctest.Wait()
		for id := int64(1); id <= 3; id++ { // 3 is left behind
			mustAccept(t, r, msg(id, 1), intake.Accepted)
		}
		synctest.Wait()
		close(release)
		synctest.Wait()
		idle(t, r)
		t0 := time.Now()
		mustAccept(t, r, msg(4, 1), intake.Accepted)
		synctest.Wait()
		idle(t, r)
		if handled := h.got(); !slices.Equal(handled, []int64{1, 2, 3, 4}) {
			t.Fatalf("handled %v, want 1 2 3 4", handled)
		}
		if waited := time.Since(t0); waited != 0 {
			t.Fatalf("update 4 waited %v for a sweep after its chat caught up", waited)
		}
	})
}

// Under real concurrency, with a queue far smaller than the traffic, every
// chat's updates still run in the order they were accepted: each chat's
// sender waits for an accept before sending the next, while the runner
// keeps overflowing MaxQueued and catching up.
func TestChatOrderHoldsWhileTheQueueOverflows(t *testing.T) {
	t.Parallel()
	const chats, perChat = 8, 150
	var mu sync.Mutex
	last := map[int64]int64{} // chat → the update last handled
	handled := 0
	allHandled := make(chan struct{})
	var inversions []string
	r := newRunner(t, intake.Config{
		Store:         memstore.New(),
		MaxQueued:     4,
		MaxConcurrent: 4,
		SweepInterval: 50 * time.Millisecond,
		Handler: func(_ context.Context, u intake.Update) error {
			mu.Lock()
			if prev := last[u.ChatID]; u.ID < prev {
				inversions = append(inversions, fmt.Sprintf("chat %d: %d after %d", u.ChatID, u.ID, prev))
			}
			last[u.ChatID] = u.ID
			if handled++; handled == chats*perChat {
				close(allHandled)
			}
			mu.Unlock()
			time.Sleep(time.Duration(u.ID%3) * 100 * time.Microsecond)
			return nil
		},
	})
	start(t, r)
	var wg sync.WaitGroup
	for c := range int64(chats) {
		wg.Go(func() {
			for i := range int64(perChat) {
				id := 1 + c + i*chats // increasing within the chat
				if got, err := r.Accept(t.Context(), msg(id, c+1)); err != nil || got != intake.Accepted {
					t.Errorf("Accept(%d) = %v, %v", id, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-allHandled:
	case <-time.After(time.Minute):
		mu.Lock()
		n := handled
		mu.Unlock()
		t.Fatalf("handled %d of %d within a minute", n, chats*perChat)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(inversions) > 0 {
		t.Fatalf("%d inversions, first %v", len(inversions), inversions[:min(5, len(inversions))])
	}
}

// handledOrder is a handler that records the update ids it is called with,
// in order, and holds an update whose id has a channel in hold until that
// channel closes.
type handledOrder struct {
	mu   sync.Mutex
	ids  []int64
	hold map[int64]chan struct{}
}

func (h *handledOrder) handle(_ context.Context, u intake.Update) error {
	h.mu.Lock()
	h.ids = append(h.ids, u.ID)
	ch := h.hold[u.ID]
	h.mu.Unlock()
	if ch != nil {
		<-ch
	}
	return nil
}

// got returns the ids handled so far.
func (h *handledOrder) got() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ids)
}
