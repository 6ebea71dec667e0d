package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// crashServeArgs are serve's flags in the crash scenarios: short leases and
// sweeps so a killed process's claims come back within seconds, and
// attempts enough that kills never exhaust an update.
func crashServeArgs(db, api, forward string) []string {
	return []string{"--db", db, "--api-root", api, "--forward", forward,
		"--webhook-check-interval", "0", "--log-level", "warn",
		"--lease", "3s", "--forward-timeout", "1500ms", "--sweep-interval", "300ms",
		"--pending-grace", "1s", "--backoff-base", "100ms", "--max-attempts", "100"}
}

// runCrashServe: serve on SQLite forwarding to a sink, a generator POSTing
// distinct updates (re-posting each until 200), and serve killed with
// SIGKILL every 1–2 s and restarted. Afterwards every update that got a 200
// must reach the sink.
func runCrashServe(ctx context.Context, args []string, out io.Writer) error {
	f := newCrashFlags("crash-serve", "updates", 3000, 120, 15, 4*time.Minute, out)
	ctx, dir, done, err := f.setup(ctx, args, out)
	if err != nil {
		return err
	}
	defer done()
	n := f.n
	res, err := crashServeRun(ctx, *f.bin, dir, *n, *f.rate, *f.kills, out)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kills\tposts\t200s\tupdates\tdelivered\tlost\tduplicates\tnot completed\tdrain after last kill\t")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", res.kills, res.posts, res.oks, *n, res.delivered, res.lost, res.duplicates, res.notCompleted, res.drain.Round(time.Millisecond))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "RESULT crash-serve updates=%d kills=%d posts=%d oks=%d delivered=%d lost=%d duplicates=%d not_completed=%d drain_ms=%d lost_is_zero=%t\n",
		*n, res.kills, res.posts, res.oks, res.delivered, res.lost, res.duplicates, res.notCompleted, res.drain.Milliseconds(), res.lost == 0)
	if res.lost != 0 {
		return fmt.Errorf("%d acknowledged updates lost", res.lost)
	}
	return nil
}

type crashServeResult struct {
	kills                 int
	posts, oks            int64
	delivered, duplicates int
	lost, notCompleted    int
	drain                 time.Duration
}

// crashServeRun is the scenario proper, shared with its short test.
func crashServeRun(ctx context.Context, bin, dir string, n int, rate float64, minKills int, out io.Writer) (crashServeResult, error) {
	var res crashServeResult
	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()
	const lo = 1
	sink, err := startCrashSink(lo, n, nil)
	if err != nil {
		return res, err
	}
	defer sink.close()
	db := filepath.Join(dir, "relay.db")
	s, err := startServe(ctx, "serve", bin, dir, crashServeArgs(db, tg.URL, sink.url), tg)
	if err != nil {
		return res, err
	}
	defer s.stop()

	fmt.Fprintf(out, "crash-serve: %d updates at %.0f/s into serve on SQLite, SIGKILL every 1-2 s (at least %d)\n", n, rate, minKills)
	gen := &crashGen{}
	var lastKill time.Time
	res.kills, lastKill, err = loadUnderKills(ctx, gen, s.webhookURL, lo, n, rate, []*crashServe{s}, minKills, out)
	if err != nil {
		return res, err
	}
	// Drained: every update reached the sink and its row is completed (a
	// row forwarded by a killed process is forwarded again once its lease
	// lapses, then completed).
	ro, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return res, err
	}
	defer ro.Close()
	settled := func() bool {
		if d, _ := sink.tally(); d != n {
			return false
		}
		var open, all int
		err := ro.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE state != 'completed'), count(*) FROM "`+sqlitestore.DefaultTable+`"`).Scan(&open, &all)
		return err == nil && open == 0 && all == n
	}
	if err := waitFor(ctx, settled); err != nil {
		fmt.Fprintf(out, "  drain %v: not every update reached the sink and completed\n", err)
	}
	res.drain = time.Since(lastKill)
	s.stop()
	res.posts, res.oks = gen.posts.Load(), gen.oks.Load()
	res.delivered, res.duplicates = sink.tally()
	res.lost = lost(gen, sink)

	st, err := sqlitestore.Open(ctx, db, sqlitestore.Config{})
	if err != nil {
		return res, fmt.Errorf("open the store after the run: %w", err)
	}
	defer st.Close()
	stats, err := st.Stats(ctx)
	if err != nil {
		return res, err
	}
	for state, c := range stats.Count {
		if state != intake.StateCompleted {
			res.notCompleted += c
		}
	}
	if stats.Count[intake.StateCompleted]+res.notCompleted != n {
		return res, errors.New("the store does not hold every update")
	}
	return res, nil
}
