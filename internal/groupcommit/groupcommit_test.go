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

// A deferred request does not start a batch while one runs or one ended
// a moment ago: it rides in the next batch another request starts.
func TestDeferRidesOnTheNextBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{})}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Second}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.Do(t.Context(), 1) }) // leads, blocks in its commit
		synctest.Wait()
		var deferred int
		wg.Go(func() { deferred, _ = g.Defer(t.Context(), 2, time.Hour) })
		synctest.Wait()
		if n := g.Waiting(); n != 1 {
			t.Fatalf("Waiting() = %d with one deferred request, want 1", n)
		}
		close(rec.gate)
		synctest.Wait()
		if s := rec.sizes(); !slices.Equal(s, []int{1}) || g.Busy() {
			t.Fatalf("batch sizes %v (busy %v) once the first batch ended, want [1] and idle: the deferred request waits", s, g.Busy())
		}
		if v, err := g.Do(t.Context(), 3); v != 6 || err != nil {
			t.Fatalf("Do(3) = %d, %v", v, err)
		}
		wg.Wait()
		if s := rec.sizes(); !slices.Equal(s, []int{1, 2}) || deferred != 4 {
			t.Fatalf("batch sizes %v, deferred answer %d; want [1 2] and 4: the deferred request rode in the next batch", s, deferred)
		}
	})
}

// With no other request coming, a deferred request starts a batch itself
// after d; on a group idle for longer than d it commits at once; one
// cancelled while deferred is never committed.
func TestDeferStartsItsOwnBatchWhenNoneComes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Second}
		if v, err := g.Defer(t.Context(), 1, 10*time.Millisecond); v != 2 || err != nil {
			t.Fatalf("Defer on an idle group = %d, %v", v, err)
		}
		start := time.Now()
		if v, err := g.Defer(t.Context(), 2, 10*time.Millisecond); v != 4 || err != nil {
			t.Fatalf("Defer right after a batch = %d, %v", v, err)
		}
		if waited := time.Since(start); waited != 10*time.Millisecond {
			t.Fatalf("Defer right after a batch committed after %v, want the 10ms bound", waited)
		}
		time.Sleep(20 * time.Millisecond)
		ctx, cancel := context.WithCancel(t.Context())
		var err error
		var wg sync.WaitGroup
		_, _ = g.Do(t.Context(), 3) // the group was busy just now
		wg.Go(func() { _, err = g.Defer(ctx, 4, 10*time.Millisecond) })
		synctest.Wait()
		cancel()
		wg.Wait()
		time.Sleep(20 * time.Millisecond)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Defer cancelled while deferred = %v", err)
		}
		if s := rec.sizes(); !slices.Equal(s, []int{1, 1, 1}) || g.Waiting() != 0 {
			t.Fatalf("batch sizes %v, waiting %d; want [1 1 1] and none: the cancelled request never committed", s, g.Waiting())
		}
	})
}

// A deferred request whose wait ran out while a batch ran leads the next
// batch as soon as that one ends, when nobody else is queued.
func TestDeferDueDuringABatchGoesNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{})}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Minute}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.Do(t.Context(), 1) })
		synctest.Wait()
		wg.Go(func() { _, _ = g.Defer(t.Context(), 2, 10*time.Millisecond) })
		time.Sleep(20 * time.Millisecond) // its wait runs out during the first batch
		start := time.Now()
		close(rec.gate)
		wg.Wait()
		if s := rec.sizes(); !slices.Equal(s, []int{1, 1}) || time.Since(start) != 0 {
			t.Fatalf("batch sizes %v after %v; want [1 1] at once: the due request goes next", s, time.Since(start))
		}
	})
}

func TestCancelledDuringItsCommitWaitsForTheOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{gate: make(chan struct{})}
		g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Minute}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = g.Do(t.Context(), 1) })
		synctest.Wait() // 1 leads and blocks in its commit
		ctx, cancel := context.WithCancel(t.Context())
		var (
			got int
			err error
		)
		wg.Go(func() { _, _ = g.Do(t.Context(), 2) })
		synctest.Wait()
		wg.Go(func() { got, err = g.Do(ctx, 3) })
		synctest.Wait() // 2 and 3 queue behind 1's commit
		rec.gate <- struct{}{}
		synctest.Wait() // 1's commit ends; the batch of 2 and 3 begins and blocks
		if s := rec.sizes(); !slices.Equal(s, []int{1, 2}) {
			t.Fatalf("batches %v, want the second batch begun", s)
		}
		cancel()
		synctest.Wait()
		close(rec.gate)
		wg.Wait()
		if err != nil || got != 6 {
			t.Fatalf("Do cancelled while its batch committed = %d, %v; want its committed answer 6", got, err)
		}
	})
}

// leaderInItsCommit returns a group whose queued requests wait at most
// 10 s, with request 1 leading a commit that blocks until rec.gate lets
// it end; wg waits for every caller started on it.
func leaderInItsCommit(t *testing.T) (*recorder, *Group[int, int], *sync.WaitGroup) {
	rec := &recorder{gate: make(chan struct{})}
	g := &Group[int, int]{CommitFunc: rec.commit, Max: 8, Bound: time.Hour, Wait: 10 * time.Second}
	wg := &sync.WaitGroup{}
	wg.Go(func() { _, _ = g.Do(t.Context(), 1) })
	synctest.Wait()
	return rec, g, wg
}

// A queued request waits at most Wait, each from when it queued, under
// one timer: the queue's earliest waits end first, a later one at its own
// time, and none of them is committed.
func TestWaitBoundsEachQueuedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, g, wg := leaderInItsCommit(t)
		start := time.Now()
		ended := make([]time.Duration, 4)
		errs := make([]error, 4)
		do := func(i int) {
			wg.Go(func() {
				_, errs[i] = g.Do(t.Context(), 10+i)
				ended[i] = time.Since(start)
			})
		}
		do(0)
		do(1)
		synctest.Wait()
		time.Sleep(4 * time.Second)
		do(2)
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := g.Waiting(); n != 0 {
			t.Fatalf("Waiting() = %d once every wait ended, want 0", n)
		}
		close(rec.gate)
		wg.Wait()
		for i, want := range []time.Duration{10 * time.Second, 10 * time.Second, 14 * time.Second} {
			if !errors.Is(errs[i], context.DeadlineExceeded) || ended[i] != want {
				t.Errorf("request %d: Do = %v after %v, want a deadline error after %v", i, errs[i], ended[i], want)
			}
		}
		if s := rec.sizes(); !slices.Equal(s, []int{1}) {
			t.Fatalf("batches %v: a request whose wait ended was committed", s)
		}
	})
}

// A request taken into a batch, or made the next leader, before its wait
// ends is not failed by the bound: it gets its commit's answer.
func TestWaitSparesRequestsWhoseBatchBegan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, g, wg := leaderInItsCommit(t)
		got := make([]int, 2)
		errs := make([]error, 2)
		for i := range 2 {
			wg.Go(func() { got[i], errs[i] = g.Do(t.Context(), 2+i) })
		}
		synctest.Wait()
		time.Sleep(5 * time.Second)
		rec.gate <- struct{}{} // 1's commit ends; 2 leads the batch of 2 and 3
		synctest.Wait()
		time.Sleep(time.Minute) // long past both waits, their batch still committing
		close(rec.gate)
		wg.Wait()
		for i := range 2 {
			if errs[i] != nil || got[i] != 2*(2+i) {
				t.Errorf("request %d = %d, %v; want its committed answer", 2+i, got[i], errs[i])
			}
		}
		if s := rec.sizes(); !slices.Equal(s, []int{1, 2}) {
			t.Fatalf("batches %v, want [1 2]", s)
		}
	})
}

// The queue's timer is armed again after a lapse that found no wait
// ended, for the wait of a request queued since.
func TestWaitTimerOutlivesACommittedQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec, g, wg := leaderInItsCommit(t)
		wg.Go(func() { _, _ = g.Do(t.Context(), 2) }) // arms the timer for 10 s
		synctest.Wait()
		rec.gate <- struct{}{} // 2 leads the next batch and blocks in it
		synctest.Wait()
		time.Sleep(6 * time.Second)
		var err error
		var took time.Duration
		wg.Go(func() { // queued 6 s in: its wait ends at 16 s, after the lapse at 10 s
			t0 := time.Now()
			_, err = g.Do(t.Context(), 3)
			took = time.Since(t0)
		})
		synctest.Wait()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		close(rec.gate)
		wg.Wait()
		if !errors.Is(err, context.DeadlineExceeded) || took != 10*time.Second {
			t.Fatalf("Do = %v after %v, want a deadline error after 10s", err, took)
		}
	})
}
