package broadcast

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

// harness records sends and lets a test decide each send's result.
type harness struct {
	t   *testing.T
	dir string

	mu       sync.Mutex
	sends    []Recipient       // every SendFunc call, in order
	starts   []time.Duration   // since h.t0, per send
	counts   map[Recipient]int // sends per recipient, across runs
	inFlight int
	maxIn    int
	t0       time.Time

	// result decides the outcome of the nth (1-based, across runs) send to
	// r; nil means success.
	result  func(ctx context.Context, r Recipient, n int) error
	latency time.Duration
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	return &harness{t: t, dir: t.TempDir(), counts: map[Recipient]int{}, t0: time.Now()}
}

func ids(xs ...int64) []Recipient {
	rs := make([]Recipient, len(xs))
	for i, x := range xs {
		rs[i] = ChatID(x)
	}
	return rs
}

func (h *harness) send(ctx context.Context, r Recipient) error {
	h.mu.Lock()
	h.sends = append(h.sends, r)
	h.starts = append(h.starts, time.Since(h.t0))
	h.counts[r]++
	n := h.counts[r]
	h.inFlight++
	h.maxIn = max(h.maxIn, h.inFlight)
	result := h.result
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	if h.latency > 0 {
		time.Sleep(h.latency)
	}
	if result != nil {
		return result(ctx, r, n)
	}
	return nil
}

func (h *harness) sent() []Recipient {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sends)
}

// config is a sequential broadcast "b" of audience, paced at 1000/s.
func (h *harness) config(audience ...int64) Config {
	return Config{
		Name:         "b",
		Dir:          h.dir,
		AudienceFunc: func(context.Context) ([]Recipient, error) { return ids(audience...), nil },
		SendFunc:     h.send,
		Rate:         1000,
		Concurrency:  1,
	}
}

// journal returns the journal's entries, one JSON per line, after checking
// that every line is whole and carries its checksum.
func (h *harness) journal() string {
	h.t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dir, "b", journalFile))
	if err != nil {
		h.t.Fatal(err)
	}
	return unsealed(h.t, string(b))
}

// unsealed strips the checksums of a journal, failing t on a line that is
// torn or whose checksum is wrong.
func unsealed(t *testing.T, journal string) string {
	t.Helper()
	var out strings.Builder
	for line := range strings.Lines(journal) {
		js := line[:max(0, len(line)-1-1-checksumLen)]
		if !strings.HasSuffix(line, "\n") || sealed(js) != line {
			t.Fatalf("journal line %q is not sealed", line)
		}
		out.WriteString(js + "\n")
	}
	return out.String()
}

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return rep
}

func wantCounts(t *testing.T, rep *Report, state State, delivered, unreachable, failed, uncertain, pending int) {
	t.Helper()
	got := [6]any{rep.State, rep.Delivered, rep.Unreachable, rep.Failed, rep.Uncertain, rep.Pending}
	want := [6]any{state, delivered, unreachable, failed, uncertain, pending}
	if got != want {
		t.Fatalf("report {state delivered unreachable failed uncertain pending} = %v, want %v (halt %+v)", got, want, rep.Halt)
	}
	if s := rep.Delivered + rep.Unreachable + rep.Failed + rep.Uncertain + rep.Pending; s != rep.Total {
		t.Fatalf("buckets sum to %d, total %d", s, rep.Total)
	}
}

func apiErr(code int, desc string) error {
	return &botapi.APIError{Method: "sendMessage", Code: code, Description: desc}
}

// Reference 5.3 case 1: stop after two sends, resume with a grown audience.
func TestResumeKeepsSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	cfg := h.config(1, 2, 3, 2, 4)
	h.result = func(_ context.Context, r Recipient, _ int) error {
		if r.ID == 2 {
			cancel()
		}
		return nil
	}
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Total != 4 {
		t.Fatalf("total %d, want 4 after dedupe", rep.Total)
	}
	wantCounts(t, rep, StateStopped, 2, 0, 0, 0, 2)

	h.result = nil
	cfg = h.config(1, 2, 3, 2, 4, 5, 6) // grown audience is ignored
	rep = run(t, cfg)
	wantCounts(t, rep, StateFinished, 4, 0, 0, 0, 0)
	if got := h.sent(); !reflect.DeepEqual(got, ids(1, 2, 3, 4)) {
		t.Fatalf("sent %v", got)
	}
	// A finished broadcast re-run sends nothing.
	rep = run(t, cfg)
	wantCounts(t, rep, StateFinished, 4, 0, 0, 0, 0)
	if n := len(h.sent()); n != 4 {
		t.Fatalf("re-run sent again: %d sends", n)
	}
}

// Reference 5.3 case 2: a pre-seeded journal with an intent and a torn line.
func TestReplayIntentBecomesUncertain(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	state := filepath.Join(h.dir, "b")
	must(t, os.MkdirAll(state, 0o700))
	must(t, os.WriteFile(filepath.Join(state, snapshotFile), []byte(`{"recipients":[1,2,3]}`), 0o600))
	intact := journalOf(`{"i":0,"o":"delivered"}`, `{"i":1,"s":"sending"}`)
	must(t, os.WriteFile(filepath.Join(state, journalFile), []byte(intact+`{"i":2,"o":"deliv`), 0o600))
	must(t, writeMark(filepath.Join(state, markFile), int64(len(intact)), false))
	rep := run(t, h.config())
	wantCounts(t, rep, StateFinished, 2, 0, 0, 1, 0)
	if got := h.sent(); !reflect.DeepEqual(got, ids(3)) {
		t.Fatalf("sent %v, want only 3", got)
	}
	// The torn tail was cut off, so every line appended since is whole.
	want := `{"i":0,"o":"delivered"}` + "\n" + `{"i":1,"s":"sending"}` + "\n" +
		`{"i":1,"o":"uncertain","r":"interrupted"}` + "\n" + `{"i":2,"s":"sending"}` + "\n" + `{"i":2,"o":"delivered"}` + "\n"
	if j := h.journal(); j != want {
		t.Fatalf("journal:\n%s\nwant:\n%s", j, want)
	}
}

// Reference 5.3 case 3: a 429 with retry_after 9 waits 9 s and resends.
func TestRetryAfterWaitsAndResends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.result = func(_ context.Context, r Recipient, n int) error {
			if r.ID == 2 && n == 1 {
				return &botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests: retry after 9", RetryAfter: 9 * time.Second}
			}
			return nil
		}
		rep := run(t, h.config(1, 2, 3, 4))
		wantCounts(t, rep, StateFinished, 4, 0, 0, 0, 0)
		if got := h.sent(); !reflect.DeepEqual(got, ids(1, 2, 2, 3, 4)) {
			t.Fatalf("sent %v", got)
		}
		if gap := h.starts[2] - h.starts[1]; gap < 9*time.Second {
			t.Fatalf("resent after %v, want ≥ 9s", gap)
		}
	})
}

// Reference 5.3 case 4: blocked is unreachable and never retried.
func TestUnreachableNeverRetried(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.result = func(_ context.Context, r Recipient, _ int) error {
		if r.ID == 3 {
			return apiErr(403, "Forbidden: bot was blocked by the user")
		}
		return nil
	}
	rep := run(t, h.config(1, 2, 3, 4))
	wantCounts(t, rep, StateFinished, 3, 1, 0, 0, 0)
	run(t, h.config(1, 2, 3, 4))
	if n := h.counts[ChatID(3)]; n != 1 {
		t.Fatalf("recipient 3 tried %d times", n)
	}
	if !strings.Contains(h.journal(), `"o":"unreachable","r":"blocked-by-user"`) {
		t.Fatalf("journal:\n%s", h.journal())
	}
}

// Reference 5.3 case 5: a refused message halts with the recipient pending.
func TestMessageInvalidHaltsPending(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.result = func(_ context.Context, r Recipient, _ int) error {
		if r.ID == 2 {
			return apiErr(400, "Bad Request: can't parse entities: unsupported start tag")
		}
		return nil
	}
	rep := run(t, h.config(1, 2, 3, 4))
	wantCounts(t, rep, StateHalted, 1, 0, 0, 0, 3)
	if want := StopBroadcast("message-invalid"); rep.Halt == nil || *rep.Halt != want {
		t.Fatalf("halt %+v, want %+v", rep.Halt, want)
	}
	if !strings.Contains(h.journal(), `{"i":1,"s":"released"}`) {
		t.Fatalf("journal lacks released:\n%s", h.journal())
	}
	h.result = nil // the message is fixed
	rep = run(t, h.config(1, 2, 3, 4))
	wantCounts(t, rep, StateFinished, 4, 0, 0, 0, 0)
}

// Reference 5.3 case 6 (current behaviour): an unknown outcome is uncertain
// after one attempt and halts; it is never resent.
func TestUnknownIsUncertainAndNeverResent(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.result = func(_ context.Context, r Recipient, _ int) error {
		if r.ID == 2 {
			return errors.New("read tcp: connection reset by peer")
		}
		return nil
	}
	cfg := h.config(1, 2, 3, 4)
	cfg.MaxAttempts = 3
	rep := run(t, cfg)
	wantCounts(t, rep, StateHalted, 1, 0, 0, 1, 2)
	if rep.Halt == nil || rep.Halt.Kind != KindAmbiguous {
		t.Fatalf("halt %+v", rep.Halt)
	}
	rep = run(t, cfg)
	wantCounts(t, rep, StateFinished, 3, 0, 0, 1, 0)
	if n := h.counts[ChatID(2)]; n != 1 {
		t.Fatalf("uncertain recipient sent %d times", n)
	}
}

// Reference 5.3 case 7: Telegram's 502 is retried, then failed.
func TestServerErrorRetriedThenFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.result = func(_ context.Context, r Recipient, _ int) error {
			if r.ID == 2 {
				return apiErr(502, "Bad Gateway")
			}
			return nil
		}
		cfg := h.config(1, 2, 3, 4)
		cfg.MaxAttempts = 2
		rep := run(t, cfg)
		wantCounts(t, rep, StateFinished, 3, 0, 1, 0, 0)
		if got := h.sent(); !reflect.DeepEqual(got, ids(1, 2, 2, 3, 4)) {
			t.Fatalf("sent %v", got)
		}
	})
}

// Reference 5.3 case 8: a dry run writes nothing and sends nothing.
func TestDryRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := h.config(1, 2, 3, 2, 4)
	cfg.DryRun = true
	cfg.SendFunc = nil
	var states []State
	cfg.ProgressFunc = func(r Report) { states = append(states, r.State) }
	rep := run(t, cfg)
	wantCounts(t, rep, StateDryRun, 0, 0, 0, 0, 4)
	if entries, _ := os.ReadDir(h.dir); len(entries) != 0 {
		t.Fatalf("dry run created %v", entries)
	}
	if !reflect.DeepEqual(states, []State{StateDryRun}) {
		t.Fatalf("progress %v", states)
	}
}

// Reference 5.3 case 8, pacing: at 20/s the sends start 50 ms apart.
func TestPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		cfg := h.config(1, 2, 3, 4)
		cfg.Rate = 20
		var states []State
		cfg.ProgressFunc = func(r Report) { states = append(states, r.State) }
		run(t, cfg)
		for i := 1; i < len(h.starts); i++ {
			if gap := h.starts[i] - h.starts[i-1]; gap != 50*time.Millisecond {
				t.Fatalf("gap %d = %v, want 50ms (starts %v)", i, gap, h.starts)
			}
		}
		if !reflect.DeepEqual(states, []State{StateRunning, StateFinished}) {
			t.Fatalf("progress %v", states)
		}
	})
}

// Reference 5.3 case 9: a negative interval reports after every recipient.
func TestProgressEveryRecipient(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := h.config(1, 2, 3, 4)
	cfg.ProgressInterval = -1
	var got []string
	cfg.ProgressFunc = func(r Report) {
		got = append(got, string(r.State)+":"+string(rune('0'+r.Delivered)))
		panic("a panicking observer is recovered")
	}
	run(t, cfg)
	want := []string{"running:0", "running:1", "running:2", "running:3", "running:4", "finished:4"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("progress %v, want %v", got, want)
	}
}

// Reference 5.3 case 10: one runner per name.
func TestSecondRunnerRefused(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	inSend := make(chan struct{})
	proceed := make(chan struct{})
	h.result = func(_ context.Context, r Recipient, _ int) error {
		if r.ID == 1 {
			close(inSend)
			<-proceed
		}
		return nil
	}
	done := make(chan *Report)
	go func() {
		rep, err := Run(t.Context(), h.config(1, 2))
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	<-inSend
	_, err := Run(t.Context(), h.config(1, 2))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second run: err = %v, want ErrLocked", err)
	}
	close(proceed)
	if rep := <-done; rep == nil || rep.State != StateFinished {
		t.Fatalf("first run: %+v", rep)
	}
	// Released when the first run returns.
	run(t, h.config(1, 2))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
