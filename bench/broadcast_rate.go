package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/broadcast"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// runBroadcastRate measures the send rate a broadcast reaches against
// telegramtest with a fixed latency per call: tgrelay's windowed runner
// (journal, lock and all) against a one-at-a-time sender (a rate limiter and
// a loop, what the reference implementation does), alternately, at each
// configured rate. The achieved rate is counted over a steady window: the
// sends started between the warm-up and the end of the window.
func runBroadcastRate(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("broadcast-rate", flag.ContinueOnError)
	fs.SetOutput(out)
	recipients := fs.Int("recipients", 10_000, "audience size (chats in the fake)")
	rates := fs.String("rates", "30,1000", "configured rates, sends per second, comma-separated")
	latency := fs.Duration("latency", 100*time.Millisecond, "latency the fake adds to every sendMessage")
	window := fs.Duration("window", 4*time.Second, "length of each measured run")
	warmup := fs.Duration("warmup", time.Second, "start of the steady window within each run")
	rounds := fs.Int("rounds", 2, "rounds (each runs both senders, alternately)")
	fixedWindow := fs.Int("concurrency", 0, "tgrelay's window; 0 sizes it with broadcast.WindowFor from the observed latency")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rateList []float64
	for _, s := range strings.Split(*rates, ",") {
		var r float64
		if _, err := fmt.Sscanf(strings.TrimSpace(s), "%g", &r); err != nil || r <= 0 || r > broadcast.MaxRate {
			return fmt.Errorf("bad rate %q", s)
		}
		rateList = append(rateList, r)
	}
	if *warmup >= *window || *rounds < 1 || *recipients < 1 {
		return errors.New("need warmup < window, rounds ≥ 1, recipients ≥ 1")
	}

	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}

	// The fake must not be the bottleneck: its rate limits are off (a 429
	// would count as an error below and fail the run), and the only delay is
	// the configured latency.
	srv := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: func(string, ...any) {}})
	defer srv.Close()
	if err := srv.Arm(telegramtest.Fault{Method: "sendMessage", Delay: *latency, Times: -1}); err != nil {
		return err
	}
	chats := make([]broadcast.Recipient, *recipients)
	for i := range chats {
		ch, err := srv.NewPrivateChat(srv.NewUser("u"))
		if err != nil {
			return err
		}
		chats[i] = broadcast.ChatID(ch.ID)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: broadcast.MaxConcurrency, MaxConnsPerHost: 0}
	defer tr.CloseIdleConnections()
	client, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: &http.Client{Transport: tr, Timeout: 30 * time.Second}})
	if err != nil {
		return err
	}
	send, err := broadcast.Sender(client, broadcast.Message{Text: "benchmark"})
	if err != nil {
		return err
	}
	// The window is sized from the latency observed against this fake on
	// this machine right now (HTTP, JSON and scheduling on top of the
	// configured delay), not only from the configured one.
	calChat, err := srv.NewPrivateChat(srv.NewUser("calibration"))
	if err != nil {
		return err
	}
	observed, err := observeLatency(ctx, send, broadcast.ChatID(calChat.ID))
	if err != nil {
		return err
	}
	sizing := max(*latency, observed)

	stateRoot, err := os.MkdirTemp("", "bench-broadcast-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateRoot)

	fmt.Fprintf(out, "broadcast-rate: %d recipients, %v latency per call, %v runs measured from %v, %d rounds\n",
		*recipients, *latency, *window, *warmup, *rounds)
	fmt.Fprintf(out, "observed latency before the runs (p90 of %d calls): %v; window = broadcast.WindowFor(rate, %v) = ceil(2 × rate × latency), %d..%d\n\n",
		calibrationCalls, observed.Round(100*time.Microsecond), sizing.Round(100*time.Microsecond),
		broadcast.DefaultConcurrency, broadcast.MaxConcurrency)
	fmt.Fprintf(out, "%-10s %-22s %5s %13s %11s %9s %14s\n", "rate/s", "sender", "round", "configured/s", "achieved/s", "achieved%", "p50/p99 call")

	type key struct {
		rate     float64
		windowed bool
	}
	achieved := map[key][]float64{}
	run := 0
	for _, r := range rateList {
		conc := broadcast.WindowFor(r, sizing)
		if *fixedWindow > 0 {
			conc = *fixedWindow
		}
		for round := 1; round <= *rounds; round++ {
			for _, windowed := range []bool{true, false} {
				if err := ctx.Err(); err != nil {
					return err
				}
				run++
				rec := &startRecorder{send: send}
				rctx, cancel := context.WithTimeout(ctx, *window)
				t0 := time.Now()
				var err error
				name := "one-at-a-time"
				if windowed {
					name = fmt.Sprintf("tgrelay window=%d", conc)
					_, err = broadcast.Run(rctx, broadcast.Config{
						Name: fmt.Sprintf("bench-%d", run), Dir: stateRoot, Rate: r, Concurrency: conc,
						AudienceFunc: func(context.Context) ([]broadcast.Recipient, error) { return chats, nil },
						SendFunc:     rec.do,
					})
				} else {
					err = oneAtATime(rctx, r, chats, rec.do)
				}
				cancel()
				if err != nil {
					return fmt.Errorf("%s at %v/s: %w", name, r, err)
				}
				if n, first := rec.failures(); n > 0 {
					return fmt.Errorf("%s at %v/s: %d sends failed (the fake must not refuse), first: %w", name, r, n, first)
				}
				got := rec.rate(t0.Add(*warmup), t0.Add(*window))
				achieved[key{r, windowed}] = append(achieved[key{r, windowed}], got)
				p50, p99 := rec.latency()
				fmt.Fprintf(out, "%-10g %-22s %5d %13g %11.1f %8.0f%% %14s\n", r, name, round, r, got, 100*got/r,
					fmt.Sprintf("%.0f/%.0f ms", ms(p50), ms(p99)))
			}
		}
	}
	fmt.Fprintln(out)
	var result strings.Builder
	result.WriteString("RESULT broadcast-rate")
	fmt.Fprintf(&result, " latency_ms=%d recipients=%d", latency.Milliseconds(), *recipients)
	for _, r := range rateList {
		w, s := median(achieved[key{r, true}]), median(achieved[key{r, false}])
		fmt.Fprintf(out, "at %g/s: tgrelay %.1f/s (%.0f%% of configured), one-at-a-time %.1f/s (%.0f%%), ratio %.1fx\n",
			r, w, 100*w/r, s, 100*s/r, w/s)
		fmt.Fprintf(&result, " configured_%g=%g tgrelay_%g=%.1f serial_%g=%.1f tgrelay_vs_configured_%g=%.2f ratio_%g=%.2f",
			r, r, r, w, r, s, r, w/r, r, w/s)
	}
	fmt.Fprintln(out, result.String())
	return nil
}

// oneAtATime is the baseline: a rate limiter and a loop, one send in flight.
func oneAtATime(ctx context.Context, r float64, chats []broadcast.Recipient, send func(context.Context, broadcast.Recipient) error) error {
	lim := rate.NewLimiter(rate.Limit(r), 1)
	for _, c := range chats {
		if lim.Wait(ctx) != nil {
			return nil // the window ended
		}
		if err := send(ctx, c); err != nil && ctx.Err() == nil {
			return err
		}
	}
	return nil
}

// startRecorder wraps a send and records when each send started, how long
// it took and whether it failed (a send cut short by the end of the run's
// window is not a failure).
type startRecorder struct {
	send      func(context.Context, broadcast.Recipient) error
	mu        sync.Mutex
	starts    []time.Time
	durations []time.Duration
	failed    int
	first     error
}

func (s *startRecorder) do(ctx context.Context, r broadcast.Recipient) error {
	t := time.Now()
	s.mu.Lock()
	s.starts = append(s.starts, t)
	s.mu.Unlock()
	err := s.send(ctx, r)
	d := time.Since(t)
	s.mu.Lock()
	s.durations = append(s.durations, d)
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		s.failed++
		if s.first == nil {
			s.first = err
		}
	}
	s.mu.Unlock()
	return err
}

// failures returns how many sends failed and the first error.
func (s *startRecorder) failures() (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.failed, s.first
}

// latency returns the median and 99th percentile of the send durations.
func (s *startRecorder) latency() (p50, p99 time.Duration) {
	s.mu.Lock()
	ds := slices.Clone(s.durations)
	s.mu.Unlock()
	return percentile(ds, 0.50), percentile(ds, 0.99)
}

// rate returns the sends started per second in [from, to).
func (s *startRecorder) rate(from, to time.Time) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.starts {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}
