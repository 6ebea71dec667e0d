package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/groupcommit"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// runGateway measures the gateway's own cost: sendMessage calls from 32
// concurrent app workers against telegramtest with its limits off, (a)
// directly with Go's http.Client, (b) through the gateway without an
// identity (limiter and dispatch-aware transport only), (c) through the
// gateway with an attempt identity, so each call is fenced and journaled
// (intent and outcome) in a SQLite store with synchronous=FULL, each
// identity carrying -calls-per-update calls (2: an update's handler answers
// with a call or a few, and the next update is the next handler's; the
// updates are recorded claimed before the round, as the relay would), and (d)
// the same with every outcome recorded before the answer
// (MaxPendingOutcomes -1, the gateway's behaviour before outcomes followed
// their answers). The limiter's limits are off (a negative count), so it
// never waits. Beside them runs (e) a bare reverse proxy
// (httputil.ReverseProxy on a loopback server, as the gateway is): the same
// second HTTP hop with nothing else, the baseline the gateway's own cost is
// judged against (the direct call has one hop fewer, which on two shared
// cores alone caps any forwarder near half its rate), and (f) the journal
// floor (journalFloor): that proxy plus the two durable writes any
// journaling gateway makes per call, the ceiling of the journaled mode.
//
// It runs twice: with telegramtest answering at once (zero latency: the
// machine's CPU, shared by the fake, the load generator and the gateway,
// is all that is measured), and with every sendMessage answered after
// -latency (Telegram is tens of milliseconds away in real life), the same
// for every mode. Within each, modes alternate in every round; medians of
// the rounds are reported.
func runGateway(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(out)
	calls := fs.Int("calls", 3000, "calls per mode and round with zero latency")
	latCalls := fs.Int("latency-calls", 1500, "calls per mode and round with -latency")
	latency := fs.Duration("latency", 40*time.Millisecond, "Telegram's answer latency of the second run (0 skips it)")
	workers := fs.Int("workers", 32, "concurrent app workers")
	perUpdate := fs.Int("calls-per-update", 2, "calls made under each attempt identity: an update's handler answers with a call or a few; 0 gives each worker one update for the whole round")
	rounds := fs.Int("rounds", 3, "rounds (each runs every mode once, alternately)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of each mode's first zero-latency round to `prefix`-<mode>.pprof, and the process's allocations before and after that round to prefix-<mode>.allocs-before.pprof and prefix-<mode>.allocs.pprof (read the round's with go tool pprof -diff_base)")
	logFloor := fs.Bool("floor-log", false, "also run the log-shaped journal floor: the journal floor laid out as relay's floor-log (an intent's row and its pending entry before the call; after the answer, the entry deleted and the outcome appended with the answer, in the next commit), to measure what a journal that never rewrites a row could reach")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *calls < *workers || *latCalls < *workers || *workers < 1 || *rounds < 1 || *latency < 0 || *perUpdate < 0 {
		return errors.New("need calls, latency-calls ≥ workers ≥ 1, rounds ≥ 1, latency ≥ 0 and calls-per-update ≥ 0")
	}
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, MaxMessages: 1 << 22})
	defer tg.Close()
	b := &gatewayBench{tg: tg, workers: *workers, perUpdate: *perUpdate, out: out, client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2 * *workers}}}
	for i := range *workers {
		c, err := tg.NewPrivateChat(tg.NewUser("U" + strconv.Itoa(i)))
		if err != nil {
			return err
		}
		b.chats = append(b.chats, c.ID)
	}
	dir, err := os.MkdirTemp("", "tgrelay-bench-gateway")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	b.store, err = sqlitestore.Open(ctx, filepath.Join(dir, "gw.db"), sqlitestore.Config{Synchronous: "FULL"})
	if err != nil {
		return err
	}
	defer b.store.Close()
	base, err := transport.New(transport.Config{})
	if err != nil {
		return err
	}
	off := throttle.Limit{Count: -1} // a negative count turns a limit off
	lim, err := throttle.New(throttle.Config{Bot: off, Chat: off, Group: off})
	if err != nil {
		return err
	}
	newGateway := func(maxPending int) (*gateway.Gateway, *httptest.Server, error) {
		gw, err := gateway.New(gateway.Config{Token: tg.Token, APIRoot: tg.URL, Transport: throttle.NewTransport(lim, base), Store: b.store,
			OwnsIntake: true, MaxPendingOutcomes: maxPending, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return nil, nil, err
		}
		return gw, httptest.NewServer(gw), nil
	}
	gw, gsrv, err := newGateway(0)
	if err != nil {
		return err
	}
	defer gsrv.Close()
	// The same gateway recording every outcome before the answer: what
	// outcomes that follow their answers are worth.
	gwSync, ssrv, err := newGateway(-1)
	if err != nil {
		return err
	}
	defer ssrv.Close()
	// The bare reverse proxy over the same hop: a pooled transport sized
	// like the app's client, so it never opens a connection per call.
	target, err := url.Parse(tg.URL)
	if err != nil {
		return err
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:    func(r *httputil.ProxyRequest) { r.SetURL(target) },
		Transport:  &http.Transport{MaxIdleConnsPerHost: 2 * *workers},
		BufferPool: make(proxyBuffers, 2**workers),
	}
	psrv := httptest.NewServer(proxy)
	defer psrv.Close()
	fl, err := openFloorSQLite(ctx, filepath.Join(dir, "floor.db"))
	if err != nil {
		return err
	}
	floorURL, stopFloor := startJournalFloor(proxy, fl)
	defer stopFloor()
	b.modes = []gatewayMode{{name: "direct", root: tg.URL}, {name: gatewayProxy, root: psrv.URL}, {name: "gateway", root: gsrv.URL},
		{name: "gateway+identity", root: gsrv.URL, identity: true, ended: gw.AttemptEnded},
		{name: "identity, sync outcome", root: ssrv.URL, identity: true, ended: gwSync.AttemptEnded},
		{name: gatewayFloor, root: floorURL}}
	if *logFloor {
		lf, err := openFloorLogSQLite(ctx, filepath.Join(dir, "floor-log.db"), false)
		if err != nil {
			return err
		}
		logURL, stopLog := startJournalFloor(proxy, lf)
		defer stopLog()
		b.modes = append(b.modes, gatewayMode{name: gatewayLogFloor, root: logURL})
	}

	loadBefore := loadAverage()
	fsyncBefore, err := fsyncProbe(dir)
	if err != nil {
		return err
	}
	zero, err := b.phase(ctx, *calls, *rounds, *cpuprofile)
	if err != nil {
		return err
	}
	var slow gatewayPhase
	if *latency > 0 {
		if err := tg.Arm(telegramtest.Fault{Method: "sendMessage", Delay: *latency, Times: -1}); err != nil {
			return err
		}
		if slow, err = b.phase(ctx, *latCalls, *rounds, ""); err != nil {
			return err
		}
		tg.Disarm()
	}
	for _, g := range []*gateway.Gateway{gw, gwSync} {
		if err := g.Close(ctx); err != nil {
			return err
		}
	}
	loadAfter := loadAverage()
	fsyncAfter, err := fsyncProbe(dir)
	if err != nil {
		return err
	}

	perIdentity := "one update per worker for the whole round"
	if *perUpdate > 0 {
		perIdentity = strconv.Itoa(*perUpdate) + " calls per update"
	}
	fmt.Fprintf(out, "gateway: %d workers, %d rounds, limits off, journal on SQLite synchronous=FULL, %s; GOMAXPROCS %d\n", *workers, *rounds, perIdentity, runtime.GOMAXPROCS(0))
	fmt.Fprintf(out, "machine: load average %s before, %s after; a 4 KiB write+fsync takes %.2f ms before, %.2f ms after (median of %d)\n",
		loadBefore, loadAfter, ms(fsyncBefore), ms(fsyncAfter), fsyncProbes)
	b.table(zero, fmt.Sprintf("zero latency (%d calls per mode and round)", *calls))
	if *latency > 0 {
		b.table(slow, fmt.Sprintf("Telegram answers after %v (%d calls per mode and round)", *latency, *latCalls))
	}
	vsPlain, vsIdentity := zero.paired("gateway", gatewayProxy), zero.paired("gateway+identity", gatewayProxy)
	floorVsProxy, identityVsFloor := zero.paired(gatewayFloor, gatewayProxy), zero.paired("gateway+identity", gatewayFloor)
	fmt.Fprintf(out, "\ngoals at zero latency, against the bare reverse proxy (per-round ratios, median): without an identity %.2fx (>= %.1fx %s), with the journal %.2fx (>= %.1fx %s)\n",
		vsPlain, gatewayGoalPlain, intakeGoal(vsPlain >= gatewayGoalPlain), vsIdentity, gatewayGoalIdentity, intakeGoal(vsIdentity >= gatewayGoalIdentity))
	fmt.Fprintf(out, "journal floor (the proxy plus a group-committed row before each call and its update with the answer after it): %.2fx the proxy, the ceiling of any journaling gateway here; the gateway with the journal is %.2fx the floor\n",
		floorVsProxy, identityVsFloor)
	if *logFloor {
		fmt.Fprintf(out, "log-shaped journal floor (no row rewritten): %.2fx the proxy; the gateway with the journal is %.2fx it\n",
			zero.paired(gatewayLogFloor, gatewayProxy), zero.paired("gateway+identity", gatewayLogFloor))
	}
	fmt.Fprintf(out, "\nRESULT gateway calls_per_update=%d direct_per_s=%.0f proxy_per_s=%.0f gateway_per_s=%.0f identity_per_s=%.0f ratio_plain=%.2f ratio_identity=%.2f plain_vs_proxy=%.2f identity_vs_proxy=%.2f identity_sync_per_s=%.0f",
		*perUpdate, zero.rate("direct"), zero.rate(gatewayProxy), zero.rate("gateway"), zero.rate("gateway+identity"), zero.ratio("gateway"), zero.ratio("gateway+identity"),
		vsPlain, vsIdentity, zero.rate("identity, sync outcome"))
	if *latency > 0 {
		fmt.Fprintf(out, " latency_ms=%.0f direct_lat_per_s=%.0f proxy_lat_per_s=%.0f gateway_lat_per_s=%.0f identity_lat_per_s=%.0f ratio_plain_lat=%.2f ratio_identity_lat=%.2f plain_vs_proxy_lat=%.2f identity_vs_proxy_lat=%.2f identity_sync_lat_per_s=%.0f",
			ms(*latency), slow.rate("direct"), slow.rate(gatewayProxy), slow.rate("gateway"), slow.rate("gateway+identity"), slow.ratio("gateway"), slow.ratio("gateway+identity"),
			slow.paired("gateway", gatewayProxy), slow.paired("gateway+identity", gatewayProxy), slow.rate("identity, sync outcome"))
	}
	fmt.Fprintf(out, " floor_per_s=%.0f floor_vs_proxy=%.2f identity_vs_floor=%.2f", zero.rate(gatewayFloor), floorVsProxy, identityVsFloor)
	fmt.Fprintf(out, " async_vs_sync=%.2f", zero.paired("gateway+identity", "identity, sync outcome"))
	if *latency > 0 {
		fmt.Fprintf(out, " async_vs_sync_lat=%.2f", slow.paired("gateway+identity", "identity, sync outcome"))
	}
	fmt.Fprintf(out, " load1=%s fsync_ms=%.2f\n", strings.Fields(loadAfter + " ?")[0], ms(max(fsyncBefore, fsyncAfter)))
	return nil
}

// proxyBuffers is the reverse proxy's httputil.BufferPool, a bounded free
// list: without one it allocates a 32 KiB copy buffer for every response.
type proxyBuffers chan []byte

// Get returns a free buffer or a new one.
func (p proxyBuffers) Get() []byte {
	select {
	case b := <-p:
		return b
	default:
		return make([]byte, 32<<10)
	}
}

// Put keeps b for a later response while the list has room.
func (p proxyBuffers) Put(b []byte) {
	select {
	case p <- b:
	default:
	}
}

// gatewayProxy names the bare reverse proxy mode.
const gatewayProxy = "reverse proxy"

// gatewayFloor names the journal floor mode (see journalFloor).
const gatewayFloor = "journal floor"

// gatewayLogFloor names the log-shaped journal floor mode (-floor-log):
// journalFloor over relay's log floor (floorLog).
const gatewayLogFloor = "journal log floor"

// journalFloor is the least a journaling gateway must do, around the bare
// reverse proxy: each call's row (its body) group-committed before the call
// leaves, and the row's update group-committed after the answer, off the
// answer's path (as the gateway records outcomes), with the answer, which
// a journal keeps to replay it (since session 29; before, neither floor
// kept it, and both read higher than any journal that replays could). No
// identity, fencing, limiter or classification: its rate against the
// proxy is the ceiling of any journaling design on this machine.
type journalFloor struct {
	proxy    http.Handler
	st       floorStore
	intents  *groupcommit.Group[floorRow, bool]
	outcomes *groupcommit.Group[floorSettle, struct{}]
	next     atomic.Int64
	pending  sync.WaitGroup
}

func newJournalFloor(proxy http.Handler, st floorStore) *journalFloor {
	settle := func(ctx context.Context, rows []floorSettle) ([]struct{}, error) {
		return make([]struct{}, len(rows)), st.settle(ctx, rows)
	}
	return &journalFloor{proxy: proxy, st: st,
		intents:  &groupcommit.Group[floorRow, bool]{CommitFunc: st.add, Max: floorMaxBatch, Bound: floorCommitBound},
		outcomes: &groupcommit.Group[floorSettle, struct{}]{CommitFunc: settle, Max: floorMaxBatch, Bound: floorCommitBound}}
}

func (f *journalFloor) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, relayMaxBody))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	id := f.next.Add(1)
	row := floorRow{id: id, body: body, claimID: id}
	if _, leases := f.st.(floorLeaseStore); leases {
		row.due = new(int64)
	}
	if _, err := f.intents.Do(r.Context(), row); err != nil {
		http.Error(w, "not journaled", http.StatusServiceUnavailable)
		return
	}
	started := time.Now()
	r.Body = io.NopCloser(bytes.NewReader(body))
	kept := &keptAnswer{ResponseWriter: w}
	f.proxy.ServeHTTP(kept, r)
	answer := kept.body.Bytes()
	f.pending.Add(1)
	go func() {
		defer f.pending.Done()
		// A store that settles row by row (the log floor) records the
		// outcome itself; the others through the floor's group.
		if rs, ok := f.st.(floorRowSettler); ok {
			_ = rs.settleRow(context.Background(), row, started, answer)
			return
		}
		_, _ = f.outcomes.Do(context.Background(), floorSettle{id: id, answer: answer})
	}()
}

// keptAnswer passes an answer on and keeps a copy of its body, up to
// maxKeptAnswer bytes, as the journal keeps Telegram's answer to replay
// it.
type keptAnswer struct {
	http.ResponseWriter
	body bytes.Buffer
}

// maxKeptAnswer bounds the answer a journal floor keeps.
const maxKeptAnswer = 64 << 10

func (k *keptAnswer) Write(p []byte) (int, error) {
	if room := maxKeptAnswer - k.body.Len(); room > 0 {
		k.body.Write(p[:min(len(p), room)])
	}
	return k.ResponseWriter.Write(p)
}

// Unwrap gives the proxy the writer it wraps (http.ResponseController).
func (k *keptAnswer) Unwrap() http.ResponseWriter { return k.ResponseWriter }

// wait waits for the outcomes in flight.
func (f *journalFloor) wait() { f.pending.Wait() }

// startJournalFloor serves a journal floor over st in front of proxy. stop
// stops the server (which waits for its calls), waits for the outcomes
// they left in flight, and closes st.
func startJournalFloor(proxy http.Handler, st floorStore) (url string, stop func()) {
	jf := newJournalFloor(proxy, st)
	srv := httptest.NewServer(jf)
	return srv.URL, func() {
		srv.Close()
		jf.wait()
		st.close()
	}
}

// The goals at zero latency, as shares of the bare reverse proxy's rate
// over the same hop: the gateway without an identity, and with one (every
// call fenced and journaled).
const (
	gatewayGoalPlain    = 0.9
	gatewayGoalIdentity = 0.5
)

// fsyncProbes is how many write+fsync pairs fsyncProbe times.
const fsyncProbes = 20

// fsyncProbe returns the median time of a 4 KiB write and fsync of a file
// in dir: what a commit with synchronous=FULL waits for at least, on a
// disk other programs may be busy with.
func fsyncProbe(dir string) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "fsync-probe")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4096)
	var ds []time.Duration
	for range fsyncProbes {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			return 0, err
		}
		if err := f.Sync(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return percentile(ds, 0.5), nil
}

// loadAverage is /proc/loadavg's three load averages, or "unknown".
func loadAverage() string { return intakeLoadAverage() }

type gatewayMode struct {
	name     string
	root     string
	identity bool
	// ended tells the mode's gateway that an identity's attempt is over
	// once its calls are made, as the relay tells it when the attempt
	// settles (Gateway.AttemptEnded): the gateway then holds the counters
	// of the attempts running, as in serve, not of the last
	// gateway.DefaultMaxAttempts (before session 29 the bench never told
	// it, and its gateways carried 7 MiB of counters serve does not).
	ended func(intake.Identity)
}

type gatewayBench struct {
	tg      *telegramtest.Server
	store   *sqlitestore.Store
	client  *http.Client
	chats   []int64
	workers int
	// perUpdate is how many calls carry each attempt identity (0: one
	// update per worker for the whole round).
	perUpdate int
	modes     []gatewayMode
	out       io.Writer
	updates   atomic.Int64
}

// gatewayPhase holds the per-round rates, p50 latencies (ms), CPU time
// per call (µs) and memory allocated per call (KiB) of each mode, the last
// two of the whole process: app, gateway and fake Telegram.
type gatewayPhase struct {
	rates map[string][]float64
	p50   map[string][]float64
	cpu   map[string][]float64
	alloc map[string][]float64
}

func (p gatewayPhase) rate(mode string) float64 { return median(p.rates[mode]) }

// paired returns the median over rounds of mode a's rate divided by mode
// b's in the same round: robust to the machine's drift between rounds.
func (p gatewayPhase) paired(a, b string) float64 {
	var rs []float64
	for i := range min(len(p.rates[a]), len(p.rates[b])) {
		if p.rates[b][i] > 0 {
			rs = append(rs, p.rates[a][i]/p.rates[b][i])
		}
	}
	return median(rs)
}

func (p gatewayPhase) ratio(mode string) float64 {
	if d := p.rate("direct"); d > 0 {
		return p.rate(mode) / d
	}
	return 0
}

// phase runs every mode once per round, alternately.
func (b *gatewayBench) phase(ctx context.Context, calls, rounds int, profile string) (gatewayPhase, error) {
	p := gatewayPhase{rates: map[string][]float64{}, p50: map[string][]float64{}, cpu: map[string][]float64{}, alloc: map[string][]float64{}}
	for round := range rounds {
		for _, m := range b.modes {
			stop := func() {}
			if profile != "" && round == 0 {
				prefix := profile + "-" + strings.NewReplacer(" ", "", ",", "").Replace(m.name)
				if err := writeAllocs(prefix + ".allocs-before.pprof"); err != nil {
					return p, err
				}
				stopCPU, err := startCPUProfile(prefix + ".pprof")
				if err != nil {
					return p, err
				}
				stop = func() {
					stopCPU()
					if err := writeAllocs(prefix + ".allocs.pprof"); err != nil {
						fmt.Fprintf(b.out, "%s: allocations profile: %v\n", m.name, err)
					}
				}
			}
			cpu0 := intakeCPUTime()
			var mem0, mem1 runtime.MemStats
			runtime.ReadMemStats(&mem0)
			rate, p50, err := b.run(ctx, m, calls, round)
			cpu := intakeCPUTime() - cpu0
			runtime.ReadMemStats(&mem1)
			stop()
			if err != nil {
				return p, err
			}
			p.rates[m.name] = append(p.rates[m.name], rate)
			p.p50[m.name] = append(p.p50[m.name], ms(p50))
			p.cpu[m.name] = append(p.cpu[m.name], float64(cpu.Microseconds())/float64(calls))
			p.alloc[m.name] = append(p.alloc[m.name], float64(mem1.TotalAlloc-mem0.TotalAlloc)/float64(calls)/1024)
		}
	}
	return p, nil
}

// identities records n updates already claimed, before the round (the
// relay's work, not the gateway's), whose identities the workers' calls
// carry.
func (b *gatewayBench) identities(ctx context.Context, n int) ([]intake.Identity, error) {
	ids := make([]intake.Identity, 0, n)
	now := time.Now()
	for len(ids) < n {
		reqs := make([]intake.AddRequest, min(512, n-len(ids)))
		for i := range reqs {
			reqs[i] = intake.AddRequest{Incoming: intake.Incoming{UpdateID: b.updates.Add(1), Body: []byte(`{}`), ReceivedAt: now},
				Claim: &intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 3}}
		}
		res, err := b.store.AddBatch(ctx, reqs)
		if err != nil {
			return nil, err
		}
		for _, r := range res {
			if !r.Claimed() {
				return nil, errors.New("an update of the bench was not recorded claimed")
			}
			ids = append(ids, r.Identity)
		}
	}
	return ids, nil
}

// run makes calls sendMessage calls in mode m from the workers and returns
// the calls per second and the median latency.
func (b *gatewayBench) run(ctx context.Context, m gatewayMode, calls, round int) (float64, time.Duration, error) {
	var ids []intake.Identity
	if m.identity {
		n := b.workers // one per worker
		if b.perUpdate > 0 {
			n += (calls + b.perUpdate - 1) / b.perUpdate // and what a worker's last one leaves unused
		}
		var err error
		if ids, err = b.identities(ctx, n); err != nil {
			return 0, 0, err
		}
	}
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		nextID atomic.Int64 // the identities taken
		fails  atomic.Int64
		mu     sync.Mutex
		lats   []time.Duration
	)
	fail := func(what any) {
		if fails.Add(1) == 1 {
			fmt.Fprintf(b.out, "%s: first failure: %v\n", m.name, what)
		}
	}
	url := m.root + "/bot" + b.tg.Token + "/sendMessage"
	start := time.Now()
	for w := range b.workers {
		wg.Go(func() {
			var (
				mine []time.Duration
				id   intake.Identity
				used int // calls made under id
			)
			for {
				n := next.Add(1)
				if n > int64(calls) || ctx.Err() != nil {
					break
				}
				body := fmt.Sprintf(`{"chat_id":%d,"text":"r%d %s %d"}`, b.chats[w], round, m.name, n)
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewBufferString(body))
				req.Header.Set("Content-Type", "application/json")
				if m.identity {
					if used == 0 || used == b.perUpdate {
						if used > 0 && m.ended != nil {
							m.ended(id) // its handler returned: the attempt settles
						}
						id, used = ids[nextID.Add(1)-1], 0
					}
					used++
					req.Header.Set(wire.HeaderUpdateID, strconv.FormatInt(id.UpdateID, 10))
					req.Header.Set(wire.HeaderAttempt, strconv.Itoa(id.Attempt))
					req.Header.Set(wire.HeaderClaimID, id.ClaimID)
				}
				t0 := time.Now()
				resp, err := b.client.Do(req)
				if err != nil {
					fail(err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					fail(resp.StatusCode)
				}
				mine = append(mine, time.Since(t0))
			}
			if used > 0 && m.ended != nil {
				m.ended(id)
			}
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	el := time.Since(start)
	if f := fails.Load(); f > 0 {
		return 0, 0, fmt.Errorf("%s: %d calls failed", m.name, f)
	}
	return float64(calls) / el.Seconds(), percentile(lats, 0.5), nil
}

func (b *gatewayBench) table(p gatewayPhase, title string) {
	fmt.Fprintf(b.out, "\n%s\n%-24s %12s %10s %12s %13s %10s %10s\n", title, "mode", "calls/s", "p50 ms", "CPU µs/call", "alloc KB/call", "vs direct", "vs proxy")
	for _, m := range b.modes {
		fmt.Fprintf(b.out, "%-24s %12.0f %10.2f %12.0f %13.1f %9.2fx %9.2fx\n", m.name, p.rate(m.name), median(p.p50[m.name]), median(p.cpu[m.name]),
			median(p.alloc[m.name]), p.ratio(m.name), p.paired(m.name, gatewayProxy))
	}
	fmt.Fprintf(b.out, "per-round ratios, median: gateway/proxy %.2f, gateway+identity/proxy %.2f, gateway/direct %.2f, gateway+identity/direct %.2f, outcome after the answer vs before %.2f\n",
		p.paired("gateway", gatewayProxy), p.paired("gateway+identity", gatewayProxy),
		p.paired("gateway", "direct"), p.paired("gateway+identity", "direct"), p.paired("gateway+identity", "identity, sync outcome"))
}
