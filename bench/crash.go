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

// crashServe is one `tgrelay serve` that is killed and restarted on the
// same addresses.
type crashServe struct {
	name, bin string
	args, env []string
	listen    string // webhook address
	admin     string
	logPath   string

	cmd  *exec.Cmd
	done chan error
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
	return &crashServe{name: name, bin: bin, args: args, env: env, listen: listen, admin: admin,
		logPath: filepath.Join(dir, name+".log")}, nil
}

func (s *crashServe) webhookURL() string { return "http://" + s.listen + relayWebhookPath }

// start starts the process; ready waits for its /readyz.
func (s *crashServe) start(ctx context.Context, ready bool) error {
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := append([]string{"serve", "--listen", s.listen, "--path", relayWebhookPath, "--admin-listen", s.admin}, s.args...)
	s.cmd = exec.Command(s.bin, args...)
	s.cmd.Env = s.env
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.name, err)
	}
	s.done = make(chan error, 1)
	go func(cmd *exec.Cmd, done chan error) { done <- cmd.Wait() }(s.cmd, s.done)
	if !ready {
		return nil
	}
	if err := relayWaitReady(ctx, s.admin, s.done); err != nil {
		s.kill()
		return fmt.Errorf("%s: %w\n%s", s.name, err, tail(s.logPath))
	}
	return nil
}

// kill sends SIGKILL and waits for the process to be gone.
func (s *crashServe) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// stop ends the process gracefully (SIGTERM, SIGKILL after 15 s).
func (s *crashServe) stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
}

// exited reports whether the running process ended on its own.
func (s *crashServe) exited() bool {
	if s.cmd == nil {
		return true
	}
	select {
	case err := <-s.done:
		s.done <- err
		return true
	default:
		return false
	}
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
	id, err := strconv.ParseInt(r.Header.Get("Tgrelay-Update-Id"), 10, 64)
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
	w.Header().Set("Tgrelay-Ack", r.Header.Get("Tgrelay-Claim-Id"))
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

// killLoop kills a random one of procs every min..max, restarting it at
// once, until stop reports true and at least minKills happened, or ctx ends.
// It returns the kills and the time of the last one.
func killLoop(ctx context.Context, procs []*crashServe, minKills int, minGap, maxGap time.Duration, stop func() bool, out io.Writer) (int, time.Time, error) {
	kills := 0
	var last time.Time
	for ctx.Err() == nil && (kills < minKills || !stop()) {
		gap := minGap + time.Duration(rand.Int64N(int64(maxGap-minGap)+1))
		if err := backoff.Sleep(ctx, gap); err != nil {
			break
		}
		if kills >= minKills && stop() { // no kill after the load ended
			break
		}
		p := procs[rand.IntN(len(procs))]
		if p.exited() {
			return kills, last, fmt.Errorf("%s exited on its own:\n%s", p.name, tail(p.logPath))
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

// killsDuring runs load while killLoop kills procs every 1–2 s, at least
// minKills times and until load returned. It returns the kills and the time
// of the last one; a load error is returned as the generator's.
func killsDuring(ctx context.Context, load func() error, procs []*crashServe, minKills int, out io.Writer) (int, time.Time, error) {
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
	kills, lastKill, err := killLoop(ctx, procs, minKills, time.Second, 2*time.Second, stop, out)
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
	ctx, cancel := context.WithTimeout(ctx, *f.timeout)
	dir, err = os.MkdirTemp("", "tgrelay-bench-"+f.fs.Name()+"-")
	if err != nil {
		cancel()
		return nil, "", nil, err
	}
	done = func() { cancel(); os.RemoveAll(dir) }
	if *f.bin, err = buildTgrelay(ctx, dir, *f.bin, out); err != nil {
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
