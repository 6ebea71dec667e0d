package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// runCrashPG: three serve processes on one PostgreSQL behind a round-robin
// proxy; the sink makes a fenced domain write per update in its own
// transaction (telegram_updates_once, sometimes slow so kills land
// mid-write); serve processes are killed at random. Afterwards every update
// that got a 200 has exactly one effect.
func runCrashPG(ctx context.Context, args []string, out io.Writer) error {
	f := newCrashFlags("crash-pg", "updates", 2000, 80, 15, 5*time.Minute, out)
	ctx, dir, done, err := f.setup(ctx, args, out)
	if err != nil {
		return err
	}
	defer done()
	n := f.n
	res, err := crashPGRun(ctx, *f.bin, dir, *n, *f.rate, *f.kills, out)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kills\tposts\t200s\tupdates\teffects\tlost\tdouble effects\towns-only doubles\tforwards\tduplicate forwards\tslow writes\tdrain after last kill\t")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t\n", res.kills, res.posts, res.oks, *n, res.effects, res.lost, res.doubles, res.ownsDoubles,
		res.forwards, res.duplicates, res.slow, res.drain.Round(time.Millisecond))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "RESULT crash-pg updates=%d kills=%d posts=%d oks=%d effects=%d lost=%d double_effects=%d owns_only_doubles=%d duplicate_forwards=%d drain_ms=%d safe=%t\n",
		*n, res.kills, res.posts, res.oks, res.effects, res.lost, res.doubles, res.ownsDoubles, res.duplicates, res.drain.Milliseconds(), res.lost == 0 && res.doubles == 0)
	if res.lost != 0 || res.doubles != 0 {
		return fmt.Errorf("%d lost, %d double effects", res.lost, res.doubles)
	}
	return nil
}

type crashPGResult struct {
	kills                      int
	posts, oks                 int64
	effects, lost, doubles     int
	ownsDoubles                int
	forwards, duplicates, slow int
	drain                      time.Duration
}

// crashPGRun is the scenario proper, shared with its short test.
func crashPGRun(ctx context.Context, bin, dir string, n int, rate float64, minKills int, out io.Writer) (crashPGResult, error) {
	var res crashPGResult
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
	// The domain tables: no unique key, so a doubled write shows. crash_owns
	// records the writes telegram_updates_owns alone would have allowed.
	if _, err := pool.Exec(ctx, `CREATE TABLE crash_effects (update_id bigint NOT NULL, attempt int NOT NULL);
		CREATE TABLE crash_owns (update_id bigint NOT NULL, attempt int NOT NULL)`); err != nil {
		return res, err
	}

	tg := telegramtest.NewServer(telegramtest.Config{Logf: func(string, ...any) {}})
	defer tg.Close()
	const lo = 1
	var slow atomic.Int64
	effect := func(r *http.Request, id int64) error {
		return fencedEffect(r, pool, id, "crash", func(ctx context.Context) error {
			if rand.IntN(10) != 0 {
				return nil
			}
			slow.Add(1) // a slow write: a kill may land while it holds the row
			return backoff.Sleep(ctx, time.Duration(200+rand.IntN(800))*time.Millisecond)
		})
	}
	sink, err := startCrashSink(lo, n, effect)
	if err != nil {
		return res, err
	}
	defer sink.close()

	env := serveEnv(tg)
	procs, proxy, stopCluster, err := startServeCluster(ctx, "serve", 3, bin, dir, crashServeArgs(dbURL, tg.URL, sink.url), env)
	defer stopCluster()
	if err != nil {
		return res, err
	}

	fmt.Fprintf(out, "crash-pg: %d updates at %.0f/s through a round-robin proxy to 3 serve on PostgreSQL, fenced writes, random SIGKILLs (at least %d)\n", n, rate, minKills)
	gen := &crashGen{}
	var lastKill time.Time
	res.kills, lastKill, err = loadUnderKills(ctx, gen, func() string { return proxy.url }, lo, n, rate, procs, minKills, out)
	if err != nil {
		return res, err
	}
	countEffects := func() (int, error) {
		var c int
		err := pool.QueryRow(ctx, `SELECT count(DISTINCT update_id) FROM crash_effects`).Scan(&c)
		return c, err
	}
	if err := waitFor(ctx, func() bool { c, err := countEffects(); return err == nil && c == n }); err != nil {
		fmt.Fprintf(out, "  drain %v: not every update has its effect\n", err)
	}
	res.drain = time.Since(lastKill)
	for _, p := range procs {
		p.stop()
	}
	res.posts, res.oks, res.slow = gen.posts.Load(), gen.oks.Load(), int(slow.Load())
	delivered, dups := sink.tally()
	res.duplicates = dups
	res.forwards = delivered + dups
	if res.effects, err = countEffects(); err != nil {
		return res, err
	}
	q := func(sql string) (int, error) {
		var c int
		err := pool.QueryRow(context.WithoutCancel(ctx), sql).Scan(&c)
		return c, err
	}
	if res.doubles, err = q(`SELECT count(*) FROM (SELECT update_id FROM crash_effects GROUP BY update_id HAVING count(*) > 1) d`); err != nil {
		return res, err
	}
	if res.ownsDoubles, err = q(`SELECT count(*) FROM (SELECT update_id FROM crash_owns GROUP BY update_id HAVING count(*) > 1) d`); err != nil {
		return res, err
	}
	// Lost: acknowledged to the generator, no effect.
	rows, err := pool.Query(context.WithoutCancel(ctx), `SELECT DISTINCT update_id FROM crash_effects`)
	if err != nil {
		return res, err
	}
	has := make([]bool, n)
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return res, err
		}
		if i := id - lo; i >= 0 && i < int64(n) {
			has[i] = true
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
	return res, nil
}

// roundRobin is the small proxy in front of the three serve: each POST goes
// to the next one; a refused connection answers 502 (the generator posts
// again, as Telegram re-delivers).
type roundRobin struct {
	*relayServer
	next   atomic.Uint64
	procs  []*crashServe
	client *http.Client
	// accepted, when set before the first request, is told of every POST
	// a backend (index into procs) answered 200.
	accepted func(backend int, body []byte)
}

// startPostgres starts a PostgreSQL cluster for a scenario.
func startPostgres(ctx context.Context) (*pgtest.Cluster, error) {
	cluster, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return cluster, nil
}

// newDatabase creates a fresh database in cluster and a pool on it; the
// caller closes the pool.
func newDatabase(ctx context.Context, cluster *pgtest.Cluster) (dbURL string, pool *pgxpool.Pool, err error) {
	if dbURL, err = cluster.CreateDatabase(ctx); err != nil {
		return "", nil, err
	}
	if pool, err = pgxpool.New(ctx, dbURL); err != nil {
		return "", nil, err
	}
	return dbURL, pool, nil
}

// startServeCluster starts n serve processes named prefix-1 … prefix-n
// with the same flags and environment, and a round-robin proxy in front of
// them. stop ends the proxy and the processes; it is set even on an error.
func startServeCluster(ctx context.Context, prefix string, n int, bin, dir string, args, env []string) (procs []*crashServe, proxy *roundRobin, stop func(), err error) {
	stop = func() {
		if proxy != nil {
			proxy.close()
		}
		for _, s := range procs {
			s.stop()
		}
	}
	for i := range n {
		s, err := newCrashServe(fmt.Sprintf("%s-%d", prefix, i+1), bin, dir, args, env)
		if err != nil {
			return procs, nil, stop, err
		}
		procs = append(procs, s)
		if err := s.start(ctx, true); err != nil {
			return procs, nil, stop, err
		}
	}
	if proxy, err = startRoundRobin(procs); err != nil {
		return procs, nil, stop, err
	}
	return procs, proxy, stop, nil
}

func startRoundRobin(procs []*crashServe) (*roundRobin, error) {
	p := &roundRobin{procs: procs, client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 32}}}
	srv, err := startRelayServer(http.HandlerFunc(p.serve), relayWebhookPath)
	if err != nil {
		return nil, err
	}
	p.relayServer = srv
	return p, nil
}

func (p *roundRobin) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, relayMaxBody))
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	backend := int(p.next.Add(1) % uint64(len(p.procs)))
	target := p.procs[backend].webhookURL()
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		http.Error(w, "request", http.StatusInternalServerError)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := p.client.Do(req)
	if err != nil {
		http.Error(w, "backend down", http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && p.accepted != nil {
		p.accepted(backend, body)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (p *roundRobin) close() {
	p.relayServer.close()
	p.client.CloseIdleConnections()
}
