package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// The crash scenarios (crash-serve, crash-pg, crash-broadcast) kill tgrelay
// with SIGKILL at random moments and check, once everything has settled,
// what its guarantees promise: nothing acknowledged is lost, no effect is
// doubled, no chat gets a broadcast twice unless the journal says
// "uncertain". Each builds the tgrelay binary once into a temp dir, talks
// over loopback only, and is bounded by -timeout.

// buildTgrelay builds cmd/tgrelay into dir, or returns bin when set.
func buildTgrelay(ctx context.Context, dir, bin string, out io.Writer) (string, error) {
	if bin != "" {
		return bin, nil
	}
	bin = filepath.Join(dir, "tgrelay")
	fmt.Fprintln(out, "building tgrelay ...")
	b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/tgrelay/tgrelay/cmd/tgrelay").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, b)
	}
	return bin, nil
}

// childEnv is the environment of a tgrelay child: ours without TGRELAY_*,
// plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TGRELAY_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// childProc is a child process that is killed and restarted: its output
// is appended to logPath, and done receives its exit once reaped.
type childProc struct {
	name, logPath string

	cmd  *exec.Cmd
	done chan error
}

// launch starts cmd with its output appended to the log.
func (c *childProc) launch(cmd *exec.Cmd) error {
	logf, err := os.OpenFile(c.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	c.cmd = cmd
	c.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(c.cmd, c.done)
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (c *childProc) kill() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	c.cmd = nil
}

// stop ends the process gracefully (SIGTERM, SIGKILL after 15 s).
func (c *childProc) stop() {
	if c.cmd == nil {
		return
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.cmd = nil
}

// exited reports whether the running process ended on its own.
func (c *childProc) exited() bool {
	if c.cmd == nil {
		return true
	}
	select {
	case err := <-c.done:
		c.done <- err
		return true
	default:
		return false
	}
}

// exitedError says the process ended on its own, with its log's tail.
func (c *childProc) exitedError() error {
	return fmt.Errorf("%s exited on its own:\n%s", c.name, tail(c.logPath))
}

// crashProc is a process the kill loop kills and restarts.
type crashProc interface {
	start(ctx context.Context, ready bool) error
	kill()
	exited() bool
	exitedError() error
}

// crashServe is one `tgrelay serve` that is killed and restarted on the
// same addresses.
type crashServe struct {
	childProc
	bin       string
	args, env []string
	listen    string // webhook address
	admin     string
}

func newCrashServe(name, bin, dir string, args, env []string) (*crashServe, error) {
	listen, err := relayFreeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := relayFreeAddr()
	if err != nil {
		return nil, err
	}
	return &crashServe{childProc: childProc{name: name, logPath: filepath.Join(dir, name+".log")},
		bin: bin, args: args, env: env, listen: listen, admin: admin}, nil
}

// serveEnv is the environment of a serve in front of tg.
func serveEnv(tg *telegramtest.Server) []string {
	return childEnv("TGRELAY_TOKEN="+tg.Token, "TGRELAY_WEBHOOK_SECRET="+relaySecret)
}

// startServe starts one serve named name with args in front of tg and
// waits for it to be ready. When it does not start, the error comes with
// the process (its log tells why).
func startServe(ctx context.Context, name, bin, dir string, args []string, tg *telegramtest.Server) (*crashServe, error) {
	s, err := newCrashServe(name, bin, dir, args, serveEnv(tg))
	if err != nil {
		return nil, err
	}
	return s, s.start(ctx, true)
}

func (s *crashServe) webhookURL() string { return "http://" + s.listen + relayWebhookPath }

// start starts the process; ready waits for its /readyz.
func (s *crashServe) start(ctx context.Context, ready bool) error {
	args := append([]string{"serve", "--listen", s.listen, "--path", relayWebhookPath, "--admin-listen", s.admin}, s.args...)
	cmd := exec.Command(s.bin, args...)
	cmd.Env = s.env
	if err := s.launch(cmd); err != nil {
		return err
	}
	if !ready {
		return nil
	}
	if err := relayWaitReady(ctx, s.admin, s.done); err != nil {
		s.kill()
		return fmt.Errorf("%s: %w\n%s", s.name, err, tail(s.logPath))
	}
	return nil
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// crashGen plays Telegram: it POSTs n distinct updates at about rate per
// second over conns connections, re-posting each until it gets a 200.
type crashGen struct {
	posts, oks atomic.Int64
	acked      []atomic.Bool // by update index: got a 200
	// body, when set before run, makes update id's body (chat is
	// 1000+id%200); nil means a text message (telegramUpdate).
	body func(id, chat int64) []byte
}

// run posts updates with ids lo..lo+n-1 to url(), until every one got a 200
// or ctx ends.
func (g *crashGen) run(ctx context.Context, url func() string, lo int64, n, conns int, rate float64) error {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: conns, DisableCompression: true}}
	defer client.CloseIdleConnections()
	g.acked = make([]atomic.Bool, n)
	ids := make(chan int)
	go func() {
		defer close(ids)
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for i := range n {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			select {
			case ids <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for i := range ids {
				id := lo + int64(i)
				mk := g.body
				if mk == nil {
					mk = telegramUpdate
				}
				body := mk(id, 1000+id%200)
				for ctx.Err() == nil {
					g.posts.Add(1)
					if crashPost(ctx, client, url(), body) {
						g.oks.Add(1)
						g.acked[i].Store(true)
						break
					}
					_ = backoff.Sleep(ctx, 20*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

func crashPost(ctx context.Context, c *http.Client, url string, body []byte) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", relaySecret)
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// crashSink is the forward endpoint: it counts deliveries per update id;
// effect, when set, runs first and decides the answer.
type crashSink struct {
	*relayServer
	lo     int64
	counts []atomic.Int32
	effect func(r *http.Request, id int64) error
}

func startCrashSink(lo int64, n int, effect func(*http.Request, int64) error) (*crashSink, error) {
	s := &crashSink{lo: lo, counts: make([]atomic.Int32, n), effect: effect}
	srv, err := startRelayServer(http.HandlerFunc(s.serve), "/update")
	if err != nil {
		return nil, err
	}
	s.relayServer = srv
	return s, nil
}

func (s *crashSink) serve(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.Header.Get(wire.HeaderUpdateID), 10, 64)
	if err != nil || id < s.lo || id >= s.lo+int64(len(s.counts)) {
		http.Error(w, "unknown update", http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, relayMaxBody))
	if s.effect != nil {
		if err := s.effect(r, id); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
	}
	s.counts[id-s.lo].Add(1)
	w.Header().Set("Tgrelay-Ack", r.Header.Get(wire.HeaderClaimID))
	w.WriteHeader(http.StatusOK)
}

// tally counts delivered (at least once) updates and the deliveries beyond
// the first.
func (s *crashSink) tally() (delivered, duplicates int) {
	for i := range s.counts {
		if c := s.counts[i].Load(); c > 0 {
			delivered++
			duplicates += int(c) - 1
		}
	}
	return delivered, duplicates
}

// lost counts updates the generator got a 200 for that never reached the
// sink.
func lost(g *crashGen, s *crashSink) int {
	n := 0
	for i := range g.acked {
		if g.acked[i].Load() && s.counts[i].Load() == 0 {
			n++
		}
	}
	return n
}

// killSchedule gives, before kill k (from 0), how long to wait and which
// of the processes to kill.
type killSchedule func(k int) (gap time.Duration, victim int)

// randomKills kills a random one of n processes every minGap..maxGap.
func randomKills(n int, minGap, maxGap time.Duration) killSchedule {
	return func(int) (time.Duration, int) {
		return minGap + time.Duration(rand.Int64N(int64(maxGap-minGap)+1)), rand.IntN(n)
	}
}

// killLoop kills procs as sched says, restarting each at once, until stop
// reports true and at least minKills happened, or ctx ends. It returns the
// kills and the time of the last one.
func killLoop[P crashProc](ctx context.Context, procs []P, sched killSchedule, minKills int, stop func() bool, out io.Writer) (int, time.Time, error) {
	kills := 0
	var last time.Time
	for ctx.Err() == nil && (kills < minKills || !stop()) {
		gap, victim := sched(kills)
		if err := backoff.Sleep(ctx, gap); err != nil {
			break
		}
		if kills >= minKills && stop() { // no kill after the load ended
			break
		}
		p := procs[victim]
		if p.exited() {
			return kills, last, p.exitedError()
		}
		p.kill()
		kills++
		last = time.Now()
		if err := p.start(ctx, false); err != nil {
			return kills, last, err
		}
		if kills%5 == 0 {
			fmt.Fprintf(out, "  %d kills\n", kills)
		}
	}
	return kills, last, nil
}

// loadUnderKills runs gen (n updates at rate to url) while killLoop kills
// procs every 1–2 s, at least minKills times and until the load is done.
// It returns the kills and the time of the last one.
func loadUnderKills(ctx context.Context, gen *crashGen, url func() string, lo int64, n int, rate float64, procs []*crashServe, minKills int, out io.Writer) (int, time.Time, error) {
	return killsDuring(ctx, func() error { return gen.run(ctx, url, lo, n, 16, rate) }, procs, minKills, out)
}

// killsDuring runs load while killLoop kills a random one of procs every
// 1–2 s, at least minKills times and until load returned. It returns the
// kills and the time of the last one; a load error is returned as the
// generator's.
func killsDuring(ctx context.Context, load func() error, procs []*crashServe, minKills int, out io.Writer) (int, time.Time, error) {
	return killsScheduled(ctx, load, procs, randomKills(len(procs), time.Second, 2*time.Second), minKills, out)
}

// killsScheduled is killsDuring with the kills as sched says.
func killsScheduled[P crashProc](ctx context.Context, load func() error, procs []P, sched killSchedule, minKills int, out io.Writer) (int, time.Time, error) {
	genDone := make(chan error, 1)
	go func() { genDone <- load() }()
	var genErr error
	finished := false
	stop := func() bool {
		if !finished {
			select {
			case genErr = <-genDone:
				finished = true
			default:
			}
		}
		return finished
	}
	kills, lastKill, err := killLoop(ctx, procs, sched, minKills, stop, out)
	if !finished {
		genErr = <-genDone // ctx bounds it
	}
	if err != nil {
		return kills, lastKill, err
	}
	if genErr != nil {
		return kills, lastKill, fmt.Errorf("generator: %w", genErr)
	}
	return kills, lastKill, nil
}

// crashFlags are the flags every crash scenario takes.
type crashFlags struct {
	fs      *flag.FlagSet
	n       *int
	rate    *float64
	kills   *int
	timeout *time.Duration
	bin     *string
}

func newCrashFlags(name, unit string, n int, rate float64, kills int, timeout time.Duration, out io.Writer) *crashFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(out)
	return &crashFlags{fs: fs,
		n:       fs.Int(unit, n, "how many "+unit),
		rate:    fs.Float64("rate", rate, "per second (spreads the load over the kills)"),
		kills:   fs.Int("kills", kills, "least SIGKILLs"),
		timeout: fs.Duration("timeout", timeout, "bound of the whole run"),
		bin:     fs.String("bin", "", "tgrelay binary (default: built into a temp dir)"),
	}
}

// setup parses args, bounds ctx by -timeout and builds the binary into a
// temp dir; done cancels and removes it.
func (f *crashFlags) setup(ctx context.Context, args []string, out io.Writer) (_ context.Context, dir string, done func(), err error) {
	if err := f.fs.Parse(args); err != nil {
		return nil, "", nil, err
	}
	return benchWorkspace(ctx, f.fs.Name(), *f.timeout, f.bin, out)
}

// benchWorkspace bounds ctx by timeout, makes a temp dir for the scenario
// name and builds tgrelay into it unless *bin is set (*bin is then the
// binary). done cancels ctx and removes the dir.
func benchWorkspace(ctx context.Context, name string, timeout time.Duration, bin *string, out io.Writer) (_ context.Context, dir string, done func(), err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	dir, err = os.MkdirTemp("", "tgrelay-bench-"+name+"-")
	if err != nil {
		cancel()
		return nil, "", nil, err
	}
	done = func() { cancel(); os.RemoveAll(dir) }
	if *bin, err = buildTgrelay(ctx, dir, *bin, out); err != nil {
		done()
		return nil, "", nil, err
	}
	return ctx, dir, done, nil
}

var errTimeout = errors.New("timed out")

// waitFor polls cond every 50 ms until it holds or ctx ends.
func waitFor(ctx context.Context, cond func() bool) error {
	for !cond() {
		if err := backoff.Sleep(ctx, 50*time.Millisecond); err != nil {
			return errTimeout
		}
	}
	return nil
}
