package dashboard

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// gatedStore is a real store whose Stats can be held, made to fail, and
// made to advance the test's clock (the time a count takes).
type gatedStore struct {
	*memstore.Store
	calls atomic.Int32
	// started gets a value as each Stats starts, when set.
	started chan struct{}
	// gate, when set, holds each Stats until it gets a value.
	gate chan struct{}
	fail error
	took time.Duration
	clk  *fakeClock
}

func (s *gatedStore) Stats(ctx context.Context) (intake.Stats, error) {
	s.calls.Add(1)
	if s.started != nil {
		s.started <- struct{}{}
	}
	if s.gate != nil {
		<-s.gate
	}
	s.clk.advance(s.took)
	if s.fail != nil {
		return intake.Stats{}, s.fail
	}
	return s.Store.Stats(ctx)
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newGated(t *testing.T) (*gatedStore, *statsCache) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)}
	st := &gatedStore{Store: memstore.New(), clk: clk}
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1}`), ReceivedAt: clk.now()}); err != nil {
		t.Fatal(err)
	}
	return st, &statsCache{now: clk.now}
}

func TestStatsReusedForTenTimesTheirCost(t *testing.T) {
	st, c := newGated(t)
	st.took = 3 * time.Second // a big table
	got, taken, err := c.get(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if got.Count[intake.StatePending] != 1 {
		t.Fatalf("counts %v, want the store's 1 pending", got.Count)
	}
	start := taken
	st.clk.advance(statsPace*st.took - st.took - time.Millisecond) // just under 10 × 3 s after the count started
	if _, taken, _ = c.get(t.Context(), st); st.calls.Load() != 1 || !taken.Equal(start) {
		t.Fatalf("%d counts, taken %v: want the first count reused", st.calls.Load(), taken)
	}
	st.clk.advance(time.Millisecond)
	if _, taken, _ = c.get(t.Context(), st); st.calls.Load() != 2 || !taken.After(start) {
		t.Fatalf("%d counts, taken %v: want a new count once 30 s have passed", st.calls.Load(), taken)
	}
}

func TestStatsPaceBounds(t *testing.T) {
	st, c := newGated(t)
	c.get(t.Context(), st) // took 0: kept minStatsAge
	st.clk.advance(minStatsAge - time.Millisecond)
	c.get(t.Context(), st)
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("%d counts within minStatsAge, want 1", n)
	}
	st.clk.advance(time.Millisecond)
	c.get(t.Context(), st)
	if n := st.calls.Load(); n != 2 {
		t.Fatalf("%d counts at minStatsAge, want 2", n)
	}

	st.took = time.Minute // 10 × that is past maxStatsAge
	st.clk.advance(minStatsAge)
	c.get(t.Context(), st)
	st.clk.advance(maxStatsAge - st.took)
	c.get(t.Context(), st)
	if n := st.calls.Load(); n != 4 {
		t.Fatalf("%d counts, want 4: a count is never reused past maxStatsAge", n)
	}
}

func TestStatsOneCountAtATime(t *testing.T) {
	st, c := newGated(t)
	st.started, st.gate = make(chan struct{}, 1), make(chan struct{})
	const pages = 5
	joined := make(chan struct{}, pages)
	c.onJoin = func() { joined <- struct{}{} }
	var wg sync.WaitGroup
	errs := make(chan error, pages)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _, err := c.get(t.Context(), st)
		errs <- err
	}()
	<-st.started // the first page's count runs
	for range pages - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := c.get(t.Context(), st)
			errs <- err
		}()
	}
	// The others join it rather than count.
	for range pages - 1 {
		<-joined
	}
	close(st.gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := st.calls.Load(); n != 1 {
		t.Fatalf("%d counts for %d pages asking at once, want 1", n, pages)
	}
}

func TestStatsFailedCountNotKept(t *testing.T) {
	st, c := newGated(t)
	st.fail = errors.New("store down")
	if _, _, err := c.get(t.Context(), st); err == nil {
		t.Fatal("a failed count answered no error")
	}
	st.fail = nil
	if _, _, err := c.get(t.Context(), st); err != nil || st.calls.Load() != 2 {
		t.Fatalf("err %v after %d counts: want the failure not kept, and a new count", err, st.calls.Load())
	}
}

func TestStatsForgottenAfterAWrite(t *testing.T) {
	st, c := newGated(t)
	c.get(t.Context(), st)
	// The dashboard requeues or acknowledges: the next page counts anew.
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 2, Body: []byte(`{"update_id":2}`), ReceivedAt: st.clk.now()}); err != nil {
		t.Fatal(err)
	}
	c.forget()
	got, _, err := c.get(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	if got.Count[intake.StatePending] != 2 || st.calls.Load() != 2 {
		t.Fatalf("after forget: %v in %d counts, want 2 pending from a second count", got.Count, st.calls.Load())
	}
}

func TestStatsCountRunningAcrossForgetIsNotJoinedNorKept(t *testing.T) {
	st, c := newGated(t)
	st.started, st.gate = make(chan struct{}, 2), make(chan struct{}, 2)
	first := make(chan error, 1)
	go func() {
		_, _, err := c.get(t.Context(), st)
		first <- err
	}()
	<-st.started
	c.forget() // a write lands while the count runs
	st.gate <- struct{}{}
	st.gate <- struct{}{}
	if _, _, err := c.get(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := st.calls.Load(); n != 2 {
		t.Fatalf("%d counts, want 2: a page after the write must not take the count begun before it", n)
	}
	// The older count ended last or first; either way only the newer one
	// may be cached.
	c.get(t.Context(), st)
	if n := st.calls.Load(); n != 2 {
		t.Fatalf("%d counts, want the newer count reused", n)
	}
}

func TestStatsWaiterLeavesOnItsContext(t *testing.T) {
	st, c := newGated(t)
	st.started, st.gate = make(chan struct{}, 1), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := c.get(t.Context(), st)
		done <- err
	}()
	<-st.started
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := c.get(ctx, st); !errors.Is(err, context.Canceled) {
		t.Fatalf("a waiter whose page went away got %v, want context.Canceled", err)
	}
	close(st.gate)
	if err := <-done; err != nil {
		t.Fatalf("the count itself: %v", err)
	}
}
