package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// runCrashPayments: serve on PostgreSQL forwards successful_payment updates
// to examples/payments, which fulfils each in one transaction with its
// fence (pgstore's Once, or telegram_updates_once: the app alternates
// between the two at every restart). A generator plays Telegram, POSTing
// distinct payments (re-posting each until 200), while serve and the app
// are killed with SIGKILL in turn and restarted. Afterwards every payment
// that got a 200 is fulfilled exactly once, and every update is completed
// (a payment has no deadline: none is expired or exhausted).
func runCrashPayments(ctx context.Context, args []string, out io.Writer) error {
	f := newCrashFlags("crash-payments", "payments", 1500, 60, 16, 5*time.Minute, out)
	ctx, dir, done, err := f.setup(ctx, args, out)
	if err != nil {
		return err
	}
	defer done()
	res, err := crashPaymentsRun(ctx, *f.bin, dir, *f.n, *f.rate, *f.kills, out)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "serve kills\tapp kills\tposts\t200s\tpayments\tfulfilled\tlost\tfulfilled twice\tnot completed\tretries skipped by the fence\tstale attempts\tdrain after last kill\t")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", res.serveKills, res.appKills, res.posts, res.oks, *f.n, res.fulfilled, res.lost, res.twice,
		res.notCompleted, res.skipped, res.stale, res.drain.Round(time.Millisecond))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "RESULT crash-payments payments=%d serve_kills=%d app_kills=%d posts=%d oks=%d fulfilled=%d lost=%d fulfilled_twice=%d not_completed=%d fence_skips=%d stale=%d drain_ms=%d exactly_once=%t\n",
		*f.n, res.serveKills, res.appKills, res.posts, res.oks, res.fulfilled, res.lost, res.twice, res.notCompleted, res.skipped, res.stale, res.drain.Milliseconds(), res.exactlyOnce())
	if !res.exactlyOnce() {
		return fmt.Errorf("%d lost, %d fulfilled twice, %d not completed", res.lost, res.twice, res.notCompleted)
	}
	return nil
}

type crashPaymentsResult struct {
	serveKills, appKills int
	posts, oks           int64
	// fulfilled counts charges with a purchase; twice, charges with more
	// than one; lost, payments acknowledged to the generator without one.
	fulfilled, twice, lost int
	notCompleted           int // update rows in any state but completed
	// From the app's log (lines cut by a kill are missed): retries the
	// fence answered "already fulfilled", and stale attempts refused.
	skipped, stale int
	drain          time.Duration
}

func (r crashPaymentsResult) exactlyOnce() bool {
	return r.lost == 0 && r.twice == 0 && r.notCompleted == 0
}

// paymentUpdate is a successful_payment of 250 Telegram Stars with the
// charge id ch_<id>.
func paymentUpdate(id, chat int64) []byte {
	s := strconv.FormatInt(id, 10)
	c := strconv.FormatInt(chat, 10)
	return []byte(`{"update_id":` + s + `,"message":{"message_id":` + s + `,"date":1764400000` +
		`,"from":{"id":` + c + `,"is_bot":false,"first_name":"User"},"chat":{"id":` + c + `,"first_name":"User","type":"private"}` +
		`,"successful_payment":{"currency":"XTR","total_amount":250,"invoice_payload":"order-` + s +
		`","telegram_payment_charge_id":"ch_` + s + `","provider_payment_charge_id":""}}}`)
}

// buildPaymentsApp builds examples/payments into dir.
func buildPaymentsApp(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "payments")
	b, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/tgrelay/tgrelay/examples/payments").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build examples/payments: %v\n%s", err, b)
	}
	return bin, nil
}

// crashPaymentsRun is the scenario proper, shared with its short test.
func crashPaymentsRun(ctx context.Context, bin, dir string, n int, rate float64, minKills int, out io.Writer) (crashPaymentsResult, error) {
	var res crashPaymentsResult
	appBin, err := buildPaymentsApp(ctx, dir)
	if err != nil {
		return res, err
	}
	cluster, err := startPostgres(ctx)
	if err != nil {
		return res, err
	}
	defer cluster.Stop()
	dbURL, pool, err := newDatabase(ctx, cluster)
	if err != nil {
		return res, err
	}
	defer pool.Close()

	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()
	app, err := newPaymentsApp(appBin, dbURL, dir)
	if err != nil {
		return res, err
	}
	if err := app.start(ctx, true); err != nil {
		return res, err
	}
	defer app.stop()
	s, err := startServe(ctx, "serve", bin, dir, crashServeArgs(dbURL, tg.URL, app.url()), tg)
	if err != nil {
		return res, err
	}
	defer s.stop()

	fmt.Fprintf(out, "crash-payments: %d successful_payment updates at %.0f/s into serve on PostgreSQL, forwarded to examples/payments; serve and the app killed in turn every 1-2 s (at least %d kills)\n", n, rate, minKills)
	const lo = 1
	gen := &crashGen{body: paymentUpdate}
	load := func() error { return gen.run(ctx, s.webhookURL, lo, n, 16, rate) }
	// Kills alternate, serve first, every 1-2 s, until the load is done and
	// at least minKills happened; none after the load ended.
	alternate := func(k int) (time.Duration, int) { return time.Second + time.Duration(k%5)*200*time.Millisecond, k % 2 }
	kills, lastKill, err := killsScheduled(ctx, load, []crashProc{s, app}, alternate, minKills, out)
	res.serveKills, res.appKills = (kills+1)/2, kills/2
	if err != nil {
		return res, err
	}

	q := func(sql string) (int, error) {
		var c int
		err := pool.QueryRow(context.WithoutCancel(ctx), sql).Scan(&c)
		return c, err
	}
	// Settled: every payment has its purchase and every row is completed.
	settled := func() bool {
		f, err1 := q(`SELECT count(DISTINCT charge_id) FROM purchases`)
		open, err2 := q(`SELECT count(*) FROM ` + pgstore.DefaultTable + ` WHERE state <> 'completed'`)
		return err1 == nil && err2 == nil && f == n && open == 0
	}
	if err := waitFor(ctx, settled); err != nil {
		fmt.Fprintf(out, "  drain %v: not every payment fulfilled and completed\n", err)
	}
	res.drain = time.Since(lastKill)
	s.stop()
	app.stop()
	res.posts, res.oks = gen.posts.Load(), gen.oks.Load()
	if res.fulfilled, err = q(`SELECT count(DISTINCT charge_id) FROM purchases`); err != nil {
		return res, err
	}
	if res.twice, err = q(`SELECT count(*) FROM (SELECT charge_id FROM purchases GROUP BY charge_id HAVING count(*) > 1) d`); err != nil {
		return res, err
	}
	if res.notCompleted, err = q(`SELECT count(*) FROM ` + pgstore.DefaultTable + ` WHERE state <> 'completed'`); err != nil {
		return res, err
	}
	rows, err := pool.Query(context.WithoutCancel(ctx), `SELECT DISTINCT charge_id FROM purchases`)
	if err != nil {
		return res, err
	}
	has := make([]bool, n)
	for rows.Next() {
		var charge string
		if err := rows.Scan(&charge); err != nil {
			return res, err
		}
		if id, err := strconv.ParseInt(strings.TrimPrefix(charge, "ch_"), 10, 64); err == nil && id >= lo && id < lo+int64(n) {
			has[id-lo] = true
		}
	}
	if err := rows.Err(); err != nil {
		return res, err
	}
	for i := range n {
		if gen.acked[i].Load() && !has[i] {
			res.lost++
		}
	}
	res.skipped, res.stale = app.logCounts()
	return res, nil
}

// paymentsApp is the examples/payments process, killed and restarted on
// the same address; each start switches its fence (go, sql, go, …).
type paymentsApp struct {
	childProc
	bin, db, listen string
	starts          int
}

func newPaymentsApp(bin, db, dir string) (*paymentsApp, error) {
	listen, err := relayFreeAddr()
	if err != nil {
		return nil, err
	}
	return &paymentsApp{childProc: childProc{name: "the payments app", logPath: filepath.Join(dir, "payments.log")},
		bin: bin, db: db, listen: listen}, nil
}

func (a *paymentsApp) url() string { return "http://" + a.listen + "/update" }

// start starts the app; ready waits until it accepts connections.
func (a *paymentsApp) start(ctx context.Context, ready bool) error {
	fence := "go"
	if a.starts%2 == 1 {
		fence = "sql"
	}
	a.starts++
	cmd := exec.Command(a.bin, "-db", a.db, "-listen", a.listen, "-fence", fence)
	cmd.Env = childEnv()
	if err := a.launch(cmd); err != nil {
		return err
	}
	if !ready {
		return nil
	}
	up := func() bool {
		if a.exited() {
			return true
		}
		c, err := net.DialTimeout("tcp", a.listen, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	if err := waitFor(ctx, up); err != nil || a.exited() {
		a.kill()
		return fmt.Errorf("the payments app did not start:\n%s", tail(a.logPath))
	}
	return nil
}

// logCounts counts the app's "already fulfilled" and "stale attempt" lines.
func (a *paymentsApp) logCounts() (skipped, stale int) {
	f, err := os.Open(a.logPath)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		switch line := sc.Text(); {
		case strings.Contains(line, " already fulfilled update="):
			skipped++
		case strings.Contains(line, " stale attempt update="):
			stale++
		}
	}
	return skipped, stale
}
