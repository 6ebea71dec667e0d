package broadcast

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

var errInjected = errors.New("injected")

// verdictConfig is a one-recipient broadcast whose every failure gets v,
// recording the backoff waits between sends.
func (h *harness) failUntil(n int) {
	h.result = func(_ context.Context, _ Recipient, k int) error {
		if k <= n {
			return errInjected
		}
		return nil
	}
}

func gaps(h *harness) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(h.starts); i++ {
		out = append(out, h.starts[i]-h.starts[i-1])
	}
	return out
}

// Reference 5.4 case 1: an injected flood-wait classifier.
func TestInjectedPauseAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.failUntil(1)
		cfg := h.config(1)
		cfg.ClassifyFunc = func(error) Verdict { return PauseAll(2*time.Second, "FLOOD_WAIT") }
		cfg.MaxRetryDelay = 2 * time.Second
		rep := run(t, cfg)
		wantCounts(t, rep, StateFinished, 1, 0, 0, 0, 0)
		if g := gaps(h); !reflect.DeepEqual(g, []time.Duration{2 * time.Second}) {
			t.Fatalf("waits %v", g)
		}
	})
}

// Reference 5.4 case 2: a wait above the budget halts, never shortened.
func TestPauseOverBudgetHalts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.failUntil(1)
		cfg := h.config(1)
		v := PauseAll(2001*time.Millisecond, "FLOOD_WAIT")
		cfg.ClassifyFunc = func(error) Verdict { return v }
		cfg.MaxRetryDelay = 2 * time.Second
		start := time.Now()
		rep := run(t, cfg)
		wantCounts(t, rep, StateHalted, 0, 0, 0, 0, 1)
		if rep.Halt == nil || *rep.Halt != v {
			t.Fatalf("halt %+v", rep.Halt)
		}
		if len(h.sent()) != 1 || time.Since(start) != 0 {
			t.Fatalf("sends %d, slept %v", len(h.sent()), time.Since(start))
		}
		rep = run(t, cfg)
		wantCounts(t, rep, StateFinished, 1, 0, 0, 0, 0)
	})
}

// Reference 5.4 cases 3 and 4: transient backoff, bounded attempts, capped.
func TestTransientBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.failUntil(100)
		cfg := h.config(1)
		cfg.ClassifyFunc = func(error) Verdict { return Transient("flaky") }
		cfg.MaxAttempts = 3
		rep := run(t, cfg)
		wantCounts(t, rep, StateFinished, 0, 0, 1, 0, 0)
		if g := gaps(h); !reflect.DeepEqual(g, []time.Duration{time.Second, 2 * time.Second}) {
			t.Fatalf("waits %v", g)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.failUntil(4)
		cfg := h.config(1)
		cfg.ClassifyFunc = func(error) Verdict { return Transient("flaky") }
		cfg.MaxAttempts = 6
		cfg.MaxRetryDelay = 5 * time.Second
		rep := run(t, cfg)
		wantCounts(t, rep, StateFinished, 1, 0, 0, 0, 0)
		want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second}
		if g := gaps(h); !reflect.DeepEqual(g, want) {
			t.Fatalf("waits %v, want %v", g, want)
		}
	})
}

// Reference 5.4 case 5: injected unreachable and ambiguous are final.
func TestInjectedFinalVerdicts(t *testing.T) {
	t.Parallel()
	for _, v := range []Verdict{Unreachable("gone"), Ambiguous("who knows"), Failed("nope")} {
		h := newHarness(t)
		h.failUntil(1)
		cfg := h.config(1)
		cfg.ClassifyFunc = func(error) Verdict { return v }
		rep := run(t, cfg)
		if rep.Unreachable+rep.Uncertain+rep.Failed != 1 {
			t.Fatalf("%v: %+v", v, rep)
		}
		run(t, cfg)
		if n := len(h.sent()); n != 1 {
			t.Fatalf("%v: sent %d times", v, n)
		}
	}
}

// Reference 5.4 cases 6–8: a stop during the backoff or pacing releases the
// recipient, starts no send, and a later run delivers.
func TestStopDuringBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.failUntil(1)
		cfg := h.config(1)
		cfg.ClassifyFunc = func(error) Verdict { return Transient("flaky") }
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel) // inside the 1 s backoff
		rep, err := Run(ctx, cfg)
		must(t, err)
		wantCounts(t, rep, StateStopped, 0, 0, 0, 0, 1)
		if n := len(h.sent()); n != 1 {
			t.Fatalf("sent %d", n)
		}
		if !strings.Contains(h.journal(), `{"i":0,"s":"released"}`) {
			t.Fatalf("journal:\n%s", h.journal())
		}
		rep = run(t, cfg)
		wantCounts(t, rep, StateFinished, 1, 0, 0, 0, 0)
	})
}

func TestStopDuringPacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		cfg := h.config(1, 2)
		cfg.Rate = 0.5 // 2 s between sends
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(time.Second, cancel)
		rep, err := Run(ctx, cfg)
		must(t, err)
		wantCounts(t, rep, StateStopped, 1, 0, 0, 0, 1)
		if got := h.sent(); !reflect.DeepEqual(got, ids(1)) {
			t.Fatalf("sent %v", got)
		}
	})
}

// Reference 5.4 case 9: an invalid verdict ends the run with an error; the
// intent stays and the next run records uncertain without sending again.
func TestInvalidVerdict(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.failUntil(1)
	cfg := h.config(1)
	cfg.ClassifyFunc = func(error) Verdict { return PauseAll(-time.Second, "") }
	_, err := Run(t.Context(), cfg)
	if !errors.Is(err, ErrInvalidVerdict) {
		t.Fatalf("err = %v, want ErrInvalidVerdict", err)
	}
	if j := h.journal(); j != `{"i":0,"s":"sending"}`+"\n" {
		t.Fatalf("journal %q", j)
	}
	rep := run(t, cfg)
	wantCounts(t, rep, StateFinished, 0, 0, 0, 1, 0)
	if n := len(h.sent()); n != 1 {
		t.Fatalf("sent %d", n)
	}
}

func TestVerdictValidate(t *testing.T) {
	t.Parallel()
	bad := []Verdict{
		{},
		{Kind: "bogus"},
		PauseAll(-1, ""),
		PauseAll(MaxPause+1, ""),
		{Kind: KindPermanent, Unreachable: true, Stop: true},
		Migrated(0, ""),
		Transient(strings.Repeat("x", MaxReasonLen+1)),
	}
	for _, v := range bad {
		if err := v.Validate(); !errors.Is(err, ErrInvalidVerdict) {
			t.Errorf("Validate(%+v) = %v", v, err)
		}
	}
	good := []Verdict{PauseAll(0, ""), PauseAll(MaxPause, ""), Transient(strings.Repeat("x", MaxReasonLen)),
		Unreachable("r"), Failed("r"), StopBroadcast("r"), Ambiguous("r"), Migrated(-100, "r")}
	for _, v := range good {
		if err := v.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v", v, err)
		}
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want Verdict
	}{
		{"blocked", apiErr(403, "Forbidden: bot was blocked by the user"), Unreachable("blocked-by-user")},
		{"chat not found", apiErr(400, "Bad Request: chat not found"), Unreachable("chat-not-found")},
		{"message invalid", apiErr(400, "Bad Request: message is too long"), StopBroadcast("message-invalid")},
		{"migrated", &botapi.APIError{Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: -1001}, Migrated(-1001, "chat-migrated")},
		{"429 with wait", &botapi.APIError{Code: 429, Description: "Too Many Requests", RetryAfter: 3 * time.Second}, PauseAll(3*time.Second, "rate-limited")},
		{"429 without wait", apiErr(429, "Too Many Requests"), Transient("rate-limited")},
		{"telegram 500", apiErr(500, "Internal Server Error"), Transient("server-error")},
		{"proxy 502", &botapi.APIError{Code: 502, Description: "response was not JSON", NotJSON: true}, Ambiguous("unknown")},
		{"unknown 400 from telegram", apiErr(400, "Bad Request: something new"), StopBroadcast("unrecognized-refusal-400")},
		{"network", errors.New("connection reset"), Ambiguous("unknown")},
		{"deadline", context.DeadlineExceeded, Ambiguous("unknown")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Classify(tt.err); got != tt.want {
				t.Fatalf("Classify = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// Reference 5.4 case 10: the lock file replaced during an in-flight send.
// The runner neither records the outcome nor sends again; the replacement
// is untouched; the next run records the recipient uncertain.
func TestLockReplacedDuringSend(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	lockPath := filepath.Join(h.dir, "b", lockFile)
	h.result = func(_ context.Context, r Recipient, _ int) error {
		if r.ID == 1 {
			must(t, os.Remove(lockPath))
			must(t, os.WriteFile(lockPath, []byte("replacement"), 0o600))
		}
		return nil
	}
	_, err := Run(t.Context(), h.config(1, 2))
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("err = %v, want ErrLockLost", err)
	}
	if got := h.sent(); !reflect.DeepEqual(got, ids(1)) {
		t.Fatalf("sent %v", got)
	}
	if j := h.journal(); j != `{"i":0,"s":"sending"}`+"\n" {
		t.Fatalf("journal %q", j)
	}
	if b, _ := os.ReadFile(lockPath); string(b) != "replacement" {
		t.Fatalf("replacement lock changed: %q", b)
	}
	h.result = nil
	rep := run(t, h.config(1, 2))
	wantCounts(t, rep, StateFinished, 1, 0, 0, 1, 0)
	if got := h.sent(); !reflect.DeepEqual(got, ids(1, 2)) {
		t.Fatalf("sent %v", got)
	}
}

// Reference 5.4 case 11: invalid options are refused before any file.
func TestInvalidConfig(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	mods := map[string]func(*Config){
		"Name empty":           func(c *Config) { c.Name = "" },
		"Name slash":           func(c *Config) { c.Name = "a/b" },
		"Name dot first":       func(c *Config) { c.Name = ".a" },
		"Name too long":        func(c *Config) { c.Name = strings.Repeat("a", MaxNameLen+1) },
		"Dir":                  func(c *Config) { c.Dir = "" },
		"SendFunc":             func(c *Config) { c.SendFunc = nil },
		"Rate negative":        func(c *Config) { c.Rate = -1 },
		"Rate NaN":             func(c *Config) { c.Rate = math.NaN() },
		"Rate Inf":             func(c *Config) { c.Rate = math.Inf(1) },
		"Rate above max":       func(c *Config) { c.Rate = MaxRate + 1 },
		"Rate below min":       func(c *Config) { c.Rate = MinRate / 2 },
		"Concurrency negative": func(c *Config) { c.Concurrency = -1 },
		"Concurrency above":    func(c *Config) { c.Concurrency = MaxConcurrency + 1 },
		"MaxAttempts negative": func(c *Config) { c.MaxAttempts = -1 },
		"MaxAttempts above":    func(c *Config) { c.MaxAttempts = MaxMaxAttempts + 1 },
		"MaxRetryDelay neg":    func(c *Config) { c.MaxRetryDelay = -1 },
		"MaxRetryDelay above":  func(c *Config) { c.MaxRetryDelay = MaxPause + 1 },
		"SendTimeout negative": func(c *Config) { c.SendTimeout = -1 },
		"SendTimeout above":    func(c *Config) { c.SendTimeout = MaxSendTimeout + 1 },
	}
	for name, mod := range mods {
		cfg := h.config(1)
		mod(&cfg)
		if _, err := Run(t.Context(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if entries, _ := os.ReadDir(h.dir); len(entries) != 0 {
		t.Fatalf("files created: %v", entries)
	}
	if len(h.sent()) != 0 {
		t.Fatal("sent")
	}
}

// An invalid audience is refused before the snapshot is written.
func TestAudienceValidatedBeforeSnapshot(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := h.config()
	cfg.AudienceFunc = func(context.Context) ([]Recipient, error) {
		return []Recipient{ChatID(1), Username("@no")}, nil
	}
	if _, err := Run(t.Context(), cfg); !errors.Is(err, ErrInvalidRecipient) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "b", snapshotFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot written: %v", err)
	}
	cfg.AudienceFunc = func(context.Context) ([]Recipient, error) {
		return []Recipient{ChatID(-1001), Username("@channel_name")}, nil
	}
	run(t, cfg)
	b, err := os.ReadFile(filepath.Join(h.dir, "b", snapshotFile))
	must(t, err)
	if string(b) != `{"recipients":[-1001,"@channel_name"]}`+"\n" {
		t.Fatalf("snapshot %q", b)
	}
	if got := h.sent(); !reflect.DeepEqual(got, []Recipient{ChatID(-1001), Username("@channel_name")}) {
		t.Fatalf("sent %v", got)
	}
}

func TestCorruptSnapshotRefused(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"recipients":[1,1]}`, `{"recipients":[1.5]}`, `{"recipients":["x"]}`, `{"recipients":[0]}`, `{}`,
		`{"recipients":[1]} {"recipients":[2]}`, `{"recipients":[9223372036854775808]}`, `[1,2]`, `{"recipients":[1],"x":1}`,
		`{"fingerprint":"` + strings.Repeat("f", MaxFingerprintLen+1) + `","recipients":[1]}`} {
		h := newHarness(t)
		must(t, os.MkdirAll(filepath.Join(h.dir, "b"), 0o700))
		must(t, os.WriteFile(filepath.Join(h.dir, "b", snapshotFile), []byte(body), 0o600))
		if _, err := Run(t.Context(), h.config(1)); !errors.Is(err, ErrSnapshot) && !errors.Is(err, ErrInvalidRecipient) {
			t.Errorf("snapshot %s: err = %v", body, err)
		}
		if len(h.sent()) != 0 {
			t.Errorf("snapshot %s: sent", body)
		}
	}
}

// A chat that migrated is sent once to the new id and the mapping recorded.
func TestChatMigrated(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.result = func(_ context.Context, r Recipient, _ int) error {
		if r.ID == -5 {
			return &botapi.APIError{Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: -1005}
		}
		return nil
	}
	rep := run(t, h.config(-5, 7))
	wantCounts(t, rep, StateFinished, 2, 0, 0, 0, 0)
	if rep.Migrated != 1 {
		t.Fatalf("migrated %d", rep.Migrated)
	}
	if got := h.sent(); !reflect.DeepEqual(got, ids(-5, -1005, 7)) {
		t.Fatalf("sent %v", got)
	}
	if !strings.Contains(h.journal(), `{"i":0,"o":"delivered","m":-1005}`) {
		t.Fatalf("journal:\n%s", h.journal())
	}
}

// A send that hangs hits SendTimeout and is recorded uncertain.
func TestSendTimeoutIsUncertain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.result = func(ctx context.Context, r Recipient, _ int) error {
			<-ctx.Done()
			return ctx.Err()
		}
		cfg := h.config(1)
		cfg.SendTimeout = 3 * time.Second
		start := time.Now()
		rep := run(t, cfg)
		wantCounts(t, rep, StateHalted, 0, 0, 0, 1, 0)
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}

// The window: never more than Concurrency sends in flight, the rate is
// respected, and with 100 ms per send the configured rate is reached, which
// one at a time cannot.
func TestWindowReachesRate(t *testing.T) {
	for _, tc := range []struct {
		concurrency int
		rate        float64
		want        time.Duration // fake time for 100 sends
	}{
		{8, 50, 99*20*time.Millisecond + 100*time.Millisecond}, // paced by the rate
		{1, 50, 100 * 100 * time.Millisecond},                  // one at a time: paced by latency
	} {
		synctest.Test(t, func(t *testing.T) {
			h := newHarness(t)
			h.latency = 100 * time.Millisecond
			aud := make([]int64, 100)
			for i := range aud {
				aud[i] = int64(i + 1)
			}
			cfg := h.config(aud...)
			cfg.Concurrency = tc.concurrency
			cfg.Rate = tc.rate
			start := time.Now()
			rep := run(t, cfg)
			took := time.Since(start)
			wantCounts(t, rep, StateFinished, 100, 0, 0, 0, 0)
			if h.maxIn > tc.concurrency {
				t.Fatalf("%d in flight, window %d", h.maxIn, tc.concurrency)
			}
			if took != tc.want {
				t.Fatalf("concurrency %d: took %v, want %v", tc.concurrency, took, tc.want)
			}
			// No two sends closer than the rate's interval.
			for i, g := range gaps(h) {
				if g < 20*time.Millisecond {
					t.Fatalf("sends %d and %d only %v apart", i, i+1, g)
				}
			}
		})
	}
}

// A 429 pauses every sender for retry_after, not just the one that got it.
func TestPauseAllPausesAllSenders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.latency = 100 * time.Millisecond
		var at time.Duration
		var once sync.Once
		h.result = func(_ context.Context, r Recipient, n int) error {
			if r.ID == 5 && n == 1 {
				once.Do(func() { at = time.Since(h.t0) })
				return &botapi.APIError{Code: 429, Description: "Too Many Requests", RetryAfter: 5 * time.Second}
			}
			return nil
		}
		aud := make([]int64, 40)
		for i := range aud {
			aud[i] = int64(i + 1)
		}
		cfg := h.config(aud...)
		cfg.Concurrency = 8
		cfg.Rate = 50
		rep := run(t, cfg)
		wantCounts(t, rep, StateFinished, 40, 0, 0, 0, 0)
		for i, s := range h.starts {
			if s > at && s < at+5*time.Second {
				t.Fatalf("send %d (%v) started %v after the 429 at %v", i, h.sends[i], s-at, at)
			}
		}
	})
}

// A halt with sends in flight: no new send starts, and every in-flight send
// finishes and is recorded.
func TestHaltWaitsForInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		h.result = func(_ context.Context, r Recipient, _ int) error {
			if r.ID == 4 {
				return apiErr(400, "Bad Request: message is too long")
			}
			time.Sleep(time.Second) // the others are slow
			return nil
		}
		aud := make([]int64, 20)
		for i := range aud {
			aud[i] = int64(i + 1)
		}
		cfg := h.config(aud...)
		cfg.Concurrency = 8
		cfg.Rate = 100
		rep := run(t, cfg)
		if rep.State != StateHalted {
			t.Fatalf("state %v", rep.State)
		}
		sent := h.sent()
		// Every send other than recipient 4 was delivered and recorded.
		if rep.Delivered != len(sent)-1 || rep.Pending != 20-rep.Delivered {
			t.Fatalf("sent %d, report %+v", len(sent), rep)
		}
		if len(sent) > 8 {
			t.Fatalf("%d sends started; the halt came with at most 8 in flight", len(sent))
		}
		j := h.journal()
		for _, r := range sent {
			if r.ID != 4 && !strings.Contains(j, `"o":"delivered"`) {
				t.Fatalf("journal:\n%s", j)
			}
		}
		if n := strings.Count(j, `"o":"delivered"`); n != rep.Delivered {
			t.Fatalf("journal has %d delivered, report %d", n, rep.Delivered)
		}
	})
}

// An audience above MaxRecipients is refused before anything is written.
func TestAudienceTooLarge(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	cfg := h.config()
	cfg.AudienceFunc = func(context.Context) ([]Recipient, error) {
		return make([]Recipient, MaxRecipients+1), nil
	}
	if _, err := Run(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "MaxRecipients") {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(h.dir, "b", snapshotFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot written: %v", err)
	}
}

// The lock replaced while several sends are in flight: none of their
// outcomes is written, and no further send starts.
func TestLockReplacedWithSendsInFlight(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	lockPath := filepath.Join(h.dir, "b", lockFile)
	var arrived sync.WaitGroup
	arrived.Add(4)
	replaced := make(chan struct{})
	h.result = func(_ context.Context, r Recipient, _ int) error {
		arrived.Done()
		if r.ID == 1 {
			arrived.Wait() // all four in flight
			must(t, os.Rename(lockPath, lockPath+".old"))
			must(t, os.WriteFile(lockPath, nil, 0o600))
			close(replaced)
		}
		<-replaced
		return nil
	}
	cfg := h.config(1, 2, 3, 4, 5, 6, 7, 8)
	cfg.Concurrency = 4
	_, err := Run(t.Context(), cfg)
	if !errors.Is(err, ErrLockLost) {
		t.Fatalf("err = %v, want ErrLockLost", err)
	}
	if n := len(h.sent()); n != 4 {
		t.Fatalf("%d sends, want the 4 in flight only", n)
	}
	j := h.journal()
	if strings.Count(j, `"s":"sending"`) != 4 || strings.Contains(j, `"o":`) || strings.Contains(j, "released") {
		t.Fatalf("journal after the loss:\n%s", j)
	}
}
