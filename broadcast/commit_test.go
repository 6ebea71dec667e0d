package broadcast

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// appendEntry writes exactly what json.Marshal writes, on the hand-written
// path and on the fallback alike.
func TestAppendEntryMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, e := range []entry{
		{I: 0, S: markSending},
		{I: 12345, S: markReleased},
		{I: 7, O: string(OutcomeDelivered)},
		{I: 7, O: string(OutcomeUnreachable), R: "blocked-by-user"},
		{I: 7, O: string(OutcomeDelivered), M: -1001234567890},
		{I: 7, O: string(OutcomeFailed), R: `quote " back \ slash`, M: 5},
		{I: 7, O: string(OutcomeFailed), R: "<html>&amp;"},
		{I: 7, O: string(OutcomeFailed), R: "tab\there, ünïcode, \x00, \xff"},
	} {
		checkAppendEntry(t, e)
	}
}

func checkAppendEntry(t *testing.T, e entry) {
	t.Helper()
	want, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	want = []byte(sealed(string(want)))
	got := appendEntry([]byte("prefix"), e)
	if !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Fatalf("appendEntry(%+v) = %q, want %q", e, got[len("prefix"):], want)
	}
}

// FuzzAppendEntry: the hand-written encoder agrees with json.Marshal for
// any entry.
func FuzzAppendEntry(f *testing.F) {
	f.Add(3, "sending", "", "", int64(0))
	f.Add(1<<20, "", "failed", "a \"quoted\" <reason>", int64(-100))
	f.Add(0, "", "uncertain", "\u2028\xff", int64(9))
	f.Fuzz(func(t *testing.T, i int, s, o, r string, m int64) {
		checkAppendEntry(t, entry{I: i, S: s, O: o, R: r, M: m})
	})
}

func newTestJournal(t *testing.T) (*journal, string, *fileLock) {
	t.Helper()
	dir := t.TempDir()
	lock, err := acquireLock(filepath.Join(dir, lockFile))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lock.release)
	path := filepath.Join(dir, journalFile)
	j, err := openJournal(path, 0, lock.check)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.close() })
	return j, path, lock
}

// Concurrent appends (group commit): every line is whole, once, and
// durable when its append returns.
func TestJournalConcurrentAppends(t *testing.T) {
	t.Parallel()
	j, path, _ := newTestJournal(t)
	const n = 400
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if err := j.append(entry{I: i, S: markSending}); err != nil {
				t.Error(err)
				return
			}
			// Durable means written: the line is in the file now.
			b, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
				return
			}
			if !bytes.Contains(b, appendEntry(nil, entry{I: i, S: markSending})) {
				t.Errorf("line %d not in the file when append returned", i)
			}
			if err := j.append(entry{I: i, O: string(OutcomeDelivered)}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := replay(bytes.NewReader(b), n)
	if err != nil {
		t.Fatal(err)
	}
	if res.damage() != nil || strings.Count(string(b), "\n") != 2*n {
		t.Fatalf("%d lines, damage %+v, want %d whole lines", strings.Count(string(b), "\n"), res.damage(), 2*n)
	}
	for i, s := range res.states {
		if s != stateDelivered {
			t.Fatalf("recipient %d: state %d", i, s)
		}
	}
}

// A journal whose lock was lost writes nothing more, and every later
// append fails too.
func TestJournalLockLostWritesNothing(t *testing.T) {
	t.Parallel()
	j, path, lock := newTestJournal(t)
	if err := j.append(entry{I: 0, S: markSending}); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(lock.path); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := j.append(entry{I: 0, O: string(OutcomeDelivered)}); !errors.Is(err, ErrLockLost) {
			t.Fatalf("append after the loss: %v, want ErrLockLost", err)
		}
	}
	if err := os.WriteFile(lock.path, nil, 0o600); err != nil { // a new, different lock file
		t.Fatal(err)
	}
	if err := j.append(entry{I: 0, O: string(OutcomeDelivered)}); !errors.Is(err, ErrLockLost) {
		t.Fatalf("append after the loss: %v, want ErrLockLost", err)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("journal changed after the loss:\n%s", after)
	}
}

// A recipient still waiting for its token when the run stops has no intent
// line (and so no released line): it is plainly pending, and a crash there
// could not have made it uncertain.
func TestStopWhileWaitingForTokenWritesNoIntent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		cfg := h.config(1, 2, 3, 4)
		cfg.Rate = 1 // one token a second
		cfg.Concurrency = 4
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(1500*time.Millisecond, cancel) // tokens at 0 s and 1 s only
		rep, err := Run(ctx, cfg)
		must(t, err)
		wantCounts(t, rep, StateStopped, 2, 0, 0, 0, 2)
		j := h.journal()
		if n := strings.Count(j, `"s":"sending"`); n != 2 {
			t.Fatalf("%d intents, want 2:\n%s", n, j)
		}
		if strings.Contains(j, "released") {
			t.Fatalf("released lines for recipients never sent:\n%s", j)
		}
	})
}

func TestWindowFor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rate    float64
		latency time.Duration
		want    int
	}{
		{30, 100 * time.Millisecond, DefaultConcurrency}, // 6 → at least the default
		{100, 100 * time.Millisecond, 20},
		{1000, 100 * time.Millisecond, 200},
		{1000, 103600 * time.Microsecond, 208}, // rounded up
		{1000, 200 * time.Millisecond, MaxConcurrency},
		{MaxRate, time.Hour, MaxConcurrency},
		{0, time.Second, DefaultConcurrency},
		{-1, time.Second, DefaultConcurrency},
		{1000, 0, DefaultConcurrency},
	} {
		if got := WindowFor(tt.rate, tt.latency); got != tt.want {
			t.Errorf("WindowFor(%v, %v) = %d, want %d", tt.rate, tt.latency, got, tt.want)
		}
	}
}

func TestBurst(t *testing.T) {
	t.Parallel()
	for rate, want := range map[float64]int{MinRate: 1, 30: 1, 50: 1, 100: 2, 1000: 20, MaxRate: 200} {
		c := Config{Rate: rate}
		if got := c.burst(); got != want {
			t.Errorf("burst at %v/s = %d, want %d", rate, got, want)
		}
	}
}

// At 1000/s the bucket lets a sender held back catch up: sends that could
// not start for 100 ms (every place in the window busy) start the burst at
// once when places free up, and no more than that.
func TestBurstCatchesUpAfterStall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		aud := make([]int64, 60)
		for i := range aud {
			aud[i] = int64(i + 1)
		}
		h.result = func(_ context.Context, r Recipient, _ int) error {
			if r.ID <= 10 {
				time.Sleep(100 * time.Millisecond) // the first ten hold the window
			}
			return nil
		}
		cfg := h.config(aud...)
		cfg.Rate = 1000
		cfg.Concurrency = 10
		run(t, cfg)
		// Sends 1–10 start at once (the bucket starts full) and hold
		// every place until 100 ms, by which time the bucket is full
		// again: exactly a burst of sends starts at once, then 1 ms apart.
		h.mu.Lock()
		defer h.mu.Unlock()
		at := map[time.Duration]int{}
		for _, s := range h.starts[10:] {
			at[s]++
		}
		first := h.starts[10]
		if first != 100*time.Millisecond {
			t.Fatalf("send 11 started at %v, want 100ms", first)
		}
		if n := at[first]; n != cfg.burst() {
			t.Fatalf("%d sends started together at %v after the stall, want the burst %d (starts %v)", n, first, cfg.burst(), h.starts)
		}
	})
}
