package pacedstats

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/leakcheck"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// gated is a real store whose counts can be held, made to fail, and made
// to take time on the test's clock.
type gated struct {
	*memstore.Store
	clk     *testkit.Clock
	calls   atomic.Int32
	started chan struct{} // gets a value as each count begins, when set

	mu   sync.Mutex
	gate chan struct{} // when set, each count waits for a value
	fail error
	took time.Duration
}

func (g *gated) Stats(ctx context.Context) (intake.Stats, error) {
	g.calls.Add(1)
	if g.started != nil {
		g.started <- struct{}{}
	}
	g.mu.Lock()
	gate, fail, took := g.gate, g.fail, g.took
	g.mu.Unlock()
	if gate != nil {
		<-gate
	}
	g.clk.Advance(took)
	st, err := g.Store.Stats(ctx)
	if fail != nil {
		st, err = intake.Stats{}, fail
	}
	return st, err
}

func (g *gated) set(gate chan struct{}, fail error, took time.Duration) {
	g.mu.Lock()
	g.gate, g.fail, g.took = gate, fail, took
	g.mu.Unlock()
}

func setup(t *testing.T) (*gated, *Cache) {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC))
	g := &gated{Store: memstore.New(), clk: clk}
	add(t, g, 1)
	return g, &Cache{Stats: g.Stats, Now: clk.Now}
}

func add(t *testing.T, g *gated, id int64) {
	t.Helper()
	if _, err := g.Add(t.Context(), intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: g.clk.Now()}); err != nil {
		t.Fatal(err)
	}
}

// settle waits until the count running, if any, has ended and is kept.
func settle(c *Cache) {
	c.mu.Lock()
	k := c.running
	c.mu.Unlock()
	if k != nil {
		<-k.done
	}
}

func pending(st intake.Stats) int { return st.Count[intake.StatePending] }

func TestFirstCountIsWaitedFor(t *testing.T) {
	g, c := setup(t)
	st, taken, err := c.Get(t.Context())
	if err != nil || pending(st) != 1 || !taken.Equal(g.clk.Now()) {
		t.Fatalf("Get = %v pending, taken %v, %v; want the store's 1, taken now", pending(st), taken, err)
	}
	settle(c)
}

// A count is reused for Pace times what it took; then the next Get gets it
// once more, at once, while a new count runs, and the Get after that the
// new one.
func TestReusedThenRecountedInTheBackground(t *testing.T) {
	g, c := setup(t)
	g.set(nil, nil, 3*time.Second) // a big table
	_, first, _ := c.Get(t.Context())
	settle(c)
	add(t, g, 2)
	g.clk.Advance(Pace*3*time.Second - 3*time.Second - time.Millisecond) // just under 30 s after it began
	if st, taken, _ := c.Get(t.Context()); pending(st) != 1 || !taken.Equal(first) || g.calls.Load() != 1 {
		t.Fatalf("%d counts, %d pending taken %v: want the first count reused", g.calls.Load(), pending(st), taken)
	}

	gate := make(chan struct{})
	g.set(gate, nil, 3*time.Second)
	g.clk.Advance(time.Millisecond)
	st, taken, err := c.Get(t.Context()) // the recount is held at the gate: Get must not wait for it
	if err != nil || pending(st) != 1 || !taken.Equal(first) {
		t.Fatalf("stale Get = %d pending, taken %v, %v; want the last count at once", pending(st), taken, err)
	}
	close(gate)
	settle(c)
	st, taken, _ = c.Get(t.Context())
	if pending(st) != 2 || !taken.After(first) || g.calls.Load() != 2 {
		t.Fatalf("%d counts, %d pending taken %v: want the recount's 2", g.calls.Load(), pending(st), taken)
	}
}

func TestAgeBounds(t *testing.T) {
	g, c := setup(t)
	c.Get(t.Context()) // took 0: reused for MinAge
	settle(c)
	g.clk.Advance(MinAge - time.Millisecond)
	c.Get(t.Context())
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("%d counts within MinAge, want 1", n)
	}
	g.clk.Advance(time.Millisecond)
	c.Get(t.Context())
	settle(c)
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("%d counts at MinAge, want 2", n)
	}

	c.Forget()
	g.set(nil, nil, time.Minute) // Pace times that is past MaxAge
	c.Get(t.Context())
	settle(c)
	g.clk.Advance(MaxAge - time.Minute)
	c.Get(t.Context())
	settle(c)
	if n := g.calls.Load(); n != 4 {
		t.Fatalf("%d counts, want 4: a count is never reused past MaxAge", n)
	}
}

// Readers that ask while a count runs share it: no second count starts.
func TestOneCountAtATime(t *testing.T) {
	g, c := setup(t)
	gate := make(chan struct{})
	g.set(gate, nil, 0)
	g.started = make(chan struct{}, 8)
	done := make(chan error)
	go func() {
		_, _, err := c.Get(t.Context())
		done <- err
	}()
	<-g.started
	c.mu.Lock()
	running := c.running
	c.mu.Unlock()
	left, cancel := context.WithCancel(t.Context())
	cancel()
	for range 5 {
		if _, _, err := c.Get(left); !errors.Is(err, context.Canceled) {
			t.Fatalf("a reader that left while the count ran got %v", err)
		}
	}
	c.mu.Lock()
	same := c.running == running
	c.mu.Unlock()
	if !same {
		t.Fatal("readers asking while a count ran started another")
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	settle(c)
	if n := g.calls.Load(); n != 1 {
		t.Fatalf("%d counts, want 1", n)
	}
}

// A failed count is handed out, so a store that stops answering shows, and
// never reused: the next Get counts again.
func TestFailureShownNotKept(t *testing.T) {
	g, c := setup(t)
	c.Get(t.Context())
	settle(c)
	down := errors.New("store down")
	g.set(nil, down, 0)
	g.clk.Advance(MinAge)
	c.Get(t.Context()) // the last good count, and a recount that fails
	settle(c)
	if _, _, err := c.Get(t.Context()); !errors.Is(err, down) {
		t.Fatalf("after a failed count, Get = %v, want its error", err)
	}
	settle(c) // that Get recounted too
	g.set(nil, nil, 0)
	c.Get(t.Context()) // the failure once more, and a recount that succeeds
	settle(c)
	if _, _, err := c.Get(t.Context()); err != nil {
		t.Fatalf("after the store came back: %v", err)
	}
}

// After Forget, Get waits for a new count, and a count that began before
// Forget is neither handed out nor kept.
func TestForget(t *testing.T) {
	g, c := setup(t)
	c.Get(t.Context())
	settle(c)
	gate := make(chan struct{}, 2)
	g.set(gate, nil, 0)
	g.started = make(chan struct{}, 2)
	g.clk.Advance(MinAge)
	c.Get(t.Context()) // a background recount, held
	<-g.started
	add(t, g, 2) // the operator's action
	c.Forget()
	gate <- struct{}{}
	gate <- struct{}{}
	st, _, err := c.Get(t.Context())
	if err != nil || pending(st) != 2 {
		t.Fatalf("Get after Forget = %d pending, %v; want a count taken after it (2)", pending(st), err)
	}
	settle(c)
	settle(c)
	if n := g.calls.Load(); n != 3 {
		t.Fatalf("%d counts, want 3", n)
	}
	if st, _, _ := c.Get(t.Context()); pending(st) != 2 || g.calls.Load() != 3 {
		t.Fatalf("%d pending after %d counts: want the count after Forget kept, not the one before", pending(st), g.calls.Load())
	}
}

// The first reader may leave; its count goes on and serves the next.
func TestCountOutlivesItsReader(t *testing.T) {
	g, c := setup(t)
	gate := make(chan struct{})
	g.set(gate, nil, 0)
	left, cancel := context.WithCancel(t.Context())
	cancel()
	if _, _, err := c.Get(left); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get = %v, want context.Canceled", err)
	}
	close(gate)
	settle(c)
	if st, _, err := c.Get(t.Context()); err != nil || pending(st) != 1 || g.calls.Load() != 1 {
		t.Fatalf("%d counts, Get = %d pending, %v: want the first count's result", g.calls.Load(), pending(st), err)
	}
}

// Timeout bounds a count.
func TestTimeout(t *testing.T) {
	var calls atomic.Int32
	c := &Cache{Timeout: time.Millisecond, Stats: func(ctx context.Context) (intake.Stats, error) {
		calls.Add(1)
		<-ctx.Done()
		return intake.Stats{}, ctx.Err()
	}}
	if _, _, err := c.Get(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get = %v, want the count's deadline", err)
	}
}

// A store that hangs holds one count, not one per reader: after Forget,
// readers wait for the running count to end before another starts.
func TestForgetKeepsOneCountAtATime(t *testing.T) {
	g, c := setup(t)
	c.Get(t.Context())
	settle(c)
	gate := make(chan struct{})
	g.set(gate, nil, 0)
	g.started = make(chan struct{}, 8)
	g.clk.Advance(MinAge)
	c.Get(t.Context()) // a background recount, which hangs
	<-g.started
	for range 5 {
		c.Forget() // as a failing health check does at every refresh
		left, cancel := context.WithTimeout(t.Context(), time.Millisecond)
		_, _, err := c.Get(left)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Get while the store hangs = %v, want the reader's deadline", err)
		}
	}
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("%d counts while one hung, want 2 (the first and the hung one)", n)
	}
	close(gate)
	if _, _, err := c.Get(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := g.calls.Load(); n != 3 {
		t.Fatalf("%d counts, want 3: one more once the hung count ended", n)
	}
}
