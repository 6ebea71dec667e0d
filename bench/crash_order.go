package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// runChatOrder: three serve processes on one PostgreSQL behind a round-robin
// proxy, updates of -chats chats, each chat's updates posted in order (the
// next once the previous got its 200, as Telegram delivers a chat). The app
// endpoint takes 5-30 ms per update and records when each forward starts
// and ends. Three runs on fresh databases, one after the other: the default
// --chat-order process without kills (the baseline: updates of one chat
// that different processes took overlap and overtake), --chat-order strict
// without kills, and strict under random SIGKILLs. Strict must show no
// overtaken update, no forward started while another of its chat ran, and
// none started while an earlier update of its chat was not yet answered 2xx.
func runChatOrder(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("chat-order", flag.ContinueOnError)
	fs.SetOutput(out)
	n := fs.Int("updates", 3000, "updates per run")
	chats := fs.Int("chats", 20, "chats the updates are spread over")
	rate := fs.Float64("rate", 1000, "updates posted per second, at most (enough to back a chat up)")
	kills := fs.Int("kills", 10, "least SIGKILLs in the strict run with kills")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound of the whole run")
	bin := fs.String("bin", "", "tgrelay binary (default: built into a temp dir)")
	if err := fs.Parse(args); err != nil {
		return err
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

	runs := []struct {
		mode  string
		kills int
	}{{"process", 0}, {"strict", 0}, {"strict", *kills}}
	var results []chatOrderResult
	for _, r := range runs {
		fmt.Fprintf(out, "chat-order: %d updates of %d chats at up to %.0f/s, 3 serve --chat-order %s on PostgreSQL, %d+ SIGKILLs\n", *n, *chats, *rate, r.mode, r.kills)
		res, err := chatOrderRun(ctx, *bin, dir, cluster, r.mode, *n, *chats, *rate, r.kills, out)
		if err != nil {
			return fmt.Errorf("%s with %d kills: %w", r.mode, r.kills, err)
		}
		results = append(results, res)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "chat order\tkills\tupdates\tforwards\tovertaken\tstarted while its chat ran\tstarted before an earlier one was answered\tlost\tupdates/s\tp50 receive->answered\t")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%v\t\n", r.mode, r.kills, r.updates, r.forwards, r.overtaken, r.concurrent, r.early, r.lost,
			r.rate, r.p50.Round(time.Millisecond))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	p, s, k := results[0], results[1], results[2]
	ok := s.clean() && k.clean()
	fmt.Fprintf(out, "RESULT chat-order updates=%d chats=%d process_overtaken=%d process_concurrent=%d process_early=%d process_rate=%.0f "+
		"strict_overtaken=%d strict_concurrent=%d strict_early=%d strict_rate=%.0f "+
		"kills=%d strict_kill_overtaken=%d strict_kill_concurrent=%d strict_kill_early=%d strict_kill_lost=%d in_order=%t\n",
		*n, *chats, p.overtaken, p.concurrent, p.early, p.rate, s.overtaken, s.concurrent, s.early, s.rate,
		k.kills, k.overtaken, k.concurrent, k.early, k.lost, ok)
	if !ok {
		return errors.New("strict chat order was broken")
	}
	return nil
}

// chatOrderResult is what one run saw.
type chatOrderResult struct {
	mode                      string
	kills, updates, forwards  int
	overtaken, concurrent     int
	early, lost, notCompleted int
	rate                      float64       // updates per second, first post to last answer
	p50                       time.Duration // from the first post of an update to the app's first answer
}

// clean reports whether the run kept every chat in order and lost nothing.
func (r chatOrderResult) clean() bool {
	return r.overtaken == 0 && r.concurrent == 0 && r.early == 0 && r.lost == 0 && r.notCompleted == 0
}

// chatOrderRun is one run on a fresh database of cluster, shared with the
// scenario's short test.
func chatOrderRun(ctx context.Context, bin, dir string, cluster *pgtest.Cluster, mode string, n, chats int, rate float64, minKills int, out io.Writer) (chatOrderResult, error) {
	res := chatOrderResult{mode: mode, updates: n}
	dbURL, pool, err := newDatabase(ctx, cluster)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()
	app, err := startOrderApp(n, chats)
	if err != nil {
		return res, err
	}
	defer app.close()

	env := serveEnv(tg)
	args := append(crashServeArgs(dbURL, tg.URL, app.url), "--chat-order", mode)
	procs, proxy, stopCluster, err := startServeCluster(ctx, mode+"-serve", 3, bin, dir, args, env)
	defer stopCluster()
	if err != nil {
		return res, err
	}

	gen := &orderGen{app: app}
	t0 := time.Now()
	load := func() error { return gen.run(ctx, proxy.url, n, chats, rate) }
	if minKills > 0 {
		if res.kills, _, err = killsDuring(ctx, load, procs, minKills, out); err != nil {
			return res, err
		}
	} else if err := load(); err != nil {
		return res, fmt.Errorf("generator: %w", err)
	}
	// Drained: the app answered every update, and every row is completed
	// (a row whose process was killed after the app's answer is forwarded
	// again once its lease lapses; the run waits for that too).
	open := func() (int, error) {
		var c int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM telegram_updates WHERE state <> 'completed'`).Scan(&c)
		return c, err
	}
	if err := waitFor(ctx, func() bool { c, err := open(); return app.answeredAll() && err == nil && c == 0 }); err != nil {
		fmt.Fprintf(out, "  drain %v: not every update was answered and completed\n", err)
	}
	elapsed := app.lastAnswer().Sub(t0)
	for _, p := range procs {
		p.stop()
	}
	if res.notCompleted, err = open(); err != nil {
		return res, err
	}
	res.forwards, res.overtaken, res.concurrent, res.early = app.tally()
	res.lost = n - app.answered()
	if elapsed > 0 {
		res.rate = float64(n) / elapsed.Seconds()
	}
	res.p50 = gen.p50(app)
	return res, nil
}

// orderGen plays Telegram for the chat order runs: one poster per chat
// posts the chat's updates in order, each until it is answered 200, at
// most rate per second in all. Update id 1+k*chats+c is update k of chat c,
// so ids grow across chats as they would.
type orderGen struct {
	app    *orderApp
	posted []time.Time // by update index: its first post
}

func (g *orderGen) run(ctx context.Context, url string, n, chats int, rate float64) error {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: chats, DisableCompression: true}}
	defer client.CloseIdleConnections()
	g.posted = make([]time.Time, n)
	tokens := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
			select {
			case tokens <- struct{}{}:
			case <-ctx.Done():
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for c := range chats {
		wg.Go(func() {
			for i := c; i < n; i += chats {
				select {
				case <-tokens:
				case <-ctx.Done():
					return
				}
				id := int64(i + 1)
				body := telegramUpdate(id, int64(5000+c))
				g.posted[i] = time.Now()
				for ctx.Err() == nil && !crashPost(ctx, client, url, body) {
					_ = backoff.Sleep(ctx, 20*time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// p50 is the median time from an update's first post to the app's first
// answer to it.
func (g *orderGen) p50(app *orderApp) time.Duration {
	app.mu.Lock()
	defer app.mu.Unlock()
	var ds []time.Duration
	for i, t := range app.firstAnswer {
		if !t.IsZero() && !g.posted[i].IsZero() {
			ds = append(ds, t.Sub(g.posted[i]))
		}
	}
	if len(ds) == 0 {
		return 0
	}
	return percentile(ds, 50)
}

// orderApp is the bot's endpoint: it takes 5-30 ms per update, answers 200
// with the acknowledgement, and checks at every forward's start, per chat:
// whether an update started first after a later one of its chat had
// (overtaken), whether another forward of its chat was still running
// (concurrent), and whether an earlier update of its chat had not yet been
// answered 2xx (early: forwarded while an earlier one was unsettled).
type orderApp struct {
	*relayServer
	chats int

	mu          sync.Mutex
	running     []int         // by chat: forwards in progress
	maxStarted  []int         // by chat: the highest sequence number started, -1 none
	nextOpen    []int         // by chat: the lowest sequence number not yet answered
	done        []bool        // by update index: answered 2xx
	started     []bool        // by update index: forwarded at least once
	firstAnswer []time.Time   // by update index
	last        time.Time     // the latest first answer
	forwards    int           // forwards started
	overtaken   int           // updates whose first forward came after a later one's of their chat
	concurrent  int           // forwards started while another of their chat ran
	early       int           // forwards started while an earlier update of their chat was unanswered
	answers     atomic.Uint64 // updates answered at least once
}

func startOrderApp(n, chats int) (*orderApp, error) {
	a := &orderApp{chats: chats, running: make([]int, chats), maxStarted: make([]int, chats), nextOpen: make([]int, chats),
		done: make([]bool, n), started: make([]bool, n), firstAnswer: make([]time.Time, n)}
	for c := range a.maxStarted {
		a.maxStarted[c] = -1
	}
	srv, err := startRelayServer(http.HandlerFunc(a.serve), "/update")
	if err != nil {
		return nil, err
	}
	a.relayServer = srv
	return a, nil
}

func (a *orderApp) serve(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.Header.Get(wire.HeaderUpdateID), 10, 64)
	i := int(id - 1)
	if err != nil || i < 0 || i >= len(a.done) {
		http.Error(w, "unknown update", http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, relayMaxBody))
	chat, seq := i%a.chats, i/a.chats
	a.mu.Lock()
	a.forwards++
	if a.running[chat] > 0 {
		a.concurrent++
	}
	if seq > a.nextOpen[chat] {
		a.early++
	}
	if !a.started[i] {
		a.started[i] = true
		if a.maxStarted[chat] > seq {
			a.overtaken++
		}
		a.maxStarted[chat] = max(a.maxStarted[chat], seq)
	}
	a.running[chat]++
	a.mu.Unlock()

	err = backoff.Sleep(r.Context(), time.Duration(5+rand.IntN(26))*time.Millisecond)

	a.mu.Lock()
	a.running[chat]--
	if err == nil && !a.done[i] {
		a.done[i] = true
		a.firstAnswer[i] = time.Now()
		a.last = a.firstAnswer[i]
		a.answers.Add(1)
		for a.nextOpen[chat]*a.chats+chat < len(a.done) && a.done[a.nextOpen[chat]*a.chats+chat] {
			a.nextOpen[chat]++
		}
	}
	a.mu.Unlock()
	if err != nil {
		return // the forward was abandoned (its serve died): no answer
	}
	w.Header().Set("Tgrelay-Ack", r.Header.Get(wire.HeaderClaimID))
	w.WriteHeader(http.StatusOK)
}

func (a *orderApp) answered() int     { return int(a.answers.Load()) }
func (a *orderApp) answeredAll() bool { return a.answered() == len(a.done) }

func (a *orderApp) lastAnswer() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

func (a *orderApp) tally() (forwards, overtaken, concurrent, early int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.forwards, a.overtaken, a.concurrent, a.early
}
