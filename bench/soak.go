package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// runSoak: serve (the real binary, gateway on) under a steady load for
// -duration, on SQLite and on PostgreSQL. The app replies through the
// gateway to a share of the updates, fails a share once (after its reply,
// which the retry must not send again) and refuses a share for good
// (exhaustions, acknowledged by the app's exhaustion endpoint as an
// operator's would be). Retention is short, so settled rows, their reply
// journals and effects, and dead processes' heartbeats are pruned many times
// during the run. Every -sample it records serve's RSS, Go heap,
// goroutines, open descriptors, the database's size and rows, the added
// latency and the states; then it compares the last tenth of the run after
// the warm-up with the first.
func runSoak(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(out)
	cfg := soakConfig{}
	fs.DurationVar(&cfg.duration, "duration", 10*time.Minute, "length of the load, per store")
	fs.Float64Var(&cfg.rate, "rate", 200, "updates per second")
	fs.IntVar(&cfg.chats, "chats", 50, "chats the updates come from")
	fs.Float64Var(&cfg.mix.reply, "reply", 0.1, "share of updates the app answers with a sendMessage through the gateway (the gateway keeps Telegram's 30 sends/s, so 200 updates/s cannot all be answered)")
	fs.Float64Var(&cfg.mix.failOnce, "fail-once", 0.01, "share of updates the app fails once, after its reply")
	fs.Float64Var(&cfg.mix.poison, "poison", 0.001, "share of updates the app refuses for good")
	fs.DurationVar(&cfg.retention, "retention", 2*time.Minute, "serve's --retention")
	fs.DurationVar(&cfg.sample, "sample", time.Minute, "sampling period")
	fs.DurationVar(&cfg.warmup, "warmup", 0, "samples before this are not compared (default: retention + 1m or 6m, whichever is more, at most half the run; RSS was still rising at minute 5)")
	stores := fs.String("stores", "sqlite,postgres", "comma-separated stores: sqlite, postgres")
	bin := fs.String("bin", "", "tgrelay binary (default: built into a temp dir)")
	timeout := fs.Duration("timeout", 0, "bound of the whole run (default: 2 × duration × stores + 5m)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.warmup == 0 {
		cfg.warmup = min(max(cfg.retention+time.Minute, 6*time.Minute), cfg.duration/2)
	}
	names := strings.Split(*stores, ",")
	if *timeout == 0 {
		*timeout = 2*cfg.duration*time.Duration(len(names)) + 5*time.Minute
	}
	ctx, dir, done, err := benchWorkspace(ctx, "soak", *timeout, bin, out)
	if err != nil {
		return err
	}
	defer done()
	var failed []string
	for _, store := range names {
		fmt.Fprintf(out, "soak %s: %v at %.0f updates/s from %d chats; replies %.0f%%, failing once %.1f%%, poison %.1f%%; retention %v, sample every %v, warm-up %v\n",
			store, cfg.duration, cfg.rate, cfg.chats, 100*cfg.mix.reply, 100*cfg.mix.failOnce, 100*cfg.mix.poison, cfg.retention, cfg.sample, cfg.warmup)
		res, err := soakRun(ctx, *bin, dir, store, cfg, out)
		if err != nil {
			return fmt.Errorf("%s: %w", store, err)
		}
		res.print(out, cfg)
		if v := res.verdict(cfg); v != "" {
			failed = append(failed, store+": "+v)
		}
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "; "))
	}
	return nil
}

type soakConfig struct {
	duration, retention, sample, warmup time.Duration
	rate                                float64
	chats                               int
	mix                                 soakMix
}

// soakSample is one row of the series.
type soakSample struct {
	at                    time.Duration // since the load began
	rss, heap             float64       // bytes
	goroutines, fds       float64
	dbBytes               int64
	rows                  map[string]int64 // by table suffix: updates, journal, effects, procs
	p50, p99              time.Duration
	latencies             int
	completed, abandoned  float64 // rows by state, from serve's metrics
	pending, processing   float64
	failedRows, unackExhs float64
}

type soakResult struct {
	store                                   string
	samples                                 []soakSample
	updates                                 int
	posts, oks, non200                      int64
	lost, replies, doubles                  int
	exhaustions                             int64
	replyFailures                           int64
	drain                                   time.Duration
	rowBound                                int64
	firstN, lastN                           int
	rssRatio, gorRatio                      float64
	fdRatio, p99Ratio                       float64
	dbRatio                                 float64
	maxRows, maxJournalRows, maxAttemptRows int64
	pruned                                  int64 // updates minus the rows left at the end
}

func soakRun(ctx context.Context, bin, dir, store string, cfg soakConfig, out io.Writer) (soakResult, error) {
	res := soakResult{store: store}
	n := int(cfg.rate * cfg.duration.Seconds())
	res.updates = n
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true},
		MaxMessages: n + 1000, Logf: func(string, ...any) {}})
	defer tg.Close()
	chats, err := soakChats(tg, cfg.chats)
	if err != nil {
		return res, err
	}
	const lo = 1
	track := newSoakTrack(lo, n)
	app, err := startSoakApp(tg.Token, chats, cfg.mix, track)
	if err != nil {
		return res, err
	}
	defer app.close()

	var db string
	var pool *pgxpool.Pool
	switch store {
	case "sqlite":
		db = filepath.Join(dir, "soak.db")
		_ = os.Remove(db)
	case "postgres":
		cluster, err := pgtest.Start(ctx, pgtest.Options{})
		if err != nil {
			return res, fmt.Errorf("postgres: %w", err)
		}
		defer cluster.Stop()
		if db, err = cluster.CreateDatabase(ctx); err != nil {
			return res, err
		}
		if pool, err = pgxpool.New(ctx, db); err != nil {
			return res, err
		}
		defer pool.Close()
		// A fenced domain write per update, so the effects table fills
		// and is pruned with its updates.
		app.effect = func(r *http.Request, id int64) error {
			attempt, err := strconv.Atoi(r.Header.Get(wire.HeaderAttempt))
			if err != nil {
				return err
			}
			var once bool
			return pool.QueryRow(r.Context(), `SELECT telegram_updates_once($1, $2, $3, $4, 'soak')`,
				id, attempt, r.Header.Get(wire.HeaderClaimID), time.Now().UnixMilli()).Scan(&once)
		}
	default:
		return res, fmt.Errorf("unknown store %q (sqlite or postgres)", store)
	}

	gw, err := relayFreeAddr()
	if err != nil {
		return res, err
	}
	s, err := newCrashServe("soak-"+store, bin, dir, soakServeArgs(db, tg.URL, gw, app, cfg.retention),
		childEnv("TGRELAY_TOKEN="+tg.Token, "TGRELAY_WEBHOOK_SECRET="+relaySecret))
	if err != nil {
		return res, err
	}
	if err := s.start(ctx, true); err != nil {
		return res, err
	}
	defer s.stop()

	rows := soakRowCounter(store, db, pool)
	gen := newSoakGen(track, chats, s.webhookURL, 30*time.Second)
	genDone := make(chan error, 1)
	begin := time.Now()
	go func() { genDone <- gen.run(ctx, cfg.rate, 64, nil) }()

	tick := time.NewTicker(cfg.sample)
	defer tick.Stop()
	var genErr error
	running := true
	for running {
		select {
		case genErr = <-genDone:
			running = false
		case <-tick.C:
			smp, err := soakTake(ctx, s, store, db, pool, rows, track)
			if err != nil {
				return res, fmt.Errorf("sample: %w", err)
			}
			smp.at = time.Since(begin).Round(time.Second)
			res.samples = append(res.samples, smp)
			fmt.Fprintf(out, "  %v: rss %.1f MiB, goroutines %.0f, fds %.0f, db %.1f MiB, rows %v, p99 %v, posts %d\n",
				smp.at, smp.rss/(1<<20), smp.goroutines, smp.fds, float64(smp.dbBytes)/(1<<20), smp.rows, smp.p99, gen.posts.Load())
		case <-ctx.Done():
			return res, ctx.Err()
		}
		if s.exited() {
			return res, fmt.Errorf("serve exited:\n%s", tail(s.logPath))
		}
	}
	if genErr != nil {
		return res, fmt.Errorf("generator: %w", genErr)
	}
	loadEnd := time.Now()
	// Drain: every acknowledged update answered 200 by the app (or poison).
	_ = waitForCtx(ctx, 2*time.Minute, func() bool { return track.lost(cfg.mix) == 0 })
	res.drain = time.Since(loadEnd)
	// Pruned: retention removed rows while serve ran (a run shorter than
	// the retention waits for one prune).
	_ = waitForCtx(ctx, cfg.retention+4*soakSweep, func() bool {
		rs, _, err := rows(ctx)
		if err == nil {
			res.pruned = int64(n) - rs["updates"]
		}
		return res.pruned > 0
	})
	res.posts, res.oks, res.non200 = gen.posts.Load(), gen.oks.Load(), gen.non200.Load()
	res.lost = track.lost(cfg.mix)
	res.replies, res.doubles = soakDoubleReplies(tg)
	res.exhaustions, res.replyFailures = app.exhaustions.Load(), app.replyFailures.Load()
	if e, ok := app.firstReplyError.Load().(string); ok {
		fmt.Fprintf(out, "  first failed reply: %s\n", e)
	}
	// What retention allows: the rows received within one retention plus
	// one sweep, with a margin of half.
	res.rowBound = int64(1.5 * cfg.rate * (cfg.retention + 2*soakSweep + cfg.sample).Seconds())
	res.compare(cfg)
	return res, nil
}

// soakSweep is serve's --sweep-interval in the soak: a prune runs with
// every sweep.
const soakSweep = 2 * time.Second

// soakServeArgs are serve's flags in the soak. The gateway listens on a
// port chosen here, so the app can also reach it outside an update.
func soakServeArgs(db, api, gateway string, app *soakApp, retention time.Duration) []string {
	return []string{"--db", db, "--api-root", api, "--forward", app.updateURL(), "--exhaustion-forward", app.exhaustionURL(),
		"--gateway-listen", gateway, "--webhook-check-interval", "0", "--log-level", "warn",
		"--retention", retention.String(), "--sweep-interval", soakSweep.String(),
		"--backoff-base", "200ms", "--max-attempts", strconv.Itoa(soakMaxAttempts)}
}

// soakMaxAttempts is serve's --max-attempts in the soak.
const soakMaxAttempts = 3

// soakTables are the store's tables, by the suffix the row counts use.
var soakTables = []struct{ key, table string }{
	{"updates", "telegram_updates"}, {"journal", "telegram_updates_journal"},
	{"effects", "telegram_updates_effects"}, {"procs", "telegram_updates_procs"},
	{"attempts", "telegram_updates_att"},
}

// soakRowCounter returns a function counting the rows of each table and
// the database's size on disk.
func soakRowCounter(store, db string, pool *pgxpool.Pool) func(ctx context.Context) (map[string]int64, int64, error) {
	if store == "postgres" {
		return func(ctx context.Context) (map[string]int64, int64, error) {
			rows := map[string]int64{}
			for _, t := range soakTables {
				var c int64
				if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+t.table).Scan(&c); err != nil {
					return nil, 0, err
				}
				rows[t.key] = c
			}
			var size int64
			err := pool.QueryRow(ctx, `SELECT pg_database_size(current_database())`).Scan(&size)
			return rows, size, err
		}
	}
	return func(ctx context.Context) (map[string]int64, int64, error) {
		ro, err := sql.Open("sqlite", "file:"+db+"?mode=ro&_pragma=busy_timeout(5000)")
		if err != nil {
			return nil, 0, err
		}
		defer ro.Close()
		rows := map[string]int64{}
		for _, t := range soakTables {
			var c int64
			if err := ro.QueryRowContext(ctx, `SELECT count(*) FROM "`+t.table+`"`).Scan(&c); err != nil {
				return nil, 0, err
			}
			rows[t.key] = c
		}
		var size int64
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if fi, err := os.Stat(db + suffix); err == nil {
				size += fi.Size()
			}
		}
		return rows, size, nil
	}
}

func soakTake(ctx context.Context, s *crashServe, store, db string, pool *pgxpool.Pool,
	rows func(context.Context) (map[string]int64, int64, error), track *soakTrack) (soakSample, error) {
	var smp soakSample
	m, err := scrapeMetrics(ctx, s.admin, "process_resident_memory_bytes", "go_memstats_heap_alloc_bytes",
		"go_goroutines", "process_open_fds", "tgrelay_updates", "tgrelay_exhaustions_pending")
	if err != nil {
		return smp, err
	}
	smp.rss, smp.heap = m["process_resident_memory_bytes"], m["go_memstats_heap_alloc_bytes"]
	smp.goroutines, smp.fds = m["go_goroutines"], m["process_open_fds"]
	smp.completed, smp.abandoned = m[`tgrelay_updates{state="completed"}`], m[`tgrelay_updates{state="abandoned"}`]
	smp.pending, smp.processing = m[`tgrelay_updates{state="pending"}`], m[`tgrelay_updates{state="processing"}`]
	smp.failedRows, smp.unackExhs = m[`tgrelay_updates{state="failed"}`], m["tgrelay_exhaustions_pending"]
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if smp.rows, smp.dbBytes, err = rows(cctx); err != nil {
		return smp, err
	}
	lat := track.takeLatencies()
	smp.latencies = len(lat)
	smp.p50, smp.p99 = percentile(lat, 0.5), percentile(lat, 0.99)
	return smp, nil
}

// compare sets the ratios of the last tenth of the samples after the
// warm-up to the first tenth (at least one sample each).
func (r *soakResult) compare(cfg soakConfig) {
	var after []soakSample
	for _, s := range r.samples {
		if s.at >= cfg.warmup {
			after = append(after, s)
		}
		r.maxRows = max(r.maxRows, s.rows["updates"])
		r.maxJournalRows = max(r.maxJournalRows, s.rows["journal"])
		r.maxAttemptRows = max(r.maxAttemptRows, s.rows["attempts"])
	}
	if len(after) < 2 {
		return
	}
	k := max(1, len(after)/10)
	first, last := after[:k], after[len(after)-k:]
	r.firstN, r.lastN = len(first), len(last)
	mean := func(ss []soakSample, f func(soakSample) float64) float64 {
		t := 0.0
		for _, s := range ss {
			t += f(s)
		}
		return t / float64(len(ss))
	}
	ratio := func(f func(soakSample) float64) float64 {
		a := mean(first, f)
		if a == 0 {
			return 0
		}
		return mean(last, f) / a
	}
	r.rssRatio = ratio(func(s soakSample) float64 { return s.rss })
	r.gorRatio = ratio(func(s soakSample) float64 { return s.goroutines })
	r.fdRatio = ratio(func(s soakSample) float64 { return s.fds })
	r.p99Ratio = ratio(func(s soakSample) float64 { return float64(s.p99) })
	r.dbRatio = ratio(func(s soakSample) float64 { return float64(s.dbBytes) })
}

// verdict names the goals missed, or "".
func (r *soakResult) verdict(cfg soakConfig) string {
	var miss []string
	if r.lost != 0 {
		miss = append(miss, fmt.Sprintf("%d lost", r.lost))
	}
	if r.doubles != 0 {
		miss = append(miss, fmt.Sprintf("%d replies sent twice", r.doubles))
	}
	if r.maxRows > r.rowBound {
		miss = append(miss, fmt.Sprintf("%d update rows, retention allows %d", r.maxRows, r.rowBound))
	}
	// Every attempt of an update is one row, pruned with the update: at
	// most soakMaxAttempts per update row.
	if r.maxAttemptRows > soakMaxAttempts*r.rowBound {
		miss = append(miss, fmt.Sprintf("%d attempt rows, retention allows %d", r.maxAttemptRows, soakMaxAttempts*r.rowBound))
	}
	if r.firstN > 0 {
		within := func(name string, x, lim float64) { // growth only: less is no leak
			if x > lim {
				miss = append(miss, fmt.Sprintf("%s last/first %.2f", name, x))
			}
		}
		within("RSS", r.rssRatio, 1.1)
		within("goroutines", r.gorRatio, 1.1)
		within("fds", r.fdRatio, 1.1)
		if r.p99Ratio > 1.5 {
			miss = append(miss, fmt.Sprintf("p99 last/first %.2f", r.p99Ratio))
		}
		if r.dbRatio > 1.5 {
			miss = append(miss, fmt.Sprintf("db size last/first %.2f", r.dbRatio))
		}
	}
	return strings.Join(miss, ", ")
}

func (r *soakResult) print(out io.Writer, cfg soakConfig) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "t\tRSS MiB\theap MiB\tgoroutines\tfds\tdb MiB\tupdates\tjournal\teffects\tprocs\tattempts\tcompleted\tabandoned\tpending+processing\tfailed\tunacked exh\tp50\tp99\t")
	for _, s := range r.samples {
		fmt.Fprintf(tw, "%v\t%.1f\t%.1f\t%.0f\t%.0f\t%.1f\t%d\t%d\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%v\t%v\t\n", s.at, s.rss/(1<<20), s.heap/(1<<20), s.goroutines, s.fds,
			float64(s.dbBytes)/(1<<20), s.rows["updates"], s.rows["journal"], s.rows["effects"], s.rows["procs"], s.rows["attempts"],
			s.completed, s.abandoned, s.pending+s.processing, s.failedRows, s.unackExhs,
			s.p50.Round(100*time.Microsecond), s.p99.Round(100*time.Microsecond))
	}
	_ = tw.Flush()
	v := r.verdict(cfg)
	fmt.Fprintf(out, "RESULT soak store=%s duration=%v rate=%.0f updates=%d posts=%d oks=%d non200=%d lost=%d replies=%d replies_twice=%d exhaustions=%d reply_failures=%d drain_ms=%d max_update_rows=%d row_bound=%d max_journal_rows=%d max_attempt_rows=%d rss_ratio=%.2f goroutines_ratio=%.2f fds_ratio=%.2f db_ratio=%.2f p99_ratio=%.2f compared=%d/%d ok=%t\n",
		r.store, cfg.duration, cfg.rate, r.updates, r.posts, r.oks, r.non200, r.lost, r.replies, r.doubles, r.exhaustions, r.replyFailures,
		r.drain.Milliseconds(), r.maxRows, r.rowBound, r.maxJournalRows, r.maxAttemptRows, r.rssRatio, r.gorRatio, r.fdRatio, r.dbRatio, r.p99Ratio, r.firstN, r.lastN, v == "")
	if v != "" {
		fmt.Fprintf(out, "  missed: %s\n", v)
	}
}

// waitForCtx polls cond every 50 ms until it holds, d passes or ctx ends.
func waitForCtx(ctx context.Context, d time.Duration, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !cond() {
		if err := backoff.Sleep(ctx, 50*time.Millisecond); err != nil {
			return errTimeout
		}
	}
	return nil
}
