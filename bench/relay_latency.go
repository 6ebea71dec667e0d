package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// Defaults and bounds of the relay-latency scenario.
const (
	relayLatencyDefaultRates    = "100,1000"
	relayLatencyDefaultDuration = 4 * time.Second
	relayLatencyDefaultRounds   = 3
	// relayLatencyConns is Telegram's largest max_connections: the open
	// loop never waits for a connection below it.
	relayLatencyConns = 100
	// relayLatencyMaxInFlight bounds the posts in flight at once; a send
	// due while it is reached waits, and its wait counts as latency.
	relayLatencyMaxInFlight = 2000
	// relayLatencyFsyncSamples is how many append+fsync calls measure the
	// disk, before and after the runs.
	relayLatencyFsyncSamples = 200
	// relayLatencyP50Slack is what the p50 goal allows over one fsync.
	relayLatencyP50Slack = 2 * time.Millisecond
	// relayLatencyP99Goal is the goal for serve's added p99 at 1,000/s on
	// SQLite.
	relayLatencyP99Goal = 25 * time.Millisecond
)

// runRelayLatency measures receive→forward latency under open-loop load:
// updates are posted to the webhook at fixed rates (each on its own
// schedule, whatever the answers), and latency is from an update's
// scheduled send time to its first arrival at the forward endpoint, so a
// slow answer cannot hide the updates queued behind it. Variants are
// `tgrelay serve` on SQLite and PostgreSQL and the non-durable forwarder of
// the relay scenario, alternating; what serve adds is its latency minus the
// forwarder's at the same rate. The machine's own fsync latency (a small
// append and fsync in the same temp dir, before and after the runs) is
// printed beside it: a durable relay cannot answer faster than one fsync.
func runRelayLatency(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("relay-latency", flag.ContinueOnError)
	fs.SetOutput(out)
	ratesFlag := fs.String("rates", relayLatencyDefaultRates, "comma-separated update rates per second (open loop)")
	duration := fs.Duration("duration", relayLatencyDefaultDuration, "length of one measured run")
	rounds := fs.Int("rounds", relayLatencyDefaultRounds, "rounds; each runs every variant at every rate, alternating")
	chats := fs.Int("chats", relayDefaultChats, "chats the updates are spread over")
	withPG := fs.Bool("pg", true, "also run serve on a throwaway durable PostgreSQL")
	bin := fs.String("bin", "", "tgrelay binary (default: go build github.com/tgrelay/tgrelay/cmd/tgrelay)")
	binB := fs.String("bin-b", "", "a second tgrelay binary, run as variants serve-sqlite-b and serve-postgres-b, to compare two builds in one run")
	serveCPUs := fs.String("serve-cpus", "", serveCPUsUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var rates []int
	for _, f := range strings.Split(*ratesFlag, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 || v > 100_000 {
			return fmt.Errorf("-rates: %q is not a rate from 1 to 100000 per second", f)
		}
		rates = append(rates, v)
	}
	if *duration < 100*time.Millisecond || *duration > 10*time.Minute || *rounds < 1 || *chats < 1 {
		return errors.New("-duration must be 100ms to 10m, -rounds and -chats positive")
	}
	dir, remove, err := buildsInTempDir(ctx, "relay-latency", *serveCPUs, bin, binB, out)
	defer remove()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "load average at start: %s\n", intakeLoadAverage())

	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()
	sink, err := startRelaySink()
	if err != nil {
		return err
	}
	defer sink.close()
	serveArgs := func(db string) []string {
		return []string{"--db", db, "--api-root", tg.URL, "--forward", sink.url,
			"--webhook-check-interval", "0", "--log-level", "warn"}
	}
	var variants []*latencyVariant
	served, _, _, stopServes, err := startRelayServes(ctx, out, dir, *bin, *binB, *withPG, false, serveArgs, tg.Token, "", nil)
	defer stopServes()
	if err != nil {
		return err
	}
	for _, v := range served {
		variants = append(variants, &latencyVariant{name: v.name, url: v.url})
	}
	base, err := startNaiveForwarder(sink.url, relayLatencyConns)
	if err != nil {
		return err
	}
	defer base.close()
	variants = append(variants, &latencyVariant{name: "non-durable", url: base.url})

	fsyncs, err := measureFsync(dir, relayLatencyFsyncSamples)
	if err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	gen := newRelayLoad(relayLatencyConns, *chats)
	defer gen.close()
	for _, v := range variants { // warm-up: connections, caches, table pages
		if _, err := gen.runOpen(ctx, sink, v.url, 200, 200); err != nil {
			return fmt.Errorf("%s warm-up: %w", v.name, err)
		}
	}
	fmt.Fprintf(out, "relay-latency: open loop at %v/s, %v per run, %d rounds, %d chats, %d webhook connections\n",
		rates, *duration, *rounds, *chats, relayLatencyConns)
	for r := 1; r <= *rounds; r++ {
		for _, rate := range rates {
			n := max(1, int(float64(rate)*duration.Seconds()))
			for _, v := range variants {
				res, err := gen.runOpen(ctx, sink, v.url, rate, n)
				if err != nil {
					return fmt.Errorf("%s at %d/s, round %d: %w", v.name, rate, r, err)
				}
				v.add(rate, res)
				fmt.Fprintf(out, "round %d  %5d/s  %-15s p50 %8v  p99 %8v  max %8v  (re-posts %d, duplicates %d)\n",
					r, rate, v.name, res.p50.Round(10*time.Microsecond), res.p99.Round(10*time.Microsecond),
					res.max.Round(10*time.Microsecond), res.reposts, res.duplicates)
			}
		}
	}
	more, err := measureFsync(dir, relayLatencyFsyncSamples)
	if err != nil {
		return fmt.Errorf("fsync: %w", err)
	}
	fsyncs = append(fsyncs, more...)
	fsyncP50, fsyncP99 := percentile(fsyncs, 0.50), percentile(fsyncs, 0.99)

	fmt.Fprintln(out)
	fmt.Fprintf(out, "fsync of a small append in %s: p50 %v, p99 %v (%d samples, before and after the runs)\n",
		os.TempDir(), fsyncP50.Round(10*time.Microsecond), fsyncP99.Round(10*time.Microsecond), len(fsyncs))
	fmt.Fprintf(out, "goals: added p50 <= fsync p50 + %v = %v; added p99 <= %v at 1000/s on SQLite\n",
		relayLatencyP50Slack, (fsyncP50 + relayLatencyP50Slack).Round(10*time.Microsecond), relayLatencyP99Goal)
	baseline := variants[len(variants)-1]
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\trate/s\tp50\tp99\tadded p50\tadded p99\tp50 goal\tp99 goal\t")
	kv := []string{
		fmt.Sprintf("fsync_p50_ms=%.2f", ms(fsyncP50)), fmt.Sprintf("fsync_p99_ms=%.2f", ms(fsyncP99)),
		"rounds=" + strconv.Itoa(*rounds), "duration=" + duration.String(),
	}
	for _, v := range variants {
		key := strings.ReplaceAll(strings.TrimPrefix(v.name, "serve-"), "-", "_")
		for _, rate := range rates {
			p50, p99 := v.median(rate)
			kv = append(kv, fmt.Sprintf("%s_%d_p50_ms=%.2f", key, rate, ms(p50)), fmt.Sprintf("%s_%d_p99_ms=%.2f", key, rate, ms(p99)))
			if v == baseline {
				fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t-\t-\t-\t-\t\n", v.name, rate, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
				continue
			}
			b50, b99 := baseline.median(rate)
			add50, add99 := p50-b50, p99-b99
			goal50 := add50 <= fsyncP50+relayLatencyP50Slack
			goal99 := "-"
			if strings.HasPrefix(key, "sqlite") && rate == 1000 {
				goal99 = strconv.FormatBool(add99 <= relayLatencyP99Goal)
				kv = append(kv, key+"_1000_goal_p99="+goal99)
			}
			kv = append(kv, fmt.Sprintf("%s_%d_added_p50_ms=%.2f", key, rate, ms(add50)), fmt.Sprintf("%s_%d_added_p99_ms=%.2f", key, rate, ms(add99)),
				fmt.Sprintf("%s_%d_goal_p50=%t", key, rate, goal50))
			fmt.Fprintf(tw, "%s\t%d\t%v\t%v\t%v\t%v\t%t\t%s\t\n", v.name, rate, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond),
				add50.Round(10*time.Microsecond), add99.Round(10*time.Microsecond), goal50, goal99)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "load average at end: %s\n", intakeLoadAverage())
	fmt.Fprintf(out, "RESULT relay-latency %s\n", strings.Join(kv, " "))
	return nil
}

// latencyVariant is one side of the comparison and its runs per rate.
type latencyVariant struct {
	name, url string
	runs      map[int][]latencyResult
}

func (v *latencyVariant) add(rate int, r latencyResult) {
	if v.runs == nil {
		v.runs = make(map[int][]latencyResult)
	}
	v.runs[rate] = append(v.runs[rate], r)
}

// median returns the medians, over the rounds, of the runs' p50 and p99 at
// rate.
func (v *latencyVariant) median(rate int) (p50, p99 time.Duration) {
	var a, b []float64
	for _, r := range v.runs[rate] {
		a, b = append(a, float64(r.p50)), append(b, float64(r.p99))
	}
	return time.Duration(median(a)), time.Duration(median(b))
}

// latencyResult is one open-loop run.
type latencyResult struct {
	p50, p99, max       time.Duration
	reposts, duplicates int
}

// runOpen posts n new updates to url on a fixed schedule of rate per
// second, each in its own goroutine (at most relayLatencyMaxInFlight at
// once), and waits until the sink has them all. Latency is from each
// update's scheduled send time to its first arrival at the sink.
func (g *relayLoad) runOpen(ctx context.Context, sink *relaySink, url string, rate, n int) (latencyResult, error) {
	ctx, cancel := context.WithTimeout(ctx, relayRunTimeout)
	defer cancel()
	lo, bodies := g.nextBatch(n)
	done := sink.expect(lo, n)
	sched := make([]time.Time, n)
	var reposts atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	slots := make(chan struct{}, relayLatencyMaxInFlight)
	interval := time.Second / time.Duration(rate)
	start := time.Now().Add(10 * time.Millisecond)
	for i := range n {
		sched[i] = start.Add(time.Duration(i) * interval)
		if d := time.Until(sched[i]); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-slots }()
			if err := g.post(ctx, url, bodies[i], &reposts); err != nil {
				errOnce.Do(func() { firstErr = err; cancel() })
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return latencyResult{}, firstErr
	}
	select {
	case <-done:
	case <-ctx.Done():
		return latencyResult{}, fmt.Errorf("endpoint got %d of %d updates: %w", sink.received(), n, ctx.Err())
	}
	sink.mu.Lock()
	lat := make([]time.Duration, n)
	for i := range n {
		lat[i] = sink.recv[i].Sub(sched[i])
	}
	dups := sink.duplicates
	sink.mu.Unlock()
	slices.Sort(lat)
	return latencyResult{
		p50: lat[n/2], p99: lat[min(n-1, n*99/100)], max: lat[n-1],
		reposts: int(reposts.Load()), duplicates: dups,
	}, nil
}

// measureFsync appends 64 bytes to a file in dir and fsyncs it, samples
// times, and returns each call's duration.
func measureFsync(dir string, samples int) ([]time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 64)
	out := make([]time.Duration, 0, samples)
	for range samples {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	return out, nil
}
