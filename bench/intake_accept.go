package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// Goals of the intake-accept scenario (from the issue).
const (
	acceptGoalSQLiteVsSingle = 3.0
	acceptGoalPGVsSingle     = 2.0
	acceptGoalVsCeiling      = 0.5
	acceptGoalP99            = 25 * time.Millisecond
)

// acceptSecret is the webhook secret the clients send.
const acceptSecret = "bench-secret-0123456789"

// acceptVariant is one server under test: a store behind the real webhook,
// or the non-durable ceiling.
type acceptVariant struct {
	key    string // RESULT key prefix
	label  string
	url    string
	client *http.Client
	store  intake.Store // nil for the ceiling and the floors
	// count counts a floor's recorded rows; nil for the others.
	count   func(ctx context.Context) (int64, error)
	posted  int64 // requests answered 200, warm-up included
	updates int
	elapsed time.Duration
	cpu     time.Duration // process CPU time (user+system) of the measured rounds
	// dbCPU reads the database processes' CPU time so far (nil: none of
	// their own); db is theirs over the measured rounds.
	dbCPU func() dbCPUTimes
	db    dbCPUTimes
	// dbBeside reports that dbCPU reads PostgreSQL while a variant of
	// another database (or none) runs: its CPU beside the variant.
	dbBeside bool
	lat      []time.Duration
	// Per measured round: updates/s and p99 latency.
	roundRate []float64
	roundP99  []time.Duration
	trace     *intakeBatchTrace // nil unless -trace-batches
}

// runIntakeAccept puts 100 concurrent webhook clients against the real
// intake webhook over loopback HTTP: group commit vs one transaction per
// update, on SQLite and PostgreSQL, and a non-durable channel handler as the
// ceiling, in alternating rounds.
func runIntakeAccept(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("intake-accept", flag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("n", 1200, "updates each variant receives per round")
	rounds := fs.Int("rounds", 5, "rounds; every round runs every variant once, in rotating order")
	clients := fs.Int("clients", 100, "concurrent HTTP clients")
	withPG := fs.Bool("pg", true, "also run on a throwaway PostgreSQL cluster")
	withSQLite := fs.Bool("sqlite", true, "run the SQLite variants (-sqlite=false: PostgreSQL's and the ceiling only)")
	pgConns := fs.Int("pg-conns", 32, "PostgreSQL pool size (the same for both PostgreSQL variants)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	contract := fs.Bool("floor-store", true, "also run each store's contract floors: the floor's handler with the row the guarantees ask for, on the bench's own least schema and recorded by intake's own store (AddBatch), without the webhook's checks and Accept")
	trace := fs.Bool("trace-batches", false, "report the size and commit time of every group commit batch")
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
	if *n < 1 || *rounds < 1 || *clients < 1 || *pgConns < 1 {
		return errors.New("-n, -rounds, -clients and -pg-conns must be at least 1")
	}
	if !*withSQLite && !*withPG {
		return errors.New("-sqlite=false and -pg=false leave nothing to measure")
	}

	backends, cleanup, err := intakeBackends(ctx, out, *withSQLite, *withPG, *pgConns)
	if err != nil {
		return err
	}
	defer cleanup()

	var (
		variants []*acceptVariant
		closers  []func()
	)
	defer func() {
		for _, c := range slices.Backward(closers) {
			c()
		}
	}()
	for _, b := range backends {
		for _, mode := range []string{"group", "single"} {
			store, release, err := b.open(ctx, "accept_"+mode)
			if err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			closers = append(closers, func() { release() })
			label := b.name + " group commit"
			var bt *intakeBatchTrace
			if mode == "single" {
				store = intakeSingleStore{store}
				label = b.name + " 1 tx per update"
			} else if *trace {
				bt = &intakeBatchTrace{Store: store}
				store = bt
			}
			v, stop, err := acceptServeWebhook(store, *cpuProfile != "")
			if err != nil {
				return err
			}
			closers = append(closers, stop)
			v.key, v.label, v.store, v.trace, v.dbCPU = b.name+"_"+mode, label, store, bt, b.dbCPU
			variants = append(variants, v)
		}
		// addFloor serves a floor over st (closed with the run) as the
		// variant key.
		addFloor := func(st floorStore, key, label string) error {
			closers = append(closers, st.close)
			v, stop, err := acceptServeFloor(st, *cpuProfile != "")
			if err != nil {
				return err
			}
			closers = append(closers, stop)
			v.key, v.label, v.dbCPU = key, label, b.dbCPU
			variants = append(variants, v)
			return nil
		}
		fl, err := b.floor(ctx)
		if err != nil {
			return fmt.Errorf("%s floor: %w", b.name, err)
		}
		if err := addFloor(fl, b.name+"_floor", b.name+" floor (bare insert)"); err != nil {
			return err
		}
		if *contract {
			fm, err := b.floorMin(ctx)
			if err != nil {
				return fmt.Errorf("%s least contract floor: %w", b.name, err)
			}
			if err := addFloor(fm, b.name+"_floor_min", b.name+" floor, least row"); err != nil {
				return err
			}
			store, release, err := b.open(ctx, "accept_floor_store")
			if err != nil {
				return fmt.Errorf("%s contract floor: %w", b.name, err)
			}
			fc, err := newFloorContractPending(store, func() { release() })
			if err != nil {
				return err
			}
			if err := addFloor(fc, b.name+"_floor_store", b.name+" floor, intake's store"); err != nil {
				return err
			}
		}
	}
	ceiling, stop, err := acceptServeCeiling(*cpuProfile != "")
	if err != nil {
		return err
	}
	closers = append(closers, stop)
	variants = append(variants, ceiling)
	// PostgreSQL's processes are read during every variant's rounds, so
	// the rounds of SQLite and of the ceiling show what the cluster spent
	// beside them (its WAL writer, checkpointer, autovacuum) on the same
	// two cores.
	for _, b := range backends {
		if b.dbCPU == nil {
			continue
		}
		for _, v := range variants {
			if v.dbCPU == nil {
				v.dbCPU, v.dbBeside = b.dbCPU, true
			}
		}
	}

	fmt.Fprintf(out, "intake-accept: %d clients POST distinct updates over loopback HTTP to the webhook handler\n", *clients)
	fmt.Fprintf(out, "%d updates per variant per round, %d rounds, variants alternate in rotating order; GOMAXPROCS=%d, load average %s\n",
		*n, *rounds, runtime.GOMAXPROCS(0), intakeLoadAverage())
	for _, b := range backends {
		fmt.Fprintf(out, "  %s: %s\n", b.name, b.about)
	}
	fmt.Fprintln(out, "  floor: the ceiling's handler, plus the update's row group-committed before the 200 in a bare table (primary key only; relay's floor store)")
	if *contract {
		fmt.Fprintln(out, "  floor, least row: the floor's handler and group commit, with the row the guarantees ask for (claim, lease, attempts, chat key) on the bench's own schema, one index on live rows (relay's floor-min store)")
		fmt.Fprintln(out, "  floor, intake's store: the floor's handler and group commit, with the row recorded by intake's own store (AddBatch: its columns, indexes and chat key), without the webhook's checks and Accept")
	}
	fmt.Fprintln(out, "  ceiling: a handler that reads the body and pushes it to a channel (nothing durable)")
	fmt.Fprintln(out, "  CPU µs/update: this process's CPU time (clients, server, SQLite) per update; PostgreSQL's own processes are not counted")
	fmt.Fprintln(out, "  PG CPU µs/update: PostgreSQL's processes' CPU time (postmaster, backends, background workers) per update, while the variant ran;")
	fmt.Fprintln(out, "    PG backends: its client backends' alone (the statements' work, without autovacuum and the WAL writer)")
	fmt.Fprintln(out, "    in brackets for the SQLite variants and the ceiling: what the cluster spent beside them, per update of theirs")

	var nextID atomic.Int64
	// Warm-up: open the keep-alive connections and the databases' caches.
	for _, v := range variants {
		if err := acceptFire(ctx, v, *clients, 2**clients, &nextID, false); err != nil {
			return fmt.Errorf("%s warm-up: %w", v.label, err)
		}
	}
	for _, v := range variants {
		if v.trace != nil {
			v.trace.reset()
		}
	}
	for r := range *rounds {
		for i := range variants {
			v := variants[(r+i)%len(variants)]
			if err := acceptFire(ctx, v, *clients, *n, &nextID, true); err != nil {
				return fmt.Errorf("%s round %d: %w", v.label, r+1, err)
			}
		}
	}

	// Every 200 must be a recorded row.
	for _, v := range variants {
		if v.count != nil {
			n, err := v.count(ctx)
			if err != nil {
				return fmt.Errorf("%s: count: %w", v.label, err)
			}
			if n != v.posted {
				return fmt.Errorf("%s: %d updates answered 200 but %d recorded", v.label, v.posted, n)
			}
		}
		if v.store == nil {
			continue
		}
		st, err := intakeRecorded(ctx, v.store)
		if err != nil {
			return err
		}
		if got := int64(st.Count[intake.StatePending]); got != v.posted {
			return fmt.Errorf("%s: %d updates answered 200 but %d recorded", v.label, v.posted, got)
		}
	}

	if *trace {
		fmt.Fprintln(out, "\ngroup commit batches (measured rounds):")
		for _, v := range variants {
			if v.trace != nil {
				v.trace.report(out, v.label)
			}
		}
	}

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "variant\tupdates/s\tp50 ms\tp99 ms\tCPU µs/update\tPG CPU µs/update\tPG backends\trecorded\t")
	res := map[string]*acceptVariant{}
	for _, v := range variants {
		slices.Sort(v.lat)
		res[v.key] = v
		recorded := "-"
		if v.store != nil || v.count != nil {
			recorded = fmt.Sprint(v.posted)
		}
		db, backends := "-", "-"
		if v.dbCPU != nil {
			per := func(d time.Duration) string {
				return fmt.Sprintf("%.1f", float64(d.Nanoseconds())/1e3/float64(max(v.updates, 1)))
			}
			db, backends = per(v.db.all), per(v.db.backends)
			if v.dbBeside {
				db, backends = "("+db+")", "("+backends+")"
			}
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%s\t%.0f\t%s\t%s\t%s\t\n", v.label, v.rate(),
			intakeMS(intakeQuantile(v.lat, 0.50)), intakeMS(intakeQuantile(v.lat, 0.99)),
			float64(v.cpu.Microseconds())/float64(max(v.updates, 1)), db, backends, recorded)
	}
	tw.Flush()

	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "measure\tvalue\tgoal\t")
	result := []string{"RESULT intake-accept"}
	kv := func(k string, format string, v float64) {
		result = append(result, fmt.Sprintf("%s="+format, k, v))
	}
	kv("ceiling_ups", "%.0f", ceiling.rate())
	for _, b := range backends {
		g, s, fl := res[b.name+"_group"], res[b.name+"_single"], res[b.name+"_floor"]
		goal := acceptGoalSQLiteVsSingle
		if b.name == "postgres" {
			goal = acceptGoalPGVsSingle
		}
		// Goals on ratios are judged on the median of per-round ratios: the
		// variants of one round run back to back, while a load spike from
		// another process skews the pooled totals of whichever variant it
		// hits. The pooled ratio is printed beside it.
		vsSingle := intakeMedianRatio(g.roundRate, s.roundRate)
		vsCeiling := intakeMedianRatio(g.roundRate, ceiling.roundRate)
		pooledSingle, pooledCeiling := g.rate()/s.rate(), g.rate()/ceiling.rate()
		p99 := intakeQuantile(g.lat, 0.99)
		fmt.Fprintf(tw, "%s group / 1 tx per update\t%.2fx (pooled %.2fx)\t>= %.1fx %s\t\n", b.name, vsSingle, pooledSingle, goal, intakeGoal(vsSingle >= goal))
		fmt.Fprintf(tw, "%s group / ceiling\t%.2fx (pooled %.2fx)\t>= %.1fx %s\t\n", b.name, vsCeiling, pooledCeiling, acceptGoalVsCeiling, intakeGoal(vsCeiling >= acceptGoalVsCeiling))
		vsFloor := intakeMedianRatio(g.roundRate, fl.roundRate)
		floorVsCeiling := intakeMedianRatio(fl.roundRate, ceiling.roundRate)
		fmt.Fprintf(tw, "%s floor / ceiling\t%.2fx (pooled %.2fx)\tany durable design's ceiling here\t\n", b.name, floorVsCeiling, fl.rate()/ceiling.rate())
		fmt.Fprintf(tw, "%s group / floor\t%.2fx (pooled %.2fx)\t\t\n", b.name, vsFloor, g.rate()/fl.rate())
		if fm := res[b.name+"_floor_min"]; fm != nil {
			minVsCeiling := intakeMedianRatio(fm.roundRate, ceiling.roundRate)
			fmt.Fprintf(tw, "%s floor with the least row / ceiling\t%.2fx (pooled %.2fx)\twhat the guarantees' row costs: %.2fx of the bare floor\t\n", b.name, minVsCeiling, fm.rate()/ceiling.rate(), intakeMedianRatio(fm.roundRate, fl.roundRate))
			fmt.Fprintf(tw, "%s group / floor with the least row\t%.2fx (pooled %.2fx)\t\t\n", b.name, intakeMedianRatio(g.roundRate, fm.roundRate), g.rate()/fm.rate())
			kv(b.name+"_floor_min_ups", "%.0f", fm.rate())
			kv(b.name+"_floor_min_vs_ceiling", "%.2f", minVsCeiling)
		}
		if fs := res[b.name+"_floor_store"]; fs != nil {
			storeVsCeiling := intakeMedianRatio(fs.roundRate, ceiling.roundRate)
			vsStore := intakeMedianRatio(g.roundRate, fs.roundRate)
			fmt.Fprintf(tw, "%s floor with intake's store / ceiling\t%.2fx (pooled %.2fx)\twhat the store's row costs: %.2fx of the bare floor\t\n", b.name, storeVsCeiling, fs.rate()/ceiling.rate(), intakeMedianRatio(fs.roundRate, fl.roundRate))
			fmt.Fprintf(tw, "%s group / floor with intake's store\t%.2fx (pooled %.2fx)\twhat the webhook and Accept cost\t\n", b.name, vsStore, g.rate()/fs.rate())
			kv(b.name+"_floor_store_ups", "%.0f", fs.rate())
			kv(b.name+"_floor_store_vs_ceiling", "%.2f", storeVsCeiling)
			kv(b.name+"_group_vs_floor_store", "%.2f", vsStore)
		}
		fmt.Fprintf(tw, "%s group p99 (all rounds pooled)\t%s ms\t<= %s ms %s\t\n", b.name, intakeMS(p99), intakeMS(acceptGoalP99), intakeGoal(p99 <= acceptGoalP99))
		rp := make([]string, len(g.roundP99))
		for i, d := range g.roundP99 {
			rp[i] = intakeMS(d)
		}
		fmt.Fprintf(tw, "%s group p99 per round\t%s ms\t\t\n", b.name, strings.Join(rp, " / "))
		kv(b.name+"_group_ups", "%.0f", g.rate())
		kv(b.name+"_single_ups", "%.0f", s.rate())
		kv(b.name+"_group_p50_ms", "%.2f", float64(intakeQuantile(g.lat, 0.5))/1e6)
		kv(b.name+"_group_p99_ms", "%.2f", float64(p99)/1e6)
		kv(b.name+"_single_p99_ms", "%.2f", float64(intakeQuantile(s.lat, 0.99))/1e6)
		kv(b.name+"_group_vs_single", "%.2f", vsSingle)
		kv(b.name+"_group_vs_ceiling", "%.2f", vsCeiling)
		kv(b.name+"_floor_ups", "%.0f", fl.rate())
		kv(b.name+"_floor_vs_ceiling", "%.2f", floorVsCeiling)
		kv(b.name+"_group_vs_floor", "%.2f", vsFloor)
		kv(b.name+"_group_vs_single_pooled", "%.2f", pooledSingle)
		kv(b.name+"_group_vs_ceiling_pooled", "%.2f", pooledCeiling)
	}
	tw.Flush()
	fmt.Fprintln(out)
	fmt.Fprintln(out, strings.Join(result, " "))
	return nil
}

func (v *acceptVariant) rate() float64 {
	if v.elapsed <= 0 {
		return 0
	}
	return float64(v.updates) / v.elapsed.Seconds()
}

// acceptServeWebhook serves the real intake webhook over store (runner
// created, not started: Accept records without handling) on a loopback
// port.
func acceptServeWebhook(store intake.Store, profile bool) (*acceptVariant, func(), error) {
	runner, err := intake.New(intake.Config{
		Store:   store,
		Handler: func(context.Context, intake.Update) error { return nil },
	})
	if err != nil {
		return nil, nil, err
	}
	hook, err := intake.NewWebhook(intake.WebhookConfig{Runner: runner, Secret: acceptSecret})
	if err != nil {
		return nil, nil, err
	}
	return acceptServe(hook, profile)
}

// acceptServeFloor serves the least durable work an intake cannot skip:
// the ceiling's handler, plus the update's row in st (a bare table), group
// committed before the 200 like intake's adds.
func acceptServeFloor(st floorStore, profile bool) (*acceptVariant, func(), error) {
	_, withChat := st.(floorChatStore)
	adds := &groupcommit.Group[floorRow, bool]{CommitFunc: st.add, Max: floorMaxBatch, Bound: floorCommitBound}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := acceptRead(w, r)
		if !ok {
			return
		}
		row, ok := floorParse(body, withChat)
		if !ok {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		if _, err := adds.Do(r.Context(), row); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	v, stop, err := acceptServe(h, profile)
	if err != nil {
		return nil, nil, err
	}
	v.count = st.count
	return v, stop, nil
}

// acceptRead reads a webhook POST's body under the intake's limit, as the
// ceiling and the floors do; it answers the request itself and reports
// false when there is nothing to record.
func acceptRead(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Method != http.MethodPost {
		w.WriteHeader(http.StatusMethodNotAllowed)
		return nil, false
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, intake.DefaultMaxBodyBytes))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return nil, false
	}
	return body, true
}

// acceptServeCeiling serves the non-durable baseline: read the body (under
// the same limit) and push it to a channel drained by one goroutine.
func acceptServeCeiling(profile bool) (*acceptVariant, func(), error) {
	ch := make(chan []byte, 1024)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		for range ch {
		}
	}()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := acceptRead(w, r)
		if !ok {
			return
		}
		ch <- body
		w.WriteHeader(http.StatusOK)
	})
	v, stop, err := acceptServe(h, profile)
	if err != nil {
		close(ch)
		return nil, nil, err
	}
	v.key, v.label = "ceiling", "ceiling (channel, not durable)"
	return v, func() { stop(); close(ch); <-drained }, nil
}

// acceptServe runs h on a real http.Server on 127.0.0.1:0 and returns a
// variant with a keep-alive client for it.
func acceptServe(h http.Handler, profile bool) (*acceptVariant, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	v := &acceptVariant{}
	if profile {
		// Server goroutines carry the variant's key as a profile label
		// (pprof -tagfocus variant=sqlite_group).
		inner := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pprof.SetGoroutineLabels(pprof.WithLabels(r.Context(), pprof.Labels("variant", v.key)))
			inner.ServeHTTP(w, r)
		})
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	tr := &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000, IdleConnTimeout: time.Minute}
	v.url, v.client = "http://"+ln.Addr().String()+"/telegram", &http.Client{Transport: tr, Timeout: time.Minute}
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-served
		tr.CloseIdleConnections()
	}
	return v, stop, nil
}

// acceptFire posts n distinct updates to v from clients goroutines and, when
// record is set, adds the wall time and the latencies to v.
func acceptFire(ctx context.Context, v *acceptVariant, clients, n int, nextID *atomic.Int64, record bool) error {
	var (
		left    atomic.Int64
		mu      sync.Mutex
		lat     = make([]time.Duration, 0, n)
		firstMu sync.Mutex
		first   error
	)
	left.Store(int64(n))
	fail := func(err error) {
		firstMu.Lock()
		if first == nil {
			first = err
		}
		firstMu.Unlock()
	}
	var wg sync.WaitGroup
	var db0 dbCPUTimes
	if v.dbCPU != nil {
		db0 = v.dbCPU()
	}
	cpu0 := intakeCPUTime()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("variant", v.key, "side", "client")))
			mine := make([]time.Duration, 0, n/clients+1)
			defer func() {
				mu.Lock()
				lat = append(lat, mine...)
				mu.Unlock()
			}()
			for left.Add(-1) >= 0 && ctx.Err() == nil {
				body := intakeUpdateBody(nextID.Add(1))
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.url, bytes.NewReader(body))
				if err != nil {
					fail(err)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(intake.SecretHeader, acceptSecret)
				t0 := time.Now()
				resp, err := v.client.Do(req)
				if err != nil {
					fail(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mine = append(mine, time.Since(t0))
				if resp.StatusCode != http.StatusOK {
					fail(fmt.Errorf("answered %s", resp.Status))
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := intakeCPUTime() - cpu0
	var db dbCPUTimes
	if v.dbCPU != nil {
		db1 := v.dbCPU()
		db = dbCPUTimes{all: db1.all - db0.all, backends: db1.backends - db0.backends}
	}
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	v.posted += int64(n)
	if record {
		v.updates += n
		v.elapsed += elapsed
		v.cpu += cpu
		v.db.all += db.all
		v.db.backends += db.backends
		v.lat = append(v.lat, lat...)
		v.roundRate = append(v.roundRate, float64(n)/elapsed.Seconds())
		slices.Sort(lat)
		v.roundP99 = append(v.roundP99, intakeQuantile(lat, 0.99))
	}
	return nil
}
