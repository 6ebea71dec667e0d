package groupcommit

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

// recorder is a CommitFunc that doubles each request, records batch sizes,
// and blocks each batch until released when gated.
type recorder struct {
	mu      sync.Mutex
	batches [][]int
	gate    chan struct{}
	err     error
}

func (r *recorder) commit(_ context.Context, batch []int) ([]int, error) {
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(batch))
	gate, err := r.gate, r.err
	r.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if err != nil {
		return nil, err
	}
	out := make([]int, len(batch))
	for i, v := range batch {
		out[i] = 2 * v
	}
	return out, nil
}

func (r *recorder) sizes() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []int
	for _, b := range r.batches {
		s = append(s, len(b))
	}
	return s
}

func TestLoneCallCommitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Second}
		t0 := time.Now()
		got, err := g.Do(t.Context(), 21)
		if err != nil || got != 42 {
			t.Fatalf("Do = %d, %v", got, err)
		}
		if d := time.Since(t0); d != 0 {
			t.Fatalf("a lone call waited %v", d)
		}
		if s := rec.sizes(); !slices.Equal(s, []int{1}) {
			t.Fatalf("batches %v", s)
		}
	})
}

func TestConcurrentCallsShareBatchesUpToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{})}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 3, Bound: time.Second}
		results := make([]int, 6)
		var wg sync.WaitGroup
		wg.Go(func() { results[0], _ = g.Do(t.Context(), 0) })
		synctest.Wait() // the first call leads and blocks in its commit
		for i := 1; i < 6; i++ {
			wg.Go(func() { results[i], _ = g.Do(t.Context(), i) })
		}
		synctest.Wait() // five callers queued behind it
		if n := g.Waiting(); n != 5 {
			t.Fatalf("Waiting() = %d with five callers queued, want 5", n)
		}
		if !g.Busy() {
			t.Fatal("Busy() = false while a batch commits")
		}
		close(rec.gate)
		wg.Wait()
		if g.Busy() {
			t.Fatal("Busy() = true after every call returned")
		}
		if s := rec.sizes(); !slices.Equal(s, []int{1, 3, 2}) {
			t.Fatalf("batch sizes %v, want [1 3 2]", s)
		}
		for i, v := range results {
			if v != 2*i {
				t.Fatalf("result %d = %d, want %d", i, v, 2*i)
			}
		}
	})
}

func TestCancelledWhileQueuedIsNeverCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{})}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Second}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.Do(t.Context(), 1) })
		synctest.Wait()
		ctx, cancel := context.WithCancel(t.Context())
		var err error
		wg.Go(func() { _, err = g.Do(ctx, 2) })
		synctest.Wait()
		cancel()
		synctest.Wait()
		if n := g.Waiting(); n != 0 {
			t.Fatalf("Waiting() = %d after the only queued caller left, want 0", n)
		}
		close(rec.gate)
		wg.Wait()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled Do = %v", err)
		}
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for _, b := range rec.batches {
			if slices.Contains(b, 2) {
				t.Fatalf("a request cancelled while queued was committed: %v", rec.batches)
			}
		}
	})
}

func TestErrorFailsTheWholeBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("boom")
		rec := &recorder{gate: make(chan struct{}), err: boom}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Second}
		errs := make([]error, 3)
		var wg sync.WaitGroup
		wg.Go(func() { _, errs[0] = g.Do(t.Context(), 0) })
		synctest.Wait()
		for i := 1; i < 3; i++ {
			wg.Go(func() { _, errs[i] = g.Do(t.Context(), i) })
		}
		synctest.Wait()
		close(rec.gate)
		wg.Wait()
		for i, err := range errs {
			if !errors.Is(err, boom) {
				t.Fatalf("call %d: %v, want boom", i, err)
			}
		}
	})
}

func TestWrongAnswerCountIsAnError(t *testing.T) {
	t.Parallel()
	g := &Group[int, int]{
		CommitFunc: func(context.Context, []int) ([]int, error) { return nil, nil },
		Max:        4, Bound: time.Second,
	}
	if _, err := g.Do(t.Context(), 1); err == nil {
		t.Fatal("a commit that answered nothing was taken as success")
	}
}
