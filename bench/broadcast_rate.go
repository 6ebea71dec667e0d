package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
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
	stateRoot, err := os.MkdirTemp("", "bench-broadcast-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(stateRoot)

	fmt.Fprintf(out, "broadcast-rate: %d recipients, %v latency per call, %v runs measured from %v, %d rounds\n\n",
		*recipients, *latency, *window, *warmup, *rounds)
	fmt.Fprintf(out, "%-10s %-22s %5s %13s %11s %9s\n", "rate/s", "sender", "round", "configured/s", "achieved/s", "achieved%")

	type key struct {
		rate     float64
		windowed bool
	}
	achieved := map[key][]float64{}
	run := 0
	for _, r := range rateList {
		conc := windowFor(r, *latency)
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
				got := rec.rate(t0.Add(*warmup), t0.Add(*window))
				achieved[key{r, windowed}] = append(achieved[key{r, windowed}], got)
				fmt.Fprintf(out, "%-10g %-22s %5d %13g %11.1f %8.0f%%\n", r, name, round, r, got, 100*got/r)
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

// windowFor is the concurrency that lets rate be reached when each call takes
// latency: rate × latency in flight, with half again as margin, at least the
// default and at most broadcast.MaxConcurrency.
func windowFor(r float64, latency time.Duration) int {
	n := int(math.Ceil(r * latency.Seconds() * 1.5))
	return min(broadcast.MaxConcurrency, max(broadcast.DefaultConcurrency, n))
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

// startRecorder wraps a send and records when each send started.
type startRecorder struct {
	send   func(context.Context, broadcast.Recipient) error
	mu     sync.Mutex
	starts []time.Time
}

func (s *startRecorder) do(ctx context.Context, r broadcast.Recipient) error {
	s.mu.Lock()
	s.starts = append(s.starts, time.Now())
	s.mu.Unlock()
	return s.send(ctx, r)
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

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	ys := append([]float64(nil), xs...)
	sort.Float64s(ys)
	if len(ys)%2 == 1 {
		return ys[len(ys)/2]
	}
	return (ys[len(ys)/2-1] + ys[len(ys)/2]) / 2
}
