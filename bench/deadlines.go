package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// The deadlines scenario: serve on PostgreSQL forwards to an app whose
// ordinary messages are slow, under a load of them above what serve's
// --concurrency lets the app do, so a backlog grows. Among them arrive
// callback queries and pre-checkout queries, which the app answers at once
// through serve's gateway; a pre-checkout answered ok is followed by the
// user's successful_payment, which the app fulfils with the SQL fence. The
// same load runs twice: serve with its per-type deadlines ("tgrelay") and
// with every update treated alike (--deadline-callback-query 0
// --deadline-pre-checkout-query 0, "alike"). A fake Telegram in front of
// telegramtest takes the answers: it measures each from the moment the
// update was first POSTed to serve's webhook, and refuses one past its
// deadline with Telegram's wording.

// errNeedsDeadlineCore: serve does not know the --deadline-* flags.
var errNeedsDeadlineCore = errors.New("bench deadlines needs the deadline core (issue 26 items 1-2: serve's --deadline-callback-query and --deadline-pre-checkout-query); this tgrelay binary does not define them; -variants alike -alike-without-flags runs the baseline alone")

// Telegram's refusal of an answer to a query that is too old or unknown.
const tooOld = "Bad Request: query is too old and response timeout expired or query ID is invalid"

// deadlinesConfig is one run's load.
type deadlinesConfig struct {
	rate, cbRate, pcqRate float64
	duration, work        time.Duration
	chats, concurrency    int
	cbDeadline            time.Duration
	pcqDeadline           time.Duration
	withoutFlags          bool // alike variant: pass no --deadline-* flag
}

func runDeadlines(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("deadlines", flag.ContinueOnError)
	fs.SetOutput(out)
	var c deadlinesConfig
	fs.Float64Var(&c.rate, "rate", 60, "ordinary messages per second (open loop)")
	fs.Float64Var(&c.cbRate, "callback-rate", 2, "callback queries per second")
	fs.Float64Var(&c.pcqRate, "pre-checkout-rate", 1, "pre-checkout queries per second")
	fs.DurationVar(&c.duration, "duration", time.Minute, "how long the load runs, per variant")
	fs.DurationVar(&c.work, "work", 200*time.Millisecond, "the app's time per ordinary message")
	fs.IntVar(&c.chats, "chats", 20, "chats the load is spread over")
	fs.IntVar(&c.concurrency, "concurrency", 8, "serve's --concurrency (with -work: the app's capacity, concurrency/work per second)")
	fs.DurationVar(&c.cbDeadline, "callback-deadline", 15*time.Second, "the callback queries' deadline (serve's --deadline-callback-query, and the fake Telegram's)")
	fs.DurationVar(&c.pcqDeadline, "pre-checkout-deadline", 10*time.Second, "the pre-checkout queries' deadline (serve's --deadline-pre-checkout-query, and the fake Telegram's)")
	variants := fs.String("variants", "alike,tgrelay", "which variants to run, in order")
	fs.BoolVar(&c.withoutFlags, "alike-without-flags", false, "run the alike variant without any --deadline-* flag (for a serve from before the deadline core, which treats every update alike)")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound of the whole run")
	bin := fs.String("bin", "", "tgrelay binary (default: built into a temp dir)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	for _, v := range strings.Split(*variants, ",") {
		if v != "alike" && v != "tgrelay" {
			return fmt.Errorf("-variants: unknown variant %q (want alike, tgrelay)", v)
		}
	}
	if c.rate <= 0 || c.cbRate <= 0 || c.pcqRate <= 0 || c.chats < 1 || c.concurrency < 1 || c.duration <= 0 {
		return errors.New("rates, -duration, -chats and -concurrency must be positive")
	}
	ctx, dir, done, err := benchWorkspace(ctx, fs.Name(), *timeout, bin, out)
	if err != nil {
		return err
	}
	defer done()
	cluster, err := startPostgres(ctx)
	if err != nil {
		return err
	}
	defer cluster.Stop()

	fmt.Fprintf(out, "deadlines: %.0f messages/s over %d chats for %v, the app %v per message behind --concurrency %d (capacity %.0f/s); %.1f callback queries/s (deadline %v), %.1f pre-checkout queries/s (deadline %v), each paid\n",
		c.rate, c.chats, c.duration, c.work, c.concurrency, float64(c.concurrency)/c.work.Seconds(), c.cbRate, c.cbDeadline, c.pcqRate, c.pcqDeadline)
	results := map[string]deadlinesResult{}
	var order []string
	for _, v := range strings.Split(*variants, ",") {
		res, err := deadlinesRun(ctx, *bin, dir, cluster, c, v, out)
		if err != nil {
			return fmt.Errorf("%s: %w", v, err)
		}
		results[v] = res
		order = append(order, v)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tkind\tqueries\tanswered in time\tdeclined by the relay\tapp too late\tleft to time out\tapp p50\tapp p99\tapp max\t")
	for _, v := range order {
		r := results[v]
		for _, k := range []*deadlinesKind{&r.cb, &r.pcq} {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d (%.1f%%)\t%d\t%d\t%d\t%v\t%v\t%v\t\n", v, k.name, k.total, k.inTime, k.share(), k.declined, k.late, k.timedOut(),
				percentile(k.appTimes, 0.5).Round(time.Millisecond), percentile(k.appTimes, 0.99).Round(time.Millisecond), percentile(k.appTimes, 1).Round(time.Millisecond))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tmessages\tpayments\tfulfilled\tfulfilled twice\tdrain after the load\t")
	for _, v := range order {
		r := results[v]
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%v\t\n", v, r.messages, r.payments, r.fulfilled, r.twice, r.drain.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	line := "RESULT deadlines"
	twice, unfulfilled := 0, 0
	for _, v := range order {
		r := results[v]
		twice += r.twice
		unfulfilled += r.payments - r.fulfilled
		line += fmt.Sprintf(" %s_cb_in_time_pct=%.1f %s_pcq_in_time_pct=%.1f %s_cb_declined=%d %s_pcq_declined=%d %s_pcq_timed_out=%d %s_cb_p99_ms=%d %s_pcq_p99_ms=%d %s_fulfilled_twice=%d",
			v, r.cb.share(), v, r.pcq.share(), v, r.cb.declined, v, r.pcq.declined, v, r.pcq.timedOut(),
			v, percentile(r.cb.appTimes, 0.99).Milliseconds(), v, percentile(r.pcq.appTimes, 0.99).Milliseconds(), v, r.twice)
	}
	if r, ok := results["tgrelay"]; ok {
		line += fmt.Sprintf(" goal=%t", r.cb.share() >= 99 && r.pcq.share() >= 99 && r.pcq.timedOut() == 0 && r.twice == 0)
	}
	fmt.Fprintln(out, line)
	if twice != 0 || unfulfilled != 0 {
		return fmt.Errorf("%d payments fulfilled twice, %d not fulfilled (a successful_payment has no deadline)", twice, unfulfilled)
	}
	return nil
}

// deadlinesKind counts one kind of query in one variant.
type deadlinesKind struct {
	name     string
	total    int
	inTime   int             // the app's answer arrived within the deadline
	declined int             // the relay's decline arrived within it (and no app answer before)
	late     int             // the app's answer arrived after it (refused)
	appTimes []time.Duration // every app answer's time, in time or late
}

func (k *deadlinesKind) share() float64 {
	if k.total == 0 {
		return 0
	}
	return 100 * float64(k.inTime) / float64(k.total)
}

// timedOut counts queries without any answer within the deadline.
func (k *deadlinesKind) timedOut() int { return k.total - k.inTime - k.declined }

type deadlinesResult struct {
	cb, pcq            deadlinesKind
	messages, payments int
	fulfilled, twice   int
	drain              time.Duration
}

// deadlinesRun runs one variant on a fresh database of cluster.
func deadlinesRun(ctx context.Context, bin, dir string, cluster *pgtest.Cluster, c deadlinesConfig, variant string, out io.Writer) (deadlinesResult, error) {
	res := deadlinesResult{cb: deadlinesKind{name: "callback"}, pcq: deadlinesKind{name: "pre-checkout"}}
	dbURL, pool, err := newDatabase(ctx, cluster)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE purchases (charge_id text NOT NULL, update_id bigint NOT NULL)`); err != nil {
		return res, err
	}
	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()
	gen := &deadlinesGen{}
	fake, err := startDeadlinesTelegram(tg.URL, map[string]time.Duration{"cb": c.cbDeadline, "pcq": c.pcqDeadline}, gen.paid)
	if err != nil {
		return res, err
	}
	defer fake.close()
	app, err := startDeadlinesApp(pool, tg.Token, c.work)
	if err != nil {
		return res, err
	}
	defer app.close()

	args := append(crashServeArgs(dbURL, strings.TrimSuffix(fake.url, "/"), app.url), "--concurrency", strconv.Itoa(c.concurrency))
	switch {
	case variant == "tgrelay":
		args = append(args, "--deadline-callback-query", c.cbDeadline.String(), "--deadline-pre-checkout-query", c.pcqDeadline.String())
	case !c.withoutFlags:
		args = append(args, "--deadline-callback-query", "0", "--deadline-pre-checkout-query", "0")
	}
	s, err := startServe(ctx, "serve-"+variant, bin, dir, args, tg)
	if err != nil {
		if s == nil {
			return res, err
		}
		if b, _ := os.ReadFile(s.logPath); bytes.Contains(b, []byte("flag provided but not defined: -deadline")) {
			return res, errNeedsDeadlineCore
		}
		return res, err
	}
	defer s.stop()

	fmt.Fprintf(out, "  %s: load for %v ...\n", variant, c.duration)
	gen.init(ctx, s.webhookURL(), fake)
	loadEnd := gen.load(c)
	// Drained: every message handled, every payment fulfilled, and every
	// query past its deadline (so an answer still on its way counts).
	last := max(c.cbDeadline, c.pcqDeadline)
	drained := func() bool {
		if time.Since(loadEnd) < last+time.Second || int(app.messages.Load()) < gen.messages() {
			return false
		}
		var f int
		err := pool.QueryRow(ctx, `SELECT count(DISTINCT charge_id) FROM purchases`).Scan(&f)
		return err == nil && f >= int(gen.payments.Load())
	}
	if err := waitFor(ctx, drained); err != nil {
		fmt.Fprintf(out, "  %s: drain %v: not every message handled and payment fulfilled\n", variant, err)
	}
	res.drain = time.Since(loadEnd)
	gen.wait()
	s.stop()

	res.messages, res.payments = gen.messages(), int(gen.payments.Load())
	fake.tally(&res.cb, "cb")
	fake.tally(&res.pcq, "pcq")
	q := func(sql string) (int, error) {
		var n int
		err := pool.QueryRow(context.WithoutCancel(ctx), sql).Scan(&n)
		return n, err
	}
	if res.fulfilled, err = q(`SELECT count(DISTINCT charge_id) FROM purchases`); err != nil {
		return res, err
	}
	if res.twice, err = q(`SELECT count(*) FROM (SELECT charge_id FROM purchases GROUP BY charge_id HAVING count(*) > 1) d`); err != nil {
		return res, err
	}
	return res, nil
}

// deadlinesGen plays Telegram's users: it POSTs updates to serve's webhook
// (each until it gets a 200, at most relayMaxPosts times) and records when
// a query was first sent.
type deadlinesGen struct {
	ctx      context.Context
	url      string
	fake     *deadlinesTelegram
	client   *http.Client
	nextID   atomic.Int64
	msgs     atomic.Int64
	payments atomic.Int64
	wg       sync.WaitGroup
	chats    int
}

func (g *deadlinesGen) init(ctx context.Context, url string, fake *deadlinesTelegram) {
	g.ctx, g.url, g.fake = ctx, url, fake
	g.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
}

func (g *deadlinesGen) messages() int { return int(g.msgs.Load()) }

// post sends body in its own goroutine; sent, when set, is called just
// before the first POST.
func (g *deadlinesGen) post(body []byte, sent func()) {
	g.wg.Go(func() {
		if sent != nil {
			sent()
		}
		for range relayMaxPosts {
			if crashPost(g.ctx, g.client, g.url, body) || g.ctx.Err() != nil {
				return
			}
			_ = backoff.Sleep(g.ctx, relayRepostPause)
		}
	})
}

// load runs the open-loop load for c.duration and returns when it ended.
func (g *deadlinesGen) load(c deadlinesConfig) time.Time {
	g.chats = c.chats
	start := time.Now()
	var sentMsgs, sentCB, sentPCQ int
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for g.ctx.Err() == nil {
		el := time.Since(start)
		if el >= c.duration {
			break
		}
		for ; float64(sentMsgs) < el.Seconds()*c.rate; sentMsgs++ {
			id := g.nextID.Add(1)
			g.msgs.Add(1)
			g.post(telegramUpdate(id, g.chat(id)), nil)
		}
		for ; float64(sentCB) < el.Seconds()*c.cbRate; sentCB++ {
			id := g.nextID.Add(1)
			qid := "cb_" + strconv.FormatInt(id, 10)
			g.post(callbackUpdate(id, g.chat(id), qid), func() { g.fake.sent(qid, "cb") })
		}
		for ; float64(sentPCQ) < el.Seconds()*c.pcqRate; sentPCQ++ {
			id := g.nextID.Add(1)
			qid := "pcq_" + strconv.FormatInt(id, 10)
			g.post(preCheckoutUpdate(id, g.chat(id), qid), func() { g.fake.sent(qid, "pcq") })
		}
		select {
		case <-tick.C:
		case <-g.ctx.Done():
		}
	}
	return time.Now()
}

// chat spreads the updates over the chats: 1000, 1001, …
func (g *deadlinesGen) chat(id int64) int64 { return 1000 + id%int64(g.chats) }

// paid is the user paying after the app's ok to a pre-checkout query: a
// successful_payment in the query's chat, with the charge id ch_<its id>.
func (g *deadlinesGen) paid(qid string) {
	if g.ctx == nil || g.ctx.Err() != nil {
		return
	}
	id := g.nextID.Add(1)
	g.payments.Add(1)
	g.post(paymentUpdate(id, g.chat(id)), nil)
}

func (g *deadlinesGen) wait() {
	g.wg.Wait()
	g.client.CloseIdleConnections()
}

func callbackUpdate(id, chat int64, qid string) []byte {
	s, c := strconv.FormatInt(id, 10), strconv.FormatInt(chat, 10)
	return []byte(`{"update_id":` + s + `,"callback_query":{"id":"` + qid + `","from":{"id":` + c + `,"is_bot":false,"first_name":"User"}` +
		`,"message":{"message_id":1,"date":1764400000,"chat":{"id":` + c + `,"first_name":"User","type":"private"},"text":"Pick one"}` +
		`,"chat_instance":"ci` + c + `","data":"pick"}}`)
}

func preCheckoutUpdate(id, chat int64, qid string) []byte {
	s, c := strconv.FormatInt(id, 10), strconv.FormatInt(chat, 10)
	return []byte(`{"update_id":` + s + `,"pre_checkout_query":{"id":"` + qid + `","from":{"id":` + c + `,"is_bot":false,"first_name":"User"}` +
		`,"currency":"XTR","total_amount":250,"invoice_payload":"order-` + s + `"}}`)
}

// deadlinesTelegram is the fake Telegram serve calls: answerCallbackQuery
// and answerPreCheckoutQuery are taken here, timed and refused past their
// deadline; every other method goes on to telegramtest.
type deadlinesTelegram struct {
	*relayServer
	proxy    *httputil.ReverseProxy
	deadline map[string]time.Duration // by kind: cb, pcq
	paid     func(qid string)

	mu      sync.Mutex
	queries map[string]*deadlinesQuery
}

type deadlinesQuery struct {
	kind     string
	sent     time.Time
	answered bool            // an answer was accepted
	byApp    bool            // the accepted answer was the app's
	appTimes []time.Duration // the app's answers, accepted or refused
	late     int             // the app's answers refused as too old
}

func startDeadlinesTelegram(upstream string, deadline map[string]time.Duration, paid func(string)) (*deadlinesTelegram, error) {
	u, err := url.Parse(upstream)
	if err != nil {
		return nil, err
	}
	f := &deadlinesTelegram{proxy: httputil.NewSingleHostReverseProxy(u), deadline: deadline, paid: paid, queries: map[string]*deadlinesQuery{}}
	srv, err := startRelayServer(f, "/")
	if err != nil {
		return nil, err
	}
	f.relayServer = srv
	return f, nil
}

// sent records a query's first POST.
func (f *deadlinesTelegram) sent(qid, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queries[qid] = &deadlinesQuery{kind: kind, sent: time.Now()}
}

func (f *deadlinesTelegram) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	method := path.Base(r.URL.Path)
	if method != "answerCallbackQuery" && method != "answerPreCheckoutQuery" {
		f.proxy.ServeHTTP(w, r)
		return
	}
	p, err := readParams(r)
	if err != nil {
		telegramError(w, http.StatusBadRequest, "Bad Request: "+err.Error())
		return
	}
	var qid string
	var byApp bool
	if method == "answerCallbackQuery" {
		qid, byApp = fmt.Sprint(p["callback_query_id"]), fmt.Sprint(p["text"]) == "app"
	} else {
		qid, byApp = fmt.Sprint(p["pre_checkout_query_id"]), p["ok"] == true || p["ok"] == "true"
	}
	f.mu.Lock()
	q := f.queries[qid]
	accepted := false
	if q != nil {
		age := at.Sub(q.sent)
		inTime := age <= f.deadline[q.kind]
		if byApp {
			q.appTimes = append(q.appTimes, age)
			if !inTime {
				q.late++
			}
		}
		if inTime && !q.answered {
			q.answered, q.byApp, accepted = true, byApp, true
		}
	}
	f.mu.Unlock()
	if !accepted {
		telegramError(w, http.StatusBadRequest, tooOld)
		return
	}
	if method == "answerPreCheckoutQuery" && byApp && f.paid != nil {
		f.paid(qid)
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"ok":true,"result":true}`)
}

// tally adds the queries of kind to k.
func (f *deadlinesTelegram) tally(k *deadlinesKind, kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.queries {
		if q.kind != kind {
			continue
		}
		k.total++
		k.late += q.late
		k.appTimes = append(k.appTimes, q.appTimes...)
		switch {
		case q.answered && q.byApp:
			k.inTime++
		case q.answered:
			k.declined++
		}
	}
	slices.Sort(k.appTimes)
}

// readParams reads a Bot API call's parameters, JSON or form.
func readParams(r *http.Request) (map[string]any, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, relayMaxBody))
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		p := map[string]any{}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, err
		}
		return p, nil
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := r.ParseMultipartForm(relayMaxBody); err != nil && !errors.Is(err, http.ErrNotMultipart) {
		return nil, err
	}
	p := map[string]any{}
	for k, v := range r.Form {
		if len(v) > 0 {
			p[k] = v[0]
		}
	}
	return p, nil
}

func telegramError(w http.ResponseWriter, code int, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	b, _ := json.Marshal(map[string]any{"ok": false, "error_code": code, "description": desc})
	_, _ = w.Write(b)
}

// deadlinesApp is the bot behind serve: slow ordinary messages, queries
// answered at once through the gateway (the forward's Tgrelay-Api-Root),
// payments fulfilled with telegram_updates_once in one transaction.
type deadlinesApp struct {
	*relayServer
	pool     *pgxpool.Pool
	token    string
	work     time.Duration
	client   *http.Client
	seen     sync.Map // message update ids handled
	messages atomic.Int64
}

func startDeadlinesApp(pool *pgxpool.Pool, token string, work time.Duration) (*deadlinesApp, error) {
	a := &deadlinesApp{pool: pool, token: token, work: work, client: &http.Client{Timeout: 110 * time.Second}}
	srv, err := startRelayServer(http.HandlerFunc(a.serve), "/update")
	if err != nil {
		return nil, err
	}
	a.relayServer = srv
	return a, nil
}

func (a *deadlinesApp) serve(w http.ResponseWriter, r *http.Request) {
	var u struct {
		UpdateID int64 `json:"update_id"`
		Message  *struct {
			SuccessfulPayment *struct {
				ChargeID string `json:"telegram_payment_charge_id"`
			} `json:"successful_payment"`
		} `json:"message"`
		CallbackQuery *struct {
			ID string `json:"id"`
		} `json:"callback_query"`
		PreCheckoutQuery *struct {
			ID string `json:"id"`
		} `json:"pre_checkout_query"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, relayMaxBody)).Decode(&u); err != nil {
		http.Error(w, "not an update", http.StatusBadRequest)
		return
	}
	root := r.Header.Get(wire.HeaderAPIRoot)
	var err error
	switch {
	case u.CallbackQuery != nil:
		err = a.call(r.Context(), root, "answerCallbackQuery", map[string]any{"callback_query_id": u.CallbackQuery.ID, "text": "app"})
	case u.PreCheckoutQuery != nil:
		err = a.call(r.Context(), root, "answerPreCheckoutQuery", map[string]any{"pre_checkout_query_id": u.PreCheckoutQuery.ID, "ok": true})
	case u.Message != nil && u.Message.SuccessfulPayment != nil:
		err = a.fulfil(r, u.UpdateID, u.Message.SuccessfulPayment.ChargeID)
	default:
		if err = backoff.Sleep(r.Context(), a.work); err == nil {
			if _, dup := a.seen.LoadOrStore(u.UpdateID, true); !dup {
				a.messages.Add(1)
			}
		}
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// call makes a Bot API call through the gateway, on the forward's
// per-attempt root joined the usual way (root + "/bot<token>/<method>"). Telegram's refusal (a
// late answer) is an answer: nothing to retry.
func (a *deadlinesApp) call(ctx context.Context, root, method string, params map[string]any) error {
	if root == "" {
		return errors.New("no Tgrelay-Api-Root: is serve's gateway off?")
	}
	b, _ := json.Marshal(params)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, root+"/bot"+a.token+"/"+method, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, relayMaxBody))
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusTooManyRequests {
		return fmt.Errorf("%s: %s", method, resp.Status)
	}
	return nil
}

// fulfil writes the purchase under the SQL fence, keyed by the charge id.
func (a *deadlinesApp) fulfil(r *http.Request, updateID int64, charge string) error {
	ctx := r.Context()
	attempt, err := strconv.Atoi(r.Header.Get(wire.HeaderAttempt))
	if err != nil {
		return err
	}
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	var once bool
	if err := tx.QueryRow(ctx, `SELECT telegram_updates_once($1, $2, $3, NULL, 'payment:' || $4)`,
		updateID, attempt, r.Header.Get(wire.HeaderClaimID), charge).Scan(&once); err != nil {
		return err
	}
	if once {
		if _, err := tx.Exec(ctx, `INSERT INTO purchases VALUES ($1, $2)`, charge, updateID); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}
