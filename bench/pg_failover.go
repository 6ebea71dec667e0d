package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// runPGFailover: a PostgreSQL primary with a synchronous streaming standby
// (pg_basebackup, synchronous_standby_names); serve and the app reach them
// through one multi-host URL with target_session_attrs=read-write. Under a
// steady load the primary is killed with SIGKILL and, -promote-after
// later (a failover manager's detection), the standby is promoted with
// pg_ctl promote. serve is not restarted. The app makes a fenced domain
// write per update (telegram_updates_owns and telegram_updates_once in its
// own transaction, as crash-pg's). Afterwards: updates answered 200 with no
// effect on the new primary (lost), updates with two effects, what the
// webhook answered while no server accepted writes and how long it held a
// POST, and the time from the promotion to the first 200.
func runPGFailover(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("pg-failover", flag.ContinueOnError)
	fs.SetOutput(out)
	var cfg pgFailoverConfig
	fs.Float64Var(&cfg.rate, "rate", 100, "updates per second")
	fs.DurationVar(&cfg.settle, "settle", 10*time.Second, "steady load before the kill and after the promotion")
	fs.DurationVar(&cfg.promoteAfter, "promote-after", 5*time.Second, "time from the primary's death to pg_ctl promote")
	fs.StringVar(&cfg.syncCommit, "synchronous-commit", "on", "the primary's synchronous_commit: on (wait for the standby's flush), remote_apply, remote_write or local")
	bin := fs.String("bin", "", "tgrelay binary (default: built into a temp dir)")
	timeout := fs.Duration("timeout", 10*time.Minute, "bound of the whole run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, dir, done, err := benchWorkspace(ctx, "pg-failover", *timeout, bin, out)
	if err != nil {
		return err
	}
	defer done()
	res, err := pgFailoverRun(ctx, *bin, dir, cfg, out)
	if err != nil {
		return err
	}
	res.print(out, cfg)
	if v := res.verdict(cfg); v != "" {
		return fmt.Errorf("%s", v)
	}
	return nil
}

// pgFailoverKillGrace: a 200 answered this soon after the SIGKILL is a
// commit the primary (and its standby) acknowledged before it, on its way
// to the generator; such updates are in the lost count like any other.
const pgFailoverKillGrace = 50 * time.Millisecond

type pgFailoverConfig struct {
	rate                 float64
	settle, promoteAfter time.Duration
	syncCommit           string
}

type pgFailoverResult struct {
	updates                int
	posts, oks             int64
	lost, doubles, effects int
	ownsDoubles            int
	outage                 stallWindow // POSTs from the kill to the promotion's end
	oksDuringOutage        int         // answered 200 between the kill (+grace) and the promotion
	oksAtKill              int         // answered 200 within pgFailoverKillGrace of the kill
	uncertain              int64       // replies the gateway answered unknown
	promoteTook            time.Duration
	firstOKAfterPromote    time.Duration
	drain                  time.Duration
	repliesTwice           int
}

func pgFailoverRun(ctx context.Context, bin, dir string, cfg pgFailoverConfig, out io.Writer) (pgFailoverResult, error) {
	var res pgFailoverResult
	pair, err := startPGPair(ctx, cfg.syncCommit)
	if pair != nil {
		defer pair.close()
	}
	if err != nil {
		return res, fmt.Errorf("postgres pair: %w", err)
	}
	admin, err := pgxpool.New(ctx, pair.primary.url("postgres"))
	if err != nil {
		return res, err
	}
	_, err = admin.Exec(ctx, `CREATE DATABASE failover`)
	admin.Close()
	if err != nil {
		return res, err
	}
	dbURL := pair.multiHostURL("failover")
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return res, err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE failover_effects (update_id bigint NOT NULL, attempt int NOT NULL);
		CREATE TABLE failover_owns (update_id bigint NOT NULL, attempt int NOT NULL)`); err != nil {
		return res, err
	}

	n := int(cfg.rate * (2*cfg.settle + cfg.promoteAfter + 10*time.Second).Seconds())
	res.updates = n
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, Logf: func(string, ...any) {}})
	defer tg.Close()
	chats, err := soakChats(tg, 20)
	if err != nil {
		return res, err
	}
	const lo = 1
	track := newSoakTrack(lo, n)
	mix := soakMix{reply: 0.1}
	app, err := startSoakApp(tg.Token, chats, mix, track)
	if err != nil {
		return res, err
	}
	defer app.close()
	app.effect = func(r *http.Request, id int64) error { return fencedEffect(r, pool, id, "failover", nil) }

	gw, err := relayFreeAddr()
	if err != nil {
		return res, err
	}
	s, err := newCrashServe("serve", bin, dir, []string{"--db", dbURL, "--api-root", tg.URL, "--forward", app.updateURL(),
		"--gateway-listen", gw, "--webhook-check-interval", "0", "--log-level", "warn",
		"--lease", "10s", "--sweep-interval", "1s", "--pending-grace", "2s", "--backoff-base", "200ms", "--max-attempts", "100"},
		childEnv("TGRELAY_TOKEN="+tg.Token, "TGRELAY_WEBHOOK_SECRET="+relaySecret))
	if err != nil {
		return res, err
	}
	if err := s.start(ctx, true); err != nil {
		return res, err
	}
	defer s.stop()

	gen := newSoakGen(track, chats, s.webhookURL, 2*time.Minute)
	gen.collect = true
	genDone := make(chan error, 1)
	go func() { genDone <- gen.run(ctx, cfg.rate, 256, nil) }()
	fmt.Fprintf(out, "pg-failover: %d updates at %.0f/s to serve on a primary with a synchronous standby (synchronous_commit=%s); SIGKILL of the primary, pg_ctl promote %v later\n",
		n, cfg.rate, cfg.syncCommit, cfg.promoteAfter)
	if err := backoff.Sleep(ctx, cfg.settle); err != nil {
		return res, err
	}
	kill := time.Now()
	pair.primary.kill()
	fmt.Fprintf(out, "  %s primary killed\n", kill.Format("15:04:05.000"))
	if err := backoff.Sleep(ctx, cfg.promoteAfter); err != nil {
		return res, err
	}
	t0 := time.Now()
	if err := pair.promote(ctx); err != nil {
		return res, err
	}
	promoted := time.Now()
	res.promoteTook = promoted.Sub(t0)
	fmt.Fprintf(out, "  %s standby promoted (pg_ctl promote -w took %v)\n", promoted.Format("15:04:05.000"), res.promoteTook.Round(time.Millisecond))
	if s.exited() {
		return res, fmt.Errorf("serve exited:\n%s", tail(s.logPath))
	}
	if err := <-genDone; err != nil {
		return res, fmt.Errorf("generator: %w", err)
	}
	loadEnd := time.Now()
	_ = waitForCtx(ctx, 3*time.Minute, func() bool { return track.lost(mix) == 0 })
	res.drain = time.Since(loadEnd)
	res.posts, res.oks = gen.posts.Load(), gen.oks.Load()
	_, res.repliesTwice = soakDoubleReplies(tg)

	gen.mu.Lock()
	answers := gen.answers
	gen.mu.Unlock()
	res.outage = windowOf(answers, kill, promoted)
	for _, a := range answers {
		end := a.at.Add(a.took)
		if a.status == http.StatusOK && end.After(kill) && end.Before(t0) {
			if end.Before(kill.Add(pgFailoverKillGrace)) {
				res.oksAtKill++
			} else {
				res.oksDuringOutage++
			}
		}
	}
	res.uncertain = app.uncertain.Load()
	res.firstOKAfterPromote = res.outage.firstOKAfter

	// Lost and doubled, on the new primary.
	q := func(sql string) (int, error) {
		var c int
		err := pool.QueryRow(context.WithoutCancel(ctx), sql).Scan(&c)
		return c, err
	}
	if res.effects, err = q(`SELECT count(DISTINCT update_id) FROM failover_effects`); err != nil {
		return res, err
	}
	if res.doubles, err = q(`SELECT count(*) FROM (SELECT update_id FROM failover_effects GROUP BY update_id HAVING count(*) > 1) d`); err != nil {
		return res, err
	}
	if res.ownsDoubles, err = q(`SELECT count(*) FROM (SELECT update_id FROM failover_owns GROUP BY update_id HAVING count(*) > 1) d`); err != nil {
		return res, err
	}
	has := make([]bool, n)
	rows, err := pool.Query(context.WithoutCancel(ctx), `SELECT DISTINCT update_id FROM failover_effects`)
	if err != nil {
		return res, err
	}
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
	var lostIDs []int64
	for i := range n {
		if track.acked[i].Load() && !has[i] {
			res.lost++
			lostIDs = append(lostIDs, lo+int64(i))
		}
	}
	if len(lostIDs) > 0 {
		// Where the lost updates are: their rows on the new primary.
		rows, err := pool.Query(context.WithoutCancel(ctx), `SELECT coalesce(t.state, 'no row'), count(*), min(i.id), max(i.id)
			FROM unnest($1::bigint[]) AS i(id) LEFT JOIN telegram_updates t ON t.update_id = i.id GROUP BY 1`, lostIDs)
		if err == nil {
			for rows.Next() {
				var state string
				var c, a, b int64
				if rows.Scan(&state, &c, &a, &b) == nil {
					seen := 0
					for _, id := range lostIDs {
						if i, ok := track.index(id); ok && track.seen[i].Load() != 0 {
							seen++
						}
					}
					fmt.Fprintf(out, "  lost: %d in state %q (ids %d..%d; %d of all lost were forwarded at least once); first POST of the lowest at %s\n",
						c, state, a, b, seen, time.Unix(0, track.posted[a-lo].Load()).Format("15:04:05.000"))
				}
			}
			rows.Close()
		}
		fmt.Fprintf(out, "  serve's log:\n%s\n", tail(s.logPath))
	}
	return res, nil
}

// fencedEffect is the PostgreSQL crash scenarios' domain write, as an app in
// any language makes it: telegram_updates_owns, then telegram_updates_once
// keyed prefix+"-effect", in one transaction of the app's own, recording
// into the tables prefix_owns and prefix_effects. between, when not nil,
// runs after the owns write, inside the transaction (a slow write a kill
// may land in).
func fencedEffect(r *http.Request, pool *pgxpool.Pool, id int64, prefix string, between func(context.Context) error) error {
	attempt, err := strconv.Atoi(r.Header.Get(wire.HeaderAttempt))
	if err != nil {
		return err
	}
	claim := r.Header.Get(wire.HeaderClaimID)
	tx, err := pool.Begin(r.Context())
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(r.Context()))
	now := time.Now().UnixMilli()
	var owns, once bool
	if err := tx.QueryRow(r.Context(), `SELECT telegram_updates_owns($1, $2, $3, $4)`, id, attempt, claim, now).Scan(&owns); err != nil {
		return err
	}
	if owns {
		if _, err := tx.Exec(r.Context(), `INSERT INTO `+prefix+`_owns VALUES ($1, $2)`, id, attempt); err != nil {
			return err
		}
	}
	if between != nil {
		if err := between(r.Context()); err != nil {
			return err
		}
	}
	if err := tx.QueryRow(r.Context(), `SELECT telegram_updates_once($1, $2, $3, $4, $5)`, id, attempt, claim, now, prefix+"-effect").Scan(&once); err != nil {
		return err
	}
	if once {
		if _, err := tx.Exec(r.Context(), `INSERT INTO `+prefix+`_effects VALUES ($1, $2)`, id, attempt); err != nil {
			return err
		}
	}
	return tx.Commit(r.Context())
}

func (r pgFailoverResult) verdict(cfg pgFailoverConfig) string {
	var miss []string
	if r.lost != 0 {
		miss = append(miss, fmt.Sprintf("%d lost", r.lost))
	}
	if r.doubles != 0 {
		miss = append(miss, fmt.Sprintf("%d double effects", r.doubles))
	}
	if r.oksDuringOutage != 0 {
		miss = append(miss, fmt.Sprintf("%d POSTs answered 200 while no server accepted writes", r.oksDuringOutage))
	}
	if r.outage.noAnswer != 0 {
		miss = append(miss, fmt.Sprintf("%d POSTs not answered", r.outage.noAnswer))
	}
	if bound := 2*intake.DefaultAcceptTimeout + 2*time.Second; r.outage.maxHeld > bound {
		miss = append(miss, fmt.Sprintf("a POST held %v", r.outage.maxHeld.Round(time.Millisecond)))
	}
	if r.outage.firstOKAfter == 0 {
		miss = append(miss, "no 200 after the promotion")
	}
	return strings.Join(miss, ", ")
}

func (r pgFailoverResult) print(out io.Writer, cfg pgFailoverConfig) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "synchronous_commit\tupdates\t200s\teffects\tlost\tdouble effects\towns-only doubles\toutage POSTs\t200 before promotion\t503\tlongest held\tfirst 200 after promotion\tdrain\t")
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t%v\t\n", cfg.syncCommit, r.updates, r.oks, r.effects, r.lost, r.doubles, r.ownsDoubles,
		r.outage.posts, r.oksDuringOutage, r.outage.unavailable, r.outage.maxHeld.Round(time.Millisecond), r.firstOKAfterPromote.Round(time.Millisecond),
		r.drain.Round(time.Millisecond))
	_ = tw.Flush()
	v := r.verdict(cfg)
	fmt.Fprintf(out, "RESULT pg-failover synchronous_commit=%s promote_after=%v updates=%d posts=%d oks=%d effects=%d lost=%d double_effects=%d owns_only_doubles=%d outage_posts=%d outage_200=%d outage_200_within_50ms_of_kill=%d outage_503=%d outage_no_answer=%d longest_held_ms=%d promote_ms=%d first_200_after_promotion_ms=%d replies_twice=%d replies_unknown=%d drain_ms=%d ok=%t\n",
		cfg.syncCommit, cfg.promoteAfter, r.updates, r.posts, r.oks, r.effects, r.lost, r.doubles, r.ownsDoubles, r.outage.posts, r.oksDuringOutage, r.oksAtKill, r.outage.unavailable,
		r.outage.noAnswer, r.outage.maxHeld.Milliseconds(), r.promoteTook.Milliseconds(), r.firstOKAfterPromote.Milliseconds(),
		r.repliesTwice, r.uncertain, r.drain.Milliseconds(), v == "")
	if v != "" {
		fmt.Fprintf(out, "  missed: %s\n", v)
	}
}
