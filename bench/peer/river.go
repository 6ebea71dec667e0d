package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	_ "modernc.org/sqlite" // database/sql driver "sqlite", the one tgrelay's SQLite stores use

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// The variants of peer-river, in the order of the table.
const (
	varTgrelay    = "tgrelay Accept"
	varInsert     = "River Insert"
	varInsertMany = "River InsertMany"
)

var riverVariants = []string{varTgrelay, varInsert, varInsertMany}

const (
	// riverGoal is the goal: tgrelay's items/s at least this multiple of
	// River InsertMany's, on each engine.
	riverGoal = 1.2
	// riverSampleTimeout bounds one variant's measured run.
	riverSampleTimeout = 10 * time.Minute
	// riverStopTimeout bounds stopping a runner or a River client.
	riverStopTimeout = time.Minute
	// riverFetchCooldown is River's FetchCooldown by default: River's own
	// default (100 ms) lets a client fetch at most MaxWorkers jobs ten
	// times a second, so the scenario gives River a shorter one.
	riverFetchCooldown = river.FetchCooldownMin
	// riverKind is the River job kind of the measured items.
	riverKind = "tgrelay_peer_noop"
)

// riverOptions configure one peer-river run.
type riverOptions struct {
	items, producers, workers, batch, rounds, pgConns int
	pg, sqlite                                        bool
	fetchCooldown                                     time.Duration // River's Config.FetchCooldown
}

// riverSample is one variant's measured run on one engine.
type riverSample struct {
	elapsed  time.Duration   // first call to the last item's completion
	recorded time.Duration   // first call to the last call's return
	calls    []time.Duration // each producer call's duration
	ours     time.Duration   // this process's CPU (producers, runner or River client, SQLite)
	db       time.Duration   // the PostgreSQL cluster's CPU; -1 when not shown
	wal      int64           // WAL bytes written; -1 when not shown
	commits  int64           // transactions committed in the database; -1 when not shown
}

// riverEngine is a database the variants run on; sample runs one variant
// on a fresh, empty database of its own.
type riverEngine struct {
	name, about string
	sample      func(ctx context.Context, variant string, o riverOptions) (riverSample, error)
	close       func()
}

// runPeerRiver compares tgrelay's intake with River, the Go job queue a Go
// developer would otherwise pick: items, each recorded durably by one of
// the producers, then worked by a no-op handler. tgrelay records each item
// with Runner.Accept (every item accepted and answered on its own; the
// store group-commits concurrent calls) and its runner works them; River
// records them with Insert (one per call) or InsertMany (-batch per call)
// and its client works them. Every variant runs on a fresh database, round
// after round in a rotating order, on PostgreSQL and on SQLite.
func runPeerRiver(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("peer-river", flag.ContinueOnError)
	fs.SetOutput(out)
	var o riverOptions
	fs.IntVar(&o.items, "n", 20000, "items per variant and round")
	fs.IntVar(&o.producers, "producers", 64, "concurrent producers")
	fs.IntVar(&o.workers, "workers", 32, "workers (runner MaxConcurrent, River MaxWorkers)")
	fs.IntVar(&o.batch, "batch", 100, "items per River InsertMany call")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every variant once per engine, in rotating order")
	fs.IntVar(&o.pgConns, "pg-conns", 40, "PostgreSQL pool size, for each side")
	fs.DurationVar(&o.fetchCooldown, "river-fetch-cooldown", riverFetchCooldown, "River's FetchCooldown: its producer fetches at most once per this, up to MaxWorkers jobs (River's default is 100ms, which caps a no-op queue near MaxWorkers×10/s)")
	fs.BoolVar(&o.pg, "pg", true, "run on a throwaway PostgreSQL cluster")
	fs.BoolVar(&o.sqlite, "sqlite", true, "run on SQLite")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.items < 1 || o.producers < 1 || o.workers < 1 || o.batch < 1 || o.rounds < 1 || o.pgConns < 2 {
		return errors.New("-n, -producers, -workers, -batch and -rounds must be at least 1, -pg-conns at least 2")
	}
	if o.fetchCooldown < river.FetchCooldownMin {
		return fmt.Errorf("-river-fetch-cooldown must be at least %v", river.FetchCooldownMin)
	}
	if o.workers > intake.MaxMaxConcurrent {
		return fmt.Errorf("-workers must be at most %d", intake.MaxMaxConcurrent)
	}
	if !o.pg && !o.sqlite {
		return errors.New("nothing to run: -pg=false and -sqlite=false")
	}

	var engines []riverEngine
	defer func() {
		for _, e := range engines {
			e.close()
		}
	}()
	if o.pg {
		e, err := riverPostgres(ctx, out)
		if err != nil {
			return err
		}
		if e != nil {
			engines = append(engines, *e)
		}
	}
	if o.sqlite {
		e, err := riverSQLite()
		if err != nil {
			return err
		}
		engines = append(engines, *e)
	}
	if len(engines) == 0 {
		return errors.New("no engine to run on")
	}

	loadBefore := loadAverage()
	samples := map[string]map[string][]riverSample{} // engine → variant → rounds
	for _, e := range engines {
		samples[e.name] = map[string][]riverSample{}
	}
	for r := range o.rounds {
		for _, e := range engines {
			for i := range riverVariants {
				v := riverVariants[(i+r)%len(riverVariants)]
				s, err := e.sample(ctx, v, o)
				if err != nil {
					return fmt.Errorf("%s, %s, round %d: %w", e.name, v, r+1, err)
				}
				samples[e.name][v] = append(samples[e.name][v], s)
				fmt.Fprintf(out, "round %d, %s, %s: %.0f items/s (recorded in %.1f s, done in %.1f s), call p50 %.2f ms\n",
					r+1, e.name, v, rate(s, o.items), s.recorded.Seconds(), s.elapsed.Seconds(), msOf(quantile(s.calls, 0.50)))
			}
		}
	}
	loadAfter := loadAverage()

	fmt.Fprintf(out, "peer-river: %d items per variant and round, %d producers, %d workers, no-op handler; River InsertMany %d per call; %d rounds, rotating order, a fresh database each; GOMAXPROCS %d\n",
		o.items, o.producers, o.workers, o.batch, o.rounds, runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "machine: load average %s before, %s after\n", loadBefore, loadAfter)
	for _, e := range engines {
		fmt.Fprintf(out, "  %s: %s\n", e.name, e.about)
	}
	fmt.Fprintln(out, "  tgrelay: intake.Runner started, Runner.Accept per item (each answered on its own; concurrent calls share a commit), MaxConcurrent workers")
	fmt.Fprintf(out, "  River v0.51.2: client started, Insert per item or InsertMany per batch, default queue with MaxWorkers workers, FetchCooldown %v, defaults otherwise\n", o.fetchCooldown)
	fmt.Fprintln(out, "  items/s: first call to the last item's durable completion; recorded/s: first call to the last call's return; call p50/p99: each producer call (an InsertMany call carries a batch);")
	fmt.Fprintln(out, "  CPU per item: this process (producers, workers, SQLite) and the PostgreSQL cluster's processes; commits: every transaction, read-only ones included")

	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "engine\tvariant\titems/s\trecorded/s\tcall p50 ms\tcall p99 ms\tours µs/item\tdb µs/item\tWAL B/item\tcommits/item\ttgrelay vs it\t")
	result := []string{"RESULT peer-river"}
	var goals []string
	for _, e := range engines {
		ours := samples[e.name][varTgrelay]
		for _, v := range riverVariants {
			ss := samples[e.name][v]
			vs := "-"
			if v != varTgrelay {
				vs = fmt.Sprintf("%.2fx", pairedRatio(ours, ss, o.items))
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.2f\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t\n", e.name, v,
				medianOf(ss, func(s riverSample) float64 { return rate(s, o.items) }),
				medianOf(ss, func(s riverSample) float64 { return float64(o.items) / s.recorded.Seconds() }),
				medianOf(ss, func(s riverSample) float64 { return msOf(quantile(s.calls, 0.50)) }),
				medianOf(ss, func(s riverSample) float64 { return msOf(quantile(s.calls, 0.99)) }),
				medianOf(ss, func(s riverSample) float64 { return perItemMicros(s.ours, o.items) }),
				shown(ss, func(s riverSample) (float64, bool) { return perItemMicros(s.db, o.items), s.db >= 0 }, "%.0f"),
				shown(ss, func(s riverSample) (float64, bool) { return float64(s.wal) / float64(o.items), s.wal >= 0 }, "%.0f"),
				shown(ss, func(s riverSample) (float64, bool) { return float64(s.commits) / float64(o.items), s.commits >= 0 }, "%.3f"),
				vs)
			key := map[string]string{varTgrelay: "tgrelay", varInsert: "insert", varInsertMany: "insertmany"}[v]
			result = append(result,
				fmt.Sprintf("%s_%s_ips=%.0f", e.name, key, medianOf(ss, func(s riverSample) float64 { return rate(s, o.items) })),
				fmt.Sprintf("%s_%s_recorded_ips=%.0f", e.name, key, medianOf(ss, func(s riverSample) float64 { return float64(o.items) / s.recorded.Seconds() })),
				fmt.Sprintf("%s_%s_p50_ms=%.2f", e.name, key, medianOf(ss, func(s riverSample) float64 { return msOf(quantile(s.calls, 0.50)) })),
				fmt.Sprintf("%s_%s_p99_ms=%.2f", e.name, key, medianOf(ss, func(s riverSample) float64 { return msOf(quantile(s.calls, 0.99)) })))
		}
		many := pairedRatio(ours, samples[e.name][varInsertMany], o.items)
		one := pairedRatio(ours, samples[e.name][varInsert], o.items)
		result = append(result, fmt.Sprintf("%s_vs_insertmany=%.2f", e.name, many), fmt.Sprintf("%s_vs_insert=%.2f", e.name, one))
		goals = append(goals, fmt.Sprintf("%s %.2fx (>= %.1fx %s)", e.name, many, riverGoal, goalWord(many >= riverGoal)))
	}
	tw.Flush()
	fmt.Fprintf(out, "\ngoal, tgrelay vs River InsertMany (per-round ratios, median): %s\n", strings.Join(goals, ", "))
	result = append(result, "load1="+strings.Fields(loadAfter + " ?")[0])
	fmt.Fprintln(out)
	fmt.Fprintln(out, strings.Join(result, " "))
	return nil
}

// riverPostgres starts a throwaway durable PostgreSQL cluster (fsync and
// synchronous_commit on). It returns nil, after saying so on out, when
// PostgreSQL is not installed.
func riverPostgres(ctx context.Context, out io.Writer) (*riverEngine, error) {
	cluster, err := pgtest.Start(ctx, pgtest.Options{})
	if errors.Is(err, pgtest.ErrNotInstalled) {
		fmt.Fprintf(out, "postgres: UNAVAILABLE (apt-get install postgresql): %v\n", err)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	probe, err := newPGProbe(ctx, cluster)
	if err != nil {
		cluster.Stop()
		return nil, err
	}
	return &riverEngine{
		name:  "postgres",
		about: fmt.Sprintf("PostgreSQL %s local (Unix socket), fsync and synchronous_commit on; each side a pgx pool of its own, a new database per run", probe.version),
		sample: func(ctx context.Context, variant string, o riverOptions) (riverSample, error) {
			return samplePostgres(ctx, cluster, probe, variant, o)
		},
		close: func() {
			probe.close()
			cluster.Stop()
		},
	}, nil
}

// samplePostgres runs one variant on a new database of cluster.
func samplePostgres(ctx context.Context, cluster *pgtest.Cluster, probe *pgProbe, variant string, o riverOptions) (riverSample, error) {
	dbURL, err := cluster.CreateDatabase(ctx)
	if err != nil {
		return riverSample{}, err
	}
	defer cluster.DropDatabase(context.Background(), dbURL)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return riverSample{}, err
	}
	dbName := cfg.ConnConfig.Database
	cfg.MaxConns, cfg.MinConns = int32(o.pgConns), int32(o.pgConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return riverSample{}, err
	}
	closed := false
	defer func() {
		if !closed {
			pool.Close()
		}
	}()
	if err := warmPool(ctx, pool, o.pgConns); err != nil {
		return riverSample{}, err
	}
	var w *riverWork
	if variant == varTgrelay {
		store, err := pgstore.New(ctx, pool, pgstore.Config{})
		if err != nil {
			return riverSample{}, err
		}
		w, err = tgrelayWork(ctx, store, o)
		if err != nil {
			return riverSample{}, err
		}
	} else {
		w, err = riverClientWork(ctx, riverpgxv5.New(pool), variant == varInsertMany, o, func(ctx context.Context) (int64, error) {
			var n int64
			err := pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
			return n, err
		})
		if err != nil {
			return riverSample{}, err
		}
	}

	commits0, err := probe.commits(ctx, dbName)
	if err != nil {
		return riverSample{}, err
	}
	lsn0, err := probe.lsn(ctx)
	if err != nil {
		return riverSample{}, err
	}
	db0, err := probe.cpu()
	if err != nil {
		return riverSample{}, err
	}
	s, err := w.measure(ctx, o)
	if err != nil {
		w.stop()
		return riverSample{}, err
	}
	db1, err := probe.cpu()
	if err != nil {
		return riverSample{}, err
	}
	if s.wal, err = probe.walSince(ctx, lsn0); err != nil {
		return riverSample{}, err
	}
	s.db = db1 - db0
	if err := w.stop(); err != nil {
		return riverSample{}, err
	}
	if err := w.verify(ctx); err != nil {
		return riverSample{}, err
	}
	// Backends flush their statistics as they end: close the pool and wait
	// for them before reading the commits.
	pool.Close()
	closed = true
	if err := probe.waitIdle(ctx, dbName); err != nil {
		return riverSample{}, err
	}
	commits1, err := probe.commits(ctx, dbName)
	if err != nil {
		return riverSample{}, err
	}
	s.commits = commits1 - commits0
	return s, nil
}

// warmPool opens all n connections of pool before a run, so that no run
// pays for connecting.
func warmPool(ctx context.Context, pool *pgxpool.Pool, n int) error {
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("postgres: warm the pool: %w", err)
		}
		conns = append(conns, c)
	}
	return nil
}

// riverSQLite runs each variant on a new SQLite file in WAL mode with
// synchronous=FULL.
func riverSQLite() (*riverEngine, error) {
	dir, err := os.MkdirTemp("", "tgrelay-bench-peer-")
	if err != nil {
		return nil, err
	}
	var files atomic.Int64
	return &riverEngine{
		name:  "sqlite",
		about: "SQLite (modernc) WAL, synchronous=FULL, a new file per run; tgrelay: sqlitestore (one writer connection); River: riversqlite on a database/sql pool of one connection, as its docs advise",
		sample: func(ctx context.Context, variant string, o riverOptions) (riverSample, error) {
			path := filepath.Join(dir, fmt.Sprintf("run%d.db", files.Add(1)))
			defer func() {
				for _, suffix := range []string{"", "-wal", "-shm"} {
					os.Remove(path + suffix)
				}
			}()
			return sampleSQLite(ctx, path, variant, o)
		},
		close: func() { os.RemoveAll(dir) },
	}, nil
}

// sampleSQLite runs one variant on a new SQLite file at path.
func sampleSQLite(ctx context.Context, path, variant string, o riverOptions) (riverSample, error) {
	var w *riverWork
	if variant == varTgrelay {
		store, err := sqlitestore.Open(ctx, path, sqlitestore.Config{Synchronous: "FULL"})
		if err != nil {
			return riverSample{}, err
		}
		defer store.Close()
		if w, err = tgrelayWork(ctx, store, o); err != nil {
			return riverSample{}, err
		}
	} else {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
		if err != nil {
			return riverSample{}, err
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		w, err = riverClientWork(ctx, riversqlite.New(db), variant == varInsertMany, o, func(ctx context.Context) (int64, error) {
			var n int64
			err := db.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
			return n, err
		})
		if err != nil {
			return riverSample{}, err
		}
	}
	s, err := w.measure(ctx, o)
	if err != nil {
		w.stop()
		return riverSample{}, err
	}
	s.db, s.wal, s.commits = -1, -1, -1
	if err := w.stop(); err != nil {
		return riverSample{}, err
	}
	return s, w.verify(ctx)
}

// riverWork is one variant, ready to run: its worker side started.
type riverWork struct {
	perCall int                                         // items per producer call
	produce func(ctx context.Context, lo, hi int) error // records items lo+1..hi in one call
	done    <-chan struct{}                             // closed at the last item's completion
	worked  func() int64                                // items completed so far
	stop    func() error                                // stops the worker side
	verify  func(ctx context.Context) error             // every item completed once, durably
}

// measure runs the producers over every item and waits for the last
// completion.
func (w *riverWork) measure(ctx context.Context, o riverOptions) (riverSample, error) {
	ctx, cancel := context.WithTimeout(ctx, riverSampleTimeout)
	defer cancel()
	calls := (o.items + w.perCall - 1) / w.perCall
	var (
		next    atomic.Int64
		wg      sync.WaitGroup
		mu      sync.Mutex
		lats    = make([]time.Duration, 0, calls)
		errOnce sync.Once
		first   error
	)
	cpu0 := processCPU()
	start := time.Now()
	for range o.producers {
		wg.Go(func() {
			mine := make([]time.Duration, 0, calls/o.producers+1)
			defer func() {
				mu.Lock()
				lats = append(lats, mine...)
				mu.Unlock()
			}()
			for ctx.Err() == nil {
				k := int(next.Add(1)) - 1
				if k >= calls {
					return
				}
				t0 := time.Now()
				if err := w.produce(ctx, k*w.perCall, min(o.items, (k+1)*w.perCall)); err != nil {
					errOnce.Do(func() { first = err })
					cancel()
					return
				}
				mine = append(mine, time.Since(t0))
			}
		})
	}
	wg.Wait()
	recorded := time.Since(start)
	if first != nil {
		return riverSample{}, first
	}
	select {
	case <-w.done:
	case <-ctx.Done():
		return riverSample{}, fmt.Errorf("%d of %d items completed: %w", w.worked(), o.items, ctx.Err())
	}
	elapsed := time.Since(start)
	ours := processCPU() - cpu0
	return riverSample{elapsed: elapsed, recorded: recorded, calls: lats, ours: ours}, nil
}

// peerUpdate is a realistic private-chat text message update, each on its
// own chat: the item both sides record.
func peerUpdate(id int) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"Ada","language_code":"en"},"chat":{"id":%d,"first_name":"Ada","type":"private"},"date":1764417600,"text":"hello from the peer benchmark"}}`,
		id, id, 100000+id, 100000+id)
}

// tgrelayWork starts an intake Runner on store whose handler does nothing;
// producers record items with Runner.Accept, one call per item.
func tgrelayWork(ctx context.Context, store intake.Store, o riverOptions) (*riverWork, error) {
	var (
		completed, handled, failures atomic.Int64
		done                         = make(chan struct{})
	)
	r, err := intake.New(intake.Config{
		Store: store,
		Handler: func(context.Context, intake.Update) error {
			handled.Add(1)
			return nil
		},
		MaxConcurrent: o.workers,
		Observer: intake.Observer{
			SettleFunc: func(_ intake.Identity, s intake.State) {
				if s == intake.StateCompleted && completed.Add(1) == int64(o.items) {
					close(done)
				}
			},
			FailureFunc:    func(intake.Failure) { failures.Add(1) },
			StoreErrorFunc: func(intake.Step, int64, error) { failures.Add(1) },
		},
	})
	if err != nil {
		return nil, err
	}
	if err := r.Start(ctx); err != nil {
		return nil, err
	}
	return &riverWork{
		perCall: 1,
		produce: func(ctx context.Context, lo, hi int) error {
			for id := lo + 1; id <= hi; id++ {
				a, err := r.Accept(ctx, peerUpdate(id))
				if err != nil {
					return err
				}
				if a != intake.Accepted {
					return fmt.Errorf("update %d: %v, not accepted", id, a)
				}
			}
			return nil
		},
		done:   done,
		worked: completed.Load,
		stop: func() error {
			ctx, cancel := context.WithTimeout(context.Background(), riverStopTimeout)
			defer cancel()
			return r.Close(ctx)
		},
		verify: func(ctx context.Context) error {
			admin, ok := store.(intake.AdminStore)
			if !ok {
				return fmt.Errorf("%T has no Stats", store)
			}
			st, err := admin.Stats(ctx)
			if err != nil {
				return err
			}
			if c := st.Count[intake.StateCompleted]; c != o.items {
				return fmt.Errorf("tgrelay: %d of %d items completed (%v)", c, o.items, st.Count)
			}
			if h := handled.Load(); h != int64(o.items) {
				return fmt.Errorf("tgrelay: handler ran %d times for %d items", h, o.items)
			}
			if f := failures.Load(); f > 0 {
				return fmt.Errorf("tgrelay: %d failures or store errors", f)
			}
			return nil
		},
	}, nil
}

// peerArgs is the River job: the same update tgrelay records.
type peerArgs struct {
	Update json.RawMessage `json:"update"`
}

// Kind names the job kind for River.
func (peerArgs) Kind() string { return riverKind }

// riverClientWork migrates River's tables through driver and starts a
// client whose worker does nothing; producers record items with Insert, or
// with InsertMany of o.batch when many is set. completedRows counts the
// completed rows in the database.
func riverClientWork[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], many bool, o riverOptions, completedRows func(context.Context) (int64, error)) (*riverWork, error) {
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("river migrate: %w", err)
	}
	var handled, completed atomic.Int64
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[peerArgs]) error {
		handled.Add(1)
		return nil
	}))
	client, err := river.NewClient(driver, &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: o.workers}},
		Workers:       workers,
		FetchCooldown: o.fetchCooldown,
		Logger:        slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return nil, err
	}
	// Room for every item's event: a full channel drops events.
	events, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: o.items + 1, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	done := make(chan struct{})
	go func() {
		for range events {
			if completed.Add(1) == int64(o.items) {
				close(done)
			}
		}
	}()
	if err := client.Start(ctx); err != nil {
		unsubscribe()
		return nil, err
	}
	w := &riverWork{
		perCall: 1,
		produce: func(ctx context.Context, lo, hi int) error {
			for id := lo + 1; id <= hi; id++ {
				if _, err := client.Insert(ctx, peerArgs{Update: peerUpdate(id)}, nil); err != nil {
					return err
				}
			}
			return nil
		},
		done:   done,
		worked: completed.Load,
		stop: func() error {
			defer unsubscribe()
			ctx, cancel := context.WithTimeout(context.Background(), riverStopTimeout)
			defer cancel()
			return client.Stop(ctx)
		},
		verify: func(ctx context.Context) error {
			n, err := completedRows(ctx)
			if err != nil {
				return err
			}
			if n != int64(o.items) {
				return fmt.Errorf("river: %d of %d jobs completed", n, o.items)
			}
			if h := handled.Load(); h != int64(o.items) {
				return fmt.Errorf("river: worker ran %d times for %d jobs", h, o.items)
			}
			return nil
		},
	}
	if many {
		w.perCall = o.batch
		w.produce = func(ctx context.Context, lo, hi int) error {
			params := make([]river.InsertManyParams, 0, hi-lo)
			for id := lo + 1; id <= hi; id++ {
				params = append(params, river.InsertManyParams{Args: peerArgs{Update: peerUpdate(id)}})
			}
			res, err := client.InsertMany(ctx, params)
			if err != nil {
				return err
			}
			if len(res) != len(params) {
				return fmt.Errorf("river: InsertMany inserted %d of %d", len(res), len(params))
			}
			return nil
		}
	}
	return w, nil
}

// rate is a sample's items per second.
func rate(s riverSample, items int) float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(items) / s.elapsed.Seconds()
}

// pairedRatio is the median over rounds of a's rate divided by b's in the
// same round: robust to the machine's drift between rounds.
func pairedRatio(a, b []riverSample, items int) float64 {
	var rs []float64
	for i := range min(len(a), len(b)) {
		if rb := rate(b[i], items); rb > 0 {
			rs = append(rs, rate(a[i], items)/rb)
		}
	}
	return median(rs)
}

// medianOf is the median of f over the samples.
func medianOf(ss []riverSample, f func(riverSample) float64) float64 {
	vs := make([]float64, 0, len(ss))
	for _, s := range ss {
		vs = append(vs, f(s))
	}
	return median(vs)
}

// shown formats the median of f over the samples that have the value, or
// "-" when the engine does not show it.
func shown(ss []riverSample, f func(riverSample) (float64, bool), format string) string {
	var vs []float64
	for _, s := range ss {
		if v, ok := f(s); ok {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return "-"
	}
	return fmt.Sprintf(format, median(vs))
}

// median is the median of vs (the mean of the middle two for an even
// count), or 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	vs = slices.Clone(vs)
	slices.Sort(vs)
	if len(vs)%2 == 1 {
		return vs[len(vs)/2]
	}
	return (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
}

// quantile is the q quantile of ds (nearest rank), or 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[max(0, min(i, len(s)-1))]
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func perItemMicros(d time.Duration, items int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(items)
}

// goalWord renders whether a measured value meets its goal.
func goalWord(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}
