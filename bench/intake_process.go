package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// processGoalVsRaw is the goal of the intake-process scenario: the runner
// reaches at least this share of the raw loop's rate.
const processGoalVsRaw = 0.7

// processBatch is how many rows one AddBatch preloads.
const processBatch = 500

// processTimeout bounds one measured run.
const processTimeout = 5 * time.Minute

// processTotals accumulates one variant's measured rounds.
type processTotals struct {
	items   int
	elapsed time.Duration
}

func (p processTotals) rate() float64 {
	if p.elapsed <= 0 {
		return 0
	}
	return float64(p.items) / p.elapsed.Seconds()
}

// runIntakeProcess measures claim → no-op handler → settle: through the
// intake Runner (started over a preloaded backlog, 32 handlers at once) vs
// a minimal loop of 32 goroutines calling the store's Claim and
// Settle directly (the same SQL statements, no listing, scheduling or
// leases), alternately, on SQLite and PostgreSQL.
func runIntakeProcess(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("intake-process", flag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("n", 2000, fmt.Sprintf("updates each variant processes per round (1 to %d)", intake.MaxPageSize))
	rounds := fs.Int("rounds", 3, "rounds; every round runs both variants on every store, in alternating order")
	workers := fs.Int("workers", 32, "concurrent handlers (runner MaxConcurrent) and raw loop goroutines")
	withPG := fs.Bool("pg", true, "also run on a throwaway PostgreSQL cluster")
	pgConns := fs.Int("pg-conns", 40, "PostgreSQL pool size")
	pageSize := fs.Int("page-size", 0, "runner PageSize (0 means -n, so the start-up sweep takes the whole backlog); MaxQueued is -n")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if *n < 1 || *n > intake.MaxPageSize || *rounds < 1 || *workers < 1 || *pgConns < 1 || *pageSize < 0 || *pageSize > intake.MaxPageSize {
		return fmt.Errorf("-n and -page-size must be 1 to %d; -rounds, -workers and -pg-conns at least 1", intake.MaxPageSize)
	}
	if *pageSize == 0 {
		*pageSize = *n
	}
	backends, cleanup, err := intakeBackends(ctx, out, true, *withPG, *pgConns)
	if err != nil {
		return err
	}
	defer cleanup()

	fmt.Fprintf(out, "intake-process: claim, no-op handler, settle; %d at once; %d updates per variant per round, %d rounds; GOMAXPROCS=%d, load average %s\n",
		*workers, *n, *rounds, runtime.GOMAXPROCS(0), intakeLoadAverage())
	for _, b := range backends {
		fmt.Fprintf(out, "  %s: %s\n", b.name, b.about)
	}
	fmt.Fprintf(out, "  runner: intake.Runner started over a preloaded backlog (one chat per update), PageSize %d, MaxQueued %d; fenced claims, lease timers, observer\n", *pageSize, *n)
	fmt.Fprintln(out, "  raw: goroutines calling Claim + Settle on the store directly, ids known in advance")

	runnerT := map[string]*processTotals{}
	rawT := map[string]*processTotals{}
	for _, b := range backends {
		runnerT[b.name], rawT[b.name] = &processTotals{}, &processTotals{}
	}
	for r := range *rounds {
		for _, b := range backends {
			order := []string{"runner", "raw"}
			if r%2 == 1 {
				order = []string{"raw", "runner"}
			}
			for _, v := range order {
				label := fmt.Sprintf("process_%s_%d", v, r)
				store, release, err := b.open(ctx, label)
				if err != nil {
					return fmt.Errorf("%s: %w", b.name, err)
				}
				d, err := processOnce(ctx, v, store, *n, *workers, *pageSize)
				if rerr := release(); err == nil && rerr != nil {
					err = rerr
				}
				if err != nil {
					return fmt.Errorf("%s %s round %d: %w", b.name, v, r+1, err)
				}
				t := runnerT[b.name]
				if v == "raw" {
					t = rawT[b.name]
				}
				t.items += *n
				t.elapsed += d
			}
		}
	}

	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "store\trunner items/s\traw items/s\trunner/raw\tgoal\t")
	result := []string{"RESULT intake-process"}
	for _, b := range backends {
		run, raw := runnerT[b.name].rate(), rawT[b.name].rate()
		ratio := run / raw
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2fx\t>= %.1fx %s\t\n", b.name, run, raw, ratio, processGoalVsRaw, intakeGoal(ratio >= processGoalVsRaw))
		result = append(result,
			fmt.Sprintf("%s_runner_ips=%.0f", b.name, run),
			fmt.Sprintf("%s_raw_ips=%.0f", b.name, raw),
			fmt.Sprintf("%s_runner_vs_raw=%.2f", b.name, ratio))
	}
	tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintln(out, strings.Join(result, " "))
	return nil
}

// processOnce preloads n pending updates into store, processes them all with
// variant "runner" or "raw", checks that every one completed exactly once,
// and returns the processing time.
func processOnce(ctx context.Context, variant string, store intake.Store, n, workers, pageSize int) (time.Duration, error) {
	received := time.Now().Add(-time.Minute)
	for lo := 0; lo < n; lo += processBatch {
		var batch []intake.AddRequest
		for id := lo + 1; id <= min(n, lo+processBatch); id++ {
			batch = append(batch, intake.AddRequest{Incoming: intake.Incoming{UpdateID: int64(id), Body: intakeUpdateBody(int64(id)), ReceivedAt: received}})
		}
		if _, err := store.AddBatch(ctx, batch); err != nil {
			return 0, fmt.Errorf("preload: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, processTimeout)
	defer cancel()

	var (
		d   time.Duration
		err error
	)
	if variant == "runner" {
		d, err = processRunner(ctx, store, n, workers, pageSize)
	} else {
		d, err = processRaw(ctx, store, n, workers)
	}
	if err != nil {
		return 0, err
	}
	st, err := intakeRecorded(ctx, store)
	if err != nil {
		return 0, err
	}
	if st.Count[intake.StateCompleted] != n {
		return 0, fmt.Errorf("%d of %d updates completed (%v)", st.Count[intake.StateCompleted], n, st.Count)
	}
	return d, nil
}

// processRunner starts an intake Runner over the backlog and waits until it
// has settled all n updates as completed.
func processRunner(ctx context.Context, store intake.Store, n, workers, pageSize int) (time.Duration, error) {
	var (
		completed atomic.Int64
		handled   atomic.Int64
		done      = make(chan struct{})
		failures  atomic.Int64
	)
	r, err := intake.New(intake.Config{
		Store: store,
		Handler: func(context.Context, intake.Update) error {
			handled.Add(1)
			return nil
		},
		MaxConcurrent: workers,
		PageSize:      pageSize,
		MaxQueued:     n,
		Observer: intake.Observer{
			SettleFunc: func(_ intake.Identity, s intake.State) {
				if s == intake.StateCompleted && completed.Add(1) == int64(n) {
					close(done)
				}
			},
			FailureFunc:    func(intake.Failure) { failures.Add(1) },
			StoreErrorFunc: func(intake.Step, int64, error) { failures.Add(1) },
		},
	})
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := r.Start(ctx); err != nil {
		return 0, err
	}
	var waitErr error
	select {
	case <-done:
	case <-ctx.Done():
		waitErr = fmt.Errorf("runner settled %d of %d: %w", completed.Load(), n, ctx.Err())
	}
	d := time.Since(start)
	cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Close(cctx); err != nil && waitErr == nil {
		waitErr = err
	}
	if waitErr != nil {
		return 0, waitErr
	}
	if f := failures.Load(); f > 0 {
		return 0, fmt.Errorf("runner reported %d failures or store errors", f)
	}
	if h := handled.Load(); h != int64(n) {
		return 0, fmt.Errorf("handler ran %d times for %d updates", h, n)
	}
	return d, nil
}

// processRaw is the floor: workers goroutines take ids 1..n in turn and call
// Claim then Settle, nothing else.
func processRaw(ctx context.Context, store intake.Store, n, workers int) (time.Duration, error) {
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	fail := func(err error) { errOnce.Do(func() { first = err }) }
	start := time.Now()
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				id := next.Add(1)
				if id > int64(n) {
					return
				}
				t := time.Now().Truncate(time.Millisecond)
				who, ok, err := store.Claim(ctx, id, intake.ClaimOpts{Now: t, LeaseUntil: t.Add(intake.DefaultLeaseDuration), MaxAttempts: intake.DefaultMaxAttempts})
				if err == nil && !ok {
					err = fmt.Errorf("update %d not claimable", id)
				}
				if err != nil {
					fail(err)
					return
				}
				ok, err = store.Settle(ctx, who, intake.Settlement{State: intake.StateCompleted, At: time.Now().Truncate(time.Millisecond)})
				if err == nil && !ok {
					err = fmt.Errorf("update %d not settled", id)
				}
				if err != nil {
					fail(err)
					return
				}
			}
		})
	}
	wg.Wait()
	d := time.Since(start)
	if first != nil {
		return 0, first
	}
	if err := ctx.Err(); err != nil {
		return 0, errors.New("raw loop cancelled")
	}
	return d, nil
}
