package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// Defaults of the relay-scale scenario.
const (
	scaleDefaultUpdates      = 2000
	scaleDefaultRounds       = 3
	scaleDefaultProcs        = "1,2,3"
	scaleDefaultTakeoverN    = 600
	scaleDefaultTakeoverRate = 100
	// scaleDefaultHold is how long the takeover's endpoint holds each
	// forward, so the killed process has forwards in flight.
	scaleDefaultHold = 200 * time.Millisecond
	// scaleMaxProcs bounds -procs.
	scaleMaxProcs = 8
	// scaleTakeoverSlack is waited for the held updates beyond the lease,
	// the pending grace and one sweep.
	scaleTakeoverSlack = time.Minute
	// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
	// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
	clockTicks = 100
)

// scaleOptions configure one relay-scale run.
type scaleOptions struct {
	bin             string
	procs           []int
	updates, rounds int
	conns, chats    int
	concurrency     int
	takeover        bool
	takeoverN       int
	takeoverRate    float64
	hold            time.Duration
	lease, grace    time.Duration // zero: serve's defaults
	sweep           time.Duration
	serveArgs       []string // extra serve flags, as given
	dir             string
}

// runRelayScale measures 1, 2 and 3 `tgrelay serve` processes on one
// PostgreSQL behind a round-robin loopback proxy: updates/s, the CPU the
// relays and PostgreSQL spend over each measured run (utime+stime from
// /proc), and, with -takeover, how long the updates a SIGKILLed process
// held take to be forwarded again by the others.
//
// The configurations run alternately, round by round, each on its own
// database in one durable cluster (fsync on), behind its own proxy, so a
// drifting machine load touches all of them alike; the baseline of the
// ratio is one serve. The load generator and the endpoint are the relay
// scenario's (relay_load.go); the proxy and the processes are crash-pg's.
func runRelayScale(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("relay-scale", flag.ContinueOnError)
	fs.SetOutput(out)
	o := scaleOptions{}
	procs := fs.String("procs", scaleDefaultProcs, "comma-separated serve counts to compare (each 1.."+strconv.Itoa(scaleMaxProcs)+")")
	fs.IntVar(&o.updates, "updates", scaleDefaultUpdates, "updates per measured run")
	fs.IntVar(&o.rounds, "rounds", scaleDefaultRounds, "rounds; each runs every configuration once, alternating")
	fs.IntVar(&o.conns, "conns", relayDefaultConns, "concurrent webhook connections (Telegram's max_connections)")
	fs.IntVar(&o.chats, "chats", relayDefaultChats, "chats the updates are spread over")
	fs.IntVar(&o.concurrency, "concurrency", 0, "serve --concurrency (0: serve's default)")
	fs.BoolVar(&o.takeover, "takeover", true, "measure the takeover after a SIGKILL (with the largest -procs)")
	fs.IntVar(&o.takeoverN, "takeover-updates", scaleDefaultTakeoverN, "updates of the takeover's stream")
	fs.Float64Var(&o.takeoverRate, "takeover-rate", scaleDefaultTakeoverRate, "updates per second of the takeover's stream")
	fs.DurationVar(&o.hold, "hold", scaleDefaultHold, "how long the takeover's endpoint holds each forward")
	fs.DurationVar(&o.lease, "lease", 0, "serve --lease (0: serve's default); the takeover waits for it")
	fs.DurationVar(&o.grace, "pending-grace", 0, "serve --pending-grace (0: serve's default)")
	fs.DurationVar(&o.sweep, "sweep-interval", 0, "serve --sweep-interval (0: serve's default)")
	fs.Func("serve-arg", "an extra `flag` for every serve, such as --heartbeat-timeout=5s (repeatable)", func(v string) error {
		if !strings.HasPrefix(v, "-") {
			return errors.New("want a flag, such as --lease=10s")
		}
		o.serveArgs = append(o.serveArgs, v)
		return nil
	})
	timeout := fs.Duration("timeout", 10*time.Minute, "bound of the whole run")
	fs.StringVar(&o.bin, "bin", "", "tgrelay binary (default: built into a temp dir)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var err error
	if o.procs, err = parseProcs(*procs); err != nil {
		return err
	}
	if o.updates < 1 || o.rounds < 1 || o.conns < 1 || o.chats < 1 || o.concurrency < 0 || o.takeoverN < 2 || o.takeoverRate <= 0 || o.hold < 0 {
		return errors.New("-updates, -rounds, -conns, -chats, -takeover-rate must be positive, -takeover-updates at least 2, -concurrency and -hold not negative")
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if o.dir, err = os.MkdirTemp("", "tgrelay-bench-relay-scale-"); err != nil {
		return err
	}
	defer os.RemoveAll(o.dir)
	if o.bin, err = buildTgrelay(ctx, o.dir, o.bin, out); err != nil {
		return err
	}
	res, err := relayScaleRun(ctx, o, out)
	if err != nil {
		return err
	}
	return res.print(out, o)
}

// parseProcs reads -procs.
func parseProcs(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > scaleMaxProcs || slices.Contains(out, n) {
			return nil, fmt.Errorf("-procs: %q is not a list of distinct counts 1..%d", s, scaleMaxProcs)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// scaleGroup is n serve processes on one database behind one proxy.
type scaleGroup struct {
	n       int
	procs   []*crashServe
	proxy   *roundRobin
	results []scaleRun
}

// scaleRun is one measured run of a group.
type scaleRun struct {
	relayResult
	relayCPU, pgCPU, benchCPU time.Duration
	machineCPU, iowait        time.Duration
}

func (r scaleRun) cores(d time.Duration) float64 { return d.Seconds() / r.forwarded.Seconds() }

// median returns the run with the median rate.
func (g *scaleGroup) median() scaleRun {
	rs := slices.Clone(g.results)
	slices.SortFunc(rs, func(a, b scaleRun) int {
		switch {
		case a.rate() < b.rate():
			return -1
		case a.rate() > b.rate():
			return 1
		}
		return 0
	})
	return rs[len(rs)/2]
}

func (g *scaleGroup) pids() []int {
	var pids []int
	for _, p := range g.procs {
		if p.cmd != nil {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	return pids
}

func (g *scaleGroup) stop() {
	if g.proxy != nil {
		g.proxy.close()
	}
	var wg sync.WaitGroup
	for _, p := range g.procs {
		wg.Go(p.stop)
	}
	wg.Wait()
}

// scaleResult is what relayScaleRun measured.
type scaleResult struct {
	groups   []*scaleGroup
	takeover *takeoverResult // nil without -takeover
	loadAvg  [2]string       // at the start and the end
}

// serveFlags are the flags every serve of the scenario gets.
func (o scaleOptions) serveFlags(db, api, forward string) []string {
	a := []string{"--db", db, "--api-root", api, "--forward", forward, "--webhook-check-interval", "0", "--log-level", "warn"}
	if o.concurrency > 0 {
		a = append(a, "--concurrency", strconv.Itoa(o.concurrency))
	}
	if o.lease > 0 {
		a = append(a, "--lease", o.lease.String())
	}
	if o.grace > 0 {
		a = append(a, "--pending-grace", o.grace.String())
	}
	if o.sweep > 0 {
		a = append(a, "--sweep-interval", o.sweep.String())
	}
	return append(a, o.serveArgs...)
}

// relayScaleRun is the scenario proper, shared with its short test.
func relayScaleRun(ctx context.Context, o scaleOptions, out io.Writer) (*scaleResult, error) {
	res := &scaleResult{}
	res.loadAvg[0] = loadAverage()
	cluster, err := pgtest.Start(ctx, pgtest.Options{}) // durable: fsync on
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer cluster.Stop()
	postmaster, err := postmasterPID(cluster)
	if err != nil {
		return nil, err
	}
	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}}) // serve needs a Bot API at start
	defer tg.Close()
	sink, err := startRelaySink()
	if err != nil {
		return nil, err
	}
	defer sink.close()
	env := childEnv("TGRELAY_TOKEN="+tg.Token, "TGRELAY_WEBHOOK_SECRET="+relaySecret)

	fmt.Fprintf(out, "relay-scale: %v serve on one PostgreSQL (fsync on) behind a round-robin proxy; %d updates per run over %d chats, %d webhook connections, %d rounds; %d CPUs, load average %s\n",
		o.procs, o.updates, o.chats, o.conns, o.rounds, runtime.NumCPU(), res.loadAvg[0])
	if len(o.serveArgs) > 0 {
		fmt.Fprintf(out, "  extra serve flags: %s\n", strings.Join(o.serveArgs, " "))
	}
	for _, n := range o.procs {
		g := &scaleGroup{n: n}
		res.groups = append(res.groups, g)
		defer g.stop()
		db, err := cluster.CreateDatabase(ctx)
		if err != nil {
			return nil, err
		}
		for i := range n {
			s, err := newCrashServe(fmt.Sprintf("g%d-serve-%d", n, i+1), o.bin, o.dir, o.serveFlags(db, tg.URL, sink.url), env)
			if err != nil {
				return nil, err
			}
			g.procs = append(g.procs, s)
			if err := s.start(ctx, true); err != nil {
				return nil, err
			}
		}
		if g.proxy, err = startRoundRobin(g.procs); err != nil {
			return nil, err
		}
	}
	gen := newRelayLoad(o.conns, o.chats)
	defer gen.close()
	for _, g := range res.groups { // warm-up: connections, caches, table pages
		if _, err := gen.run(ctx, sink, g.proxy.url, min(o.updates, 300)); err != nil {
			return nil, fmt.Errorf("%d serve warm-up: %w", g.n, err)
		}
	}
	for r := 1; r <= o.rounds; r++ {
		for _, g := range res.groups {
			before, err := cpuSnapshot(g.pids(), postmaster)
			if err != nil {
				return nil, err
			}
			run, err := gen.run(ctx, sink, g.proxy.url, o.updates)
			if err != nil {
				return nil, fmt.Errorf("%d serve round %d: %w", g.n, r, err)
			}
			after, err := cpuSnapshot(g.pids(), postmaster)
			if err != nil {
				return nil, err
			}
			sr := scaleRun{relayResult: run, relayCPU: after.relays - before.relays, pgCPU: after.postgres - before.postgres, benchCPU: after.bench - before.bench,
				machineCPU: after.machine - before.machine, iowait: after.iowait - before.iowait}
			g.results = append(g.results, sr)
			fmt.Fprintf(out, "round %d  %d serve  %6.0f updates/s  relays %.2f cores, postgres %.2f, bench %.2f, machine busy %.2f, iowait %.2f  (p50 %v, p99 %v, re-posts %d, duplicates %d)\n",
				r, g.n, sr.rate(), sr.cores(sr.relayCPU), sr.cores(sr.pgCPU), sr.cores(sr.benchCPU), sr.cores(sr.machineCPU), sr.cores(sr.iowait),
				sr.p50.Round(100*time.Microsecond), sr.p99.Round(100*time.Microsecond), sr.reposts, sr.duplicates)
		}
	}
	for _, g := range res.groups { // free the machine for the takeover
		g.stop()
	}
	if o.takeover {
		n := o.procs[len(o.procs)-1]
		if n < 2 {
			fmt.Fprintln(out, "takeover: skipped (it needs at least 2 serve)")
		} else {
			db, err := cluster.CreateDatabase(ctx)
			if err != nil {
				return nil, err
			}
			if res.takeover, err = measureTakeover(ctx, o, n, db, tg.URL, env, out); err != nil {
				return nil, err
			}
		}
	}
	res.loadAvg[1] = loadAverage()
	return res, nil
}

// print writes the table and the RESULT line.
func (r *scaleResult) print(out io.Writer, o scaleOptions) error {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "serve\tmedian updates/s\tvs %d serve (median of rounds)\trelay cores\tpostgres cores\tbench cores\tmachine busy\tiowait\trelay CPU/update\tpostgres CPU/update\tp50 latency\tp99 latency\t\n", r.groups[0].n)
	for _, g := range r.groups {
		m := g.median()
		fmt.Fprintf(tw, "%d\t%.0f\t%.2fx\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%v\t%v\t%v\t%v\t\n", g.n, m.rate(), r.ratio(g),
			m.cores(m.relayCPU), m.cores(m.pgCPU), m.cores(m.benchCPU), m.cores(m.machineCPU), m.cores(m.iowait),
			perUpdate(m.relayCPU, m.n), perUpdate(m.pgCPU, m.n), m.p50.Round(100*time.Microsecond), m.p99.Round(100*time.Microsecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	kv := []string{"procs=" + joinInts(o.procs), "updates=" + strconv.Itoa(o.updates), "rounds=" + strconv.Itoa(o.rounds),
		"conns=" + strconv.Itoa(o.conns), "chats=" + strconv.Itoa(o.chats), "cpus=" + strconv.Itoa(runtime.NumCPU())}
	for _, g := range r.groups {
		m := g.median()
		kv = append(kv, fmt.Sprintf("ups_%d=%.0f scale_%d=%.2f relay_cores_%d=%.2f pg_cores_%d=%.2f machine_busy_%d=%.2f", g.n, m.rate(), g.n, r.ratio(g),
			g.n, m.cores(m.relayCPU), g.n, m.cores(m.pgCPU), g.n, m.cores(m.machineCPU)))
	}
	if t := r.takeover; t != nil {
		fmt.Fprintln(out)
		t.print(out)
		kv = append(kv, fmt.Sprintf("takeover_procs=%d takeover_held=%d takeover_missing=%d takeover_p50_ms=%d takeover_max_ms=%d lease_s=%.0f",
			t.procs, len(t.held), t.missing, t.p50.Milliseconds(), t.max.Milliseconds(), t.lease.Seconds()))
	}
	fmt.Fprintf(out, "load average: %s at the start, %s at the end\n", r.loadAvg[0], r.loadAvg[1])
	kv = append(kv, "load="+strings.ReplaceAll(r.loadAvg[1], " ", "/"))
	fmt.Fprintf(out, "RESULT relay-scale %s\n", strings.Join(kv, " "))
	return nil
}

// ratio is the median over rounds of g's rate over the first group's in
// the same round: the groups of one round ran back to back, so a drifting
// machine load touches both sides of each ratio alike.
func (r *scaleResult) ratio(g *scaleGroup) float64 {
	base := r.groups[0]
	var xs []float64
	for i := range min(len(g.results), len(base.results)) {
		xs = append(xs, g.results[i].rate()/base.results[i].rate())
	}
	return median(xs)
}

func perUpdate(d time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return (d / time.Duration(n)).Round(time.Microsecond)
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// cpuTimes is CPU time spent so far.
type cpuTimes struct {
	relays   time.Duration // the serve processes given
	postgres time.Duration // the postmaster and its children, reaped ones included
	bench    time.Duration // this process (load generator, proxy, endpoint)
	machine  time.Duration // every CPU of the machine, busy (other agents included)
	iowait   time.Duration // every CPU of the machine, idle waiting for I/O
}

// cpuSnapshot reads utime+stime of the serve pids, of the PostgreSQL
// server (the postmaster and its live children, each backend its own
// session leader, plus the postmaster's cutime+cstime, so backends that
// ended are counted), and of this process.
func cpuSnapshot(serves []int, postmaster int) (cpuTimes, error) {
	var t cpuTimes
	for _, pid := range serves {
		st, err := readProcStat(pid)
		if err != nil {
			return t, err
		}
		t.relays += st.cpu
	}
	self, err := readProcStat(os.Getpid())
	if err != nil {
		return t, err
	}
	t.bench = self.cpu
	if t.machine, t.iowait, err = machineCPU(); err != nil {
		return t, err
	}
	pg, err := pgServerCPU(postmaster)
	if err != nil {
		return t, err
	}
	t.postgres = pg.all
	return t, nil
}

// machineCPU reads the busy and iowait time of all CPUs from /proc/stat's
// first line (user nice system idle iowait irq softirq steal …).
func machineCPU() (busy, iowait time.Duration, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, errors.New("/proc/stat: no cpu line")
	}
	var v [8]int64
	for i := range v {
		if v[i], err = strconv.ParseInt(f[i+1], 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/stat: %w", err)
		}
	}
	tick := time.Second / clockTicks
	return time.Duration(v[0]+v[1]+v[2]+v[5]+v[6]+v[7]) * tick, time.Duration(v[4]) * tick, nil
}

// procStat is the part of /proc/<pid>/stat the scenario reads.
type procStat struct {
	ppid     int
	cpu      time.Duration // utime + stime
	children time.Duration // cutime + cstime: reaped children
}

// readProcStat parses /proc/<pid>/stat (proc(5)): the command name is in
// parentheses and may hold spaces, so fields are counted after the last ')'.
func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("proc stat: no command name")
	}
	// After ")": state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return procStat{}, errors.New("proc stat: too few fields")
	}
	num := func(k int) (int64, error) { return strconv.ParseInt(f[k-3], 10, 64) }
	var v [5]int64
	for j, k := range []int{4, 14, 15, 16, 17} {
		x, err := num(k)
		if err != nil {
			return procStat{}, fmt.Errorf("proc stat field %d: %w", k, err)
		}
		v[j] = x
	}
	tick := time.Second / clockTicks
	return procStat{ppid: int(v[0]), cpu: time.Duration(v[1]+v[2]) * tick, children: time.Duration(v[3]+v[4]) * tick}, nil
}

// postmasterPID reads the server's pid from postmaster.pid in its data
// directory.
func postmasterPID(c *pgtest.Cluster) (int, error) {
	if c.Dir() == "" {
		return 0, errors.New("postgres: an attached server: its CPU cannot be read")
	}
	b, err := os.ReadFile(filepath.Join(c.Dir(), "data", "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("postgres pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return 0, fmt.Errorf("postgres pid: %w", err)
	}
	return pid, nil
}

// takeoverResult is the takeover measured after one serve was killed.
type takeoverResult struct {
	procs, victim int
	held          []int64 // updates the killed process held at the kill
	inFlight      int     // of which it was forwarding at the kill
	missing       int     // held updates not forwarded again within the bound
	p50, max      time.Duration
	again         int // updates answered before the kill but forwarded again after it (not settled in time)
	lease         time.Duration
	wait          time.Duration // the bound the held updates were waited for
}

func (t *takeoverResult) print(out io.Writer) {
	fmt.Fprintf(out, "takeover: serve %d of %d SIGKILLed mid-stream holding %d updates (%d of them being forwarded); forwarded again by the others: %d, after p50 %v, max %v; %d missing after %v; %d updates answered before the kill forwarded again after it\n",
		t.victim, t.procs, len(t.held), t.inFlight, len(t.held)-t.missing, t.p50.Round(time.Millisecond), t.max.Round(time.Millisecond), t.missing, t.wait, t.again)
}

// takeoverSink is the takeover's forward endpoint: each serve forwards to
// its own path (/update/<i>), so the sink knows who forwarded what; it
// holds each forward for hold.
type takeoverSink struct {
	*relayServer
	hold time.Duration

	mu  sync.Mutex
	fwd map[int64][]forwardRec
}

// forwardRec is one forward the sink received.
type forwardRec struct {
	from       int // serve index, from 1
	start, end time.Time
	answered   bool // held to the end and answered 200
}

func startTakeoverSink(hold time.Duration) (*takeoverSink, error) {
	s := &takeoverSink{hold: hold, fwd: map[int64][]forwardRec{}}
	srv, err := startRelayServer(http.HandlerFunc(s.serve), "/update")
	if err != nil {
		return nil, err
	}
	s.relayServer = srv
	return s, nil
}

func (s *takeoverSink) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	from, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/update/"))
	id, err2 := strconv.ParseInt(r.Header.Get(wire.HeaderUpdateID), 10, 64)
	if err != nil || err2 != nil {
		http.Error(w, "bad forward", http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, relayMaxBody))
	held := backoff.Sleep(r.Context(), s.hold) == nil // the serve died meanwhile: not answered
	rec := forwardRec{from: from, start: start, end: time.Now(), answered: held}
	s.mu.Lock()
	s.fwd[id] = append(s.fwd[id], rec)
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *takeoverSink) snapshot() map[int64][]forwardRec {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64][]forwardRec, len(s.fwd))
	for id, rs := range s.fwd {
		out[id] = slices.Clone(rs)
	}
	return out
}

// measureTakeover streams updates through n serve, kills one mid-stream
// and measures how long the updates it held take to be forwarded again by
// the others. Held: accepted by it (per the proxy) or being forwarded by it
// at the kill, and not answered by the endpoint before the kill.
func measureTakeover(ctx context.Context, o scaleOptions, n int, db, api string, env []string, out io.Writer) (*takeoverResult, error) {
	sink, err := startTakeoverSink(o.hold)
	if err != nil {
		return nil, err
	}
	defer sink.close()
	var procs []*crashServe
	defer func() {
		for _, p := range procs {
			p.stop()
		}
	}()
	for i := range n {
		s, err := newCrashServe(fmt.Sprintf("takeover-serve-%d", i+1), o.bin, o.dir, o.serveFlags(db, api, sink.url+"/"+strconv.Itoa(i+1)), env)
		if err != nil {
			return nil, err
		}
		procs = append(procs, s)
		if err := s.start(ctx, true); err != nil {
			return nil, err
		}
	}
	proxy, err := startRoundRobin(procs)
	if err != nil {
		return nil, err
	}
	defer proxy.close()
	var amu sync.Mutex
	acceptedBy := map[int64]int{} // update id → serve index from 1
	acceptedAt := map[int64]time.Time{}
	proxy.accepted = func(backend int, body []byte) {
		var u struct {
			UpdateID int64 `json:"update_id"`
		}
		if json.Unmarshal(body, &u) == nil {
			amu.Lock()
			acceptedBy[u.UpdateID], acceptedAt[u.UpdateID] = backend+1, time.Now()
			amu.Unlock()
		}
	}

	victim := 2
	t := &takeoverResult{procs: n, victim: victim}
	t.lease, t.wait = o.takeoverBound()
	fmt.Fprintf(out, "takeover: %d updates at %.0f/s through %d serve, the endpoint holding each forward %v; serve %d is SIGKILLed halfway (lease %v, pending grace %v, sweep %v)\n",
		o.takeoverN, o.takeoverRate, n, o.hold, victim, t.lease, o.effectiveGraceOrDefault(), o.effectiveSweepOrDefault())
	const lo = int64(1)
	gen := &crashGen{}
	genDone := make(chan error, 1)
	go func() {
		genDone <- gen.run(ctx, func() string { return proxy.url }, lo, o.takeoverN, 16, o.takeoverRate)
	}()
	if err := waitFor(ctx, func() bool { return gen.oks.Load() >= int64(o.takeoverN/2) }); err != nil {
		return nil, fmt.Errorf("takeover: the stream did not reach half: %w", err)
	}
	procs[victim-1].kill()
	kill := time.Now()

	// The held set, as of the kill: accepted or being forwarded by the
	// victim, and not answered by the endpoint before the kill.
	fwd := sink.snapshot()
	candidates := map[int64]bool{}
	amu.Lock()
	for id, by := range acceptedBy {
		if by == victim && acceptedAt[id].Before(kill) {
			candidates[id] = true
		}
	}
	amu.Unlock()
	for id, rs := range fwd {
		for _, r := range rs {
			if r.from == victim && r.start.Before(kill) {
				candidates[id] = true
			}
		}
	}
	for id := range candidates {
		done, forwarding := false, false
		for _, r := range fwd[id] {
			if r.answered && r.end.Before(kill) {
				done = true
			}
			if r.from == victim && r.start.Before(kill) && (!r.answered || r.end.After(kill)) {
				forwarding = true
			}
		}
		if !done {
			t.held = append(t.held, id)
			if forwarding {
				t.inFlight++
			}
		}
	}
	slices.Sort(t.held)
	fmt.Fprintf(out, "  serve %d killed holding %d updates; waiting up to %v for the others to forward them\n", victim, len(t.held), t.wait)

	again := func(recs []forwardRec) (time.Time, bool) {
		for _, r := range recs {
			if r.from != victim && !r.start.Before(kill) {
				return r.start, true
			}
		}
		return time.Time{}, false
	}
	wctx, cancel := context.WithTimeout(ctx, t.wait)
	defer cancel()
	_ = waitFor(wctx, func() bool {
		snap := sink.snapshot()
		for _, id := range t.held {
			if _, ok := again(snap[id]); !ok {
				return false
			}
		}
		return true
	})
	if err := <-genDone; err != nil {
		return nil, fmt.Errorf("takeover: generator: %w", err)
	}
	snap := sink.snapshot()
	var waits []time.Duration
	for _, id := range t.held {
		at, ok := again(snap[id])
		if !ok {
			t.missing++
			continue
		}
		waits = append(waits, at.Sub(kill))
	}
	if len(waits) > 0 {
		t.p50, t.max = percentile(waits, 0.5), slices.Max(waits)
	}
	for id, rs := range snap {
		if slices.Contains(t.held, id) {
			continue
		}
		answeredBefore, after := false, false
		for _, r := range rs {
			if r.answered && r.end.Before(kill) {
				answeredBefore = true
			}
			if !r.start.Before(kill) {
				after = true
			}
		}
		if answeredBefore && after {
			t.again++
		}
	}
	return t, nil
}

// takeoverBound returns the lease in force and how long the takeover waits
// for the held updates: the lease, the pending grace and one sweep (serve's
// defaults where not given), plus slack. A heartbeat that reclaims sooner
// simply ends the wait sooner.
func (o scaleOptions) takeoverBound() (lease, wait time.Duration) {
	lease = o.lease
	if lease == 0 {
		lease = intake.DefaultLeaseDuration // serve's default
	}
	return lease, lease + o.effectiveGraceOrDefault() + o.effectiveSweepOrDefault() + scaleTakeoverSlack
}

func (o scaleOptions) effectiveGraceOrDefault() time.Duration {
	if o.grace > 0 {
		return o.grace
	}
	return intake.DefaultPendingGrace
}

func (o scaleOptions) effectiveSweepOrDefault() time.Duration {
	if o.sweep > 0 {
		return o.sweep
	}
	return intake.DefaultSweepInterval
}
