package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// runPGStall: serve on PostgreSQL through a TCP proxy that, under a steady
// load, stops forwarding bytes for -stall while keeping every connection
// open (a database that stops answering without closing anything), then
// resumes; later the same for the app's endpoint. It measures how long the
// webhook held each POST and what it answered while the database was
// stalled, the attempts the heartbeat stopped, the time to the first 200
// after the resume, and, once drained, the updates lost.
func runPGStall(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pg-stall", flag.ContinueOnError)
	fs.SetOutput(out)
	var cfg pgStallConfig
	fs.DurationVar(&cfg.stall, "stall", 30*time.Second, "how long the database, then the app, stops answering")
	fs.Float64Var(&cfg.rate, "rate", 50, "updates per second")
	fs.DurationVar(&cfg.settle, "settle", 15*time.Second, "steady load before, between and after the stalls")
	fs.DurationVar(&cfg.clientTimeout, "client-timeout", 2*time.Minute, "how long the generator waits for one webhook answer")
	fs.StringVar(&cfg.extra, "serve-flags", "", "extra serve flags, space-separated (default: serve's defaults)")
	bin := fs.String("bin", "", "tgrelay binary (default: built into a temp dir)")
	timeout := fs.Duration("timeout", 15*time.Minute, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, dir, done, err := benchWorkspace(ctx, "pg-stall", *timeout, bin, out)
	if err != nil {
		return err
	}
	defer done()
	res, err := pgStallRun(ctx, *bin, dir, cfg, out)
	if err != nil {
		return err
	}
	res.print(out, cfg)
	if v := res.verdict(); v != "" {
		return fmt.Errorf("%s", v)
	}
	return nil
}

type pgStallConfig struct {
	stall, settle, clientTimeout time.Duration
	rate                         float64
	extra                        string
}

// stallWindow is what the generator saw of the POSTs that started in one
// window, or were in flight when it began.
type stallWindow struct {
	posts, oks, unavailable, other, noAnswer int
	oksBefore                                int           // 200s answered before the window ended
	maxHeld                                  time.Duration // the longest POST
	p99Held                                  time.Duration
	firstOKAfter                             time.Duration // resume → first 200 of a POST started after it
}

type pgStallResult struct {
	db, app                       stallWindow
	updates                       int
	posts, oks                    int64
	lost, doubles                 int
	leasesLost, storeErrs         float64
	attemptFails                  float64
	drain                         time.Duration
	serveExitedDuringStall        bool
	forwardsDuringDB, forwardsApp int64
	forwardTimeouts               float64
}

func pgStallRun(ctx context.Context, bin, dir string, cfg pgStallConfig, out io.Writer) (pgStallResult, error) {
	var res pgStallResult
	cluster, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return res, fmt.Errorf("postgres: %w", err)
	}
	defer cluster.Stop()
	dbURL, err := cluster.CreateDatabase(ctx)
	if err != nil {
		return res, err
	}
	sock := filepath.Join(cluster.Dir(), ".s.PGSQL.5432")
	dbProxy, err := startStallProxy(func() (net.Conn, error) { return net.Dial("unix", sock) })
	if err != nil {
		return res, err
	}
	defer dbProxy.close()
	tcpURL, err := viaTCP(dbURL, dbProxy.addr())
	if err != nil {
		return res, err
	}

	// The load: fixed ahead, so that lost counts every update.
	n := int(cfg.rate * (4*cfg.settle + 2*cfg.stall).Seconds())
	res.updates = n
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: func(string, ...any) {}})
	defer tg.Close()
	chats, err := soakChats(tg, 20)
	if err != nil {
		return res, err
	}
	const lo = 1
	track := newSoakTrack(lo, n)
	mix := soakMix{reply: 0.2}
	app, err := startSoakApp(tg.Token, chats, mix, track)
	if err != nil {
		return res, err
	}
	defer app.close()
	appAddr := strings.TrimPrefix(app.base, "http://")
	appProxy, err := startStallProxy(func() (net.Conn, error) { return net.Dial("tcp", appAddr) })
	if err != nil {
		return res, err
	}
	defer appProxy.close()

	gw, err := relayFreeAddr()
	if err != nil {
		return res, err
	}
	args := []string{"--db", tcpURL, "--api-root", tg.URL, "--forward", "http://" + appProxy.addr() + "/update",
		"--gateway-listen", gw, "--webhook-check-interval", "0", "--log-level", "warn"}
	args = append(args, strings.Fields(cfg.extra)...)
	s, err := newCrashServe("serve", bin, dir, args, childEnv("TGRELAY_TOKEN="+tg.Token, "TGRELAY_WEBHOOK_SECRET="+relaySecret))
	if err != nil {
		return res, err
	}
	if err := s.start(ctx, true); err != nil {
		return res, err
	}
	defer s.stop()

	metric := func() map[string]float64 {
		m, _ := scrapeMetrics(ctx, s.admin, "tgrelay_leases_lost_total", "tgrelay_store_errors_total", "tgrelay_attempts_total", "tgrelay_attempt_failures_total")
		return m
	}
	sum := func(m map[string]float64, prefix string) float64 {
		t := 0.0
		for k, v := range m {
			if strings.HasPrefix(k, prefix) {
				t += v
			}
		}
		return t
	}

	gen := newSoakGen(track, chats, s.webhookURL, cfg.clientTimeout)
	gen.collect = true
	genDone := make(chan error, 1)
	go func() { genDone <- gen.run(ctx, cfg.rate, 256, nil) }()
	sleep := func(d time.Duration) error { return backoff.Sleep(ctx, d) }

	fmt.Fprintf(out, "pg-stall: %d updates at %.0f/s; the database stops answering for %v, then the app for %v\n", n, cfg.rate, cfg.stall, cfg.stall)
	if err := sleep(cfg.settle); err != nil {
		return res, err
	}
	m0 := metric()
	f0 := app.forwards.Load()
	dbStall := time.Now()
	dbProxy.stall()
	fmt.Fprintf(out, "  %s database stalled\n", time.Now().Format("15:04:05"))
	if err := sleep(cfg.stall); err != nil {
		return res, err
	}
	res.forwardsDuringDB = app.forwards.Load() - f0
	dbResume := time.Now()
	dbProxy.resume()
	fmt.Fprintf(out, "  %s database answers again\n", time.Now().Format("15:04:05"))
	if s.exited() {
		res.serveExitedDuringStall = true
		return res, fmt.Errorf("serve exited during the stall:\n%s", tail(s.logPath))
	}
	if err := sleep(cfg.settle); err != nil {
		return res, err
	}
	m1 := metric()
	res.leasesLost = m1["tgrelay_leases_lost_total"] - m0["tgrelay_leases_lost_total"]
	res.storeErrs = sum(m1, "tgrelay_store_errors_total") - sum(m0, "tgrelay_store_errors_total")
	res.attemptFails = sum(m1, "tgrelay_attempt_failures_total") - sum(m0, "tgrelay_attempt_failures_total")

	f1 := app.forwards.Load()
	appStall := time.Now()
	appProxy.stall()
	fmt.Fprintf(out, "  %s app stalled\n", time.Now().Format("15:04:05"))
	if err := sleep(cfg.stall); err != nil {
		return res, err
	}
	res.forwardsApp = app.forwards.Load() - f1
	appResume := time.Now()
	appProxy.resume()
	fmt.Fprintf(out, "  %s app answers again\n", time.Now().Format("15:04:05"))
	m2 := metric()
	res.forwardTimeouts = m2[`tgrelay_attempt_failures_total{reason="timeout"}`] - m1[`tgrelay_attempt_failures_total{reason="timeout"}`]

	if err := <-genDone; err != nil {
		return res, fmt.Errorf("generator: %w", err)
	}
	loadEnd := time.Now()
	_ = waitForCtx(ctx, 5*time.Minute, func() bool { return track.lost(mix) == 0 })
	res.drain = time.Since(loadEnd)
	res.lost = track.lost(mix)
	_, res.doubles = soakDoubleReplies(tg)
	res.posts, res.oks = gen.posts.Load(), gen.oks.Load()

	gen.mu.Lock()
	answers := gen.answers
	gen.mu.Unlock()
	res.db = windowOf(answers, dbStall, dbResume)
	res.app = windowOf(answers, appStall, appResume)
	return res, nil
}

// windowOf sums the POSTs in flight at from or started before to.
func windowOf(answers []genAnswer, from, to time.Time) stallWindow {
	var w stallWindow
	var held []time.Duration
	for _, a := range answers {
		end := a.at.Add(a.took)
		if a.at.Before(to) && end.After(from) {
			w.posts++
			held = append(held, a.took)
			w.maxHeld = max(w.maxHeld, a.took)
			switch a.status {
			case http.StatusOK:
				w.oks++
				if end.Before(to) {
					w.oksBefore++
				}
			case http.StatusServiceUnavailable:
				w.unavailable++
			case 0:
				w.noAnswer++
			default:
				w.other++
			}
		}
		if a.status == http.StatusOK && !a.at.Before(to) {
			if d := end.Sub(to); w.firstOKAfter == 0 || d < w.firstOKAfter {
				w.firstOKAfter = d
			}
		}
	}
	w.p99Held = percentile(held, 0.99)
	return w
}

// viaTCP rewrites a pgtest URL (Unix socket) to reach the server at addr.
func viaTCP(dbURL, addr string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Del("host")
	q.Del("port")
	u.RawQuery = q.Encode()
	u.Host = net.JoinHostPort(host, port)
	return u.String(), nil
}

func (r pgStallResult) verdict() string {
	var miss []string
	if r.lost != 0 {
		miss = append(miss, fmt.Sprintf("%d lost", r.lost))
	}
	if r.doubles != 0 {
		miss = append(miss, fmt.Sprintf("%d replies sent twice", r.doubles))
	}
	if r.db.noAnswer != 0 {
		miss = append(miss, fmt.Sprintf("%d webhook POSTs not answered during the database stall", r.db.noAnswer))
	}
	if bound := 2*intake.DefaultAcceptTimeout + 2*time.Second; r.db.maxHeld > bound {
		miss = append(miss, fmt.Sprintf("a webhook POST held %v during the database stall, past twice intake.DefaultAcceptTimeout", r.db.maxHeld.Round(time.Millisecond)))
	}
	if r.db.oksBefore != 0 {
		miss = append(miss, fmt.Sprintf("%d POSTs answered 200 while the database was stalled", r.db.oksBefore))
	}
	if r.db.firstOKAfter == 0 {
		miss = append(miss, "no 200 after the database came back")
	}
	return strings.Join(miss, ", ")
}

func (r pgStallResult) print(out io.Writer, cfg pgStallConfig) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stall\tPOSTs\t200\t200 before resume\t503\tother\tno answer\tlongest held\tp99 held\tfirst 200 after resume\t")
	for _, x := range []struct {
		name string
		w    stallWindow
	}{{"database", r.db}, {"app", r.app}} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t%v\t\n", x.name, x.w.posts, x.w.oks, x.w.oksBefore, x.w.unavailable, x.w.other, x.w.noAnswer,
			x.w.maxHeld.Round(time.Millisecond), x.w.p99Held.Round(time.Millisecond), x.w.firstOKAfter.Round(time.Millisecond))
	}
	_ = tw.Flush()
	v := r.verdict()
	fmt.Fprintf(out, "RESULT pg-stall stall=%v updates=%d posts=%d oks=%d lost=%d replies_twice=%d db_posts=%d db_200=%d db_200_before_resume=%d db_503=%d db_no_answer=%d db_longest_held_ms=%d db_first_200_after_ms=%d forwards_during_db_stall=%d leases_lost=%.0f store_errors=%.0f attempt_failures=%.0f app_longest_held_ms=%d forwards_during_app_stall=%d forward_timeouts=%.0f drain_ms=%d ok=%t\n",
		cfg.stall, r.updates, r.posts, r.oks, r.lost, r.doubles, r.db.posts, r.db.oks, r.db.oksBefore, r.db.unavailable, r.db.noAnswer, r.db.maxHeld.Milliseconds(), r.db.firstOKAfter.Milliseconds(),
		r.forwardsDuringDB, r.leasesLost, r.storeErrs, r.attemptFails, r.app.maxHeld.Milliseconds(), r.forwardsApp, r.forwardTimeouts, r.drain.Milliseconds(), v == "")
	if v != "" {
		fmt.Fprintf(out, "  missed: %s\n", v)
	}
}
