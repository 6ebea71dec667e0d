package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
)

// The multi-process test re-executes this test binary as worker processes;
// these variables tell a child that it is one and where its database is.
const (
	workerEnv    = "TGRELAY_PGSTORE_WORKER"
	workerURLEnv = "TGRELAY_PGSTORE_WORKER_URL"
)

// Sizes of the multi-process test.
const (
	killUpdates    = 2000
	killWorkers    = 3
	killMaxKills   = 8
	killDeadline   = 60 * time.Second
	workerLease    = 2 * time.Second
	workerHandlers = 8
	workerHoldsTx  = 5 * time.Millisecond // a domain write takes a while, so kills land inside it
)

func isWorker() bool { return os.Getenv(workerEnv) != "" }

// workerMain runs in a child process: an intake runner on the shared table
// whose handler writes one effect row per update, fenced by OwnsTx and made
// idempotent inside the same transaction. It runs until SIGTERM or SIGKILL.
func workerMain() {
	if err := runWorker(); err != nil {
		fmt.Fprintf(os.Stderr, "worker %d: %v\n", os.Getpid(), err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runWorker() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg, err := pgxpool.ParseConfig(os.Getenv(workerURLEnv))
	if err != nil {
		return err
	}
	// Room for every handler's transaction plus the runner's own claims,
	// renewals and settlements, so a renewal never queues behind handlers.
	cfg.MaxConns = 2*workerHandlers + 4
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Config{NoCreate: true})
	if err != nil {
		return err
	}
	r, err := intake.New(intake.Config{
		Store:          st,
		AttemptHandler: effectHandler(pool, st),
		LeaseDuration:  workerLease,
		SweepInterval:  50 * time.Millisecond,
		PendingGrace:   time.Nanosecond,
		MaxConcurrent:  workerHandlers,
		PageSize:       400,
		MaxAttempts:    20,
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		RetryFunc:      func(error, int) (time.Duration, bool) { return 10 * time.Millisecond, true },
	})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return r.Close(cctx)
}

// effectHandler writes the update's effect once: inside one transaction it
// checks ownership (locking the update row), skips the write if an earlier
// attempt already committed it, and writes otherwise.
func effectHandler(pool *pgxpool.Pool, st *pgstore.Store) func(context.Context, intake.Update, intake.Attempt) error {
	return func(ctx context.Context, u intake.Update, a intake.Attempt) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			owned, err := st.OwnsTx(ctx, tx, a.Identity, time.Now())
			if err != nil {
				return err
			}
			if !owned {
				return errors.New("ownership lost")
			}
			var done bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM effects WHERE update_id = $1)", u.ID).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			if _, err := tx.Exec(ctx, "SELECT pg_sleep($1::float8)", workerHoldsTx.Seconds()); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, "INSERT INTO effects (update_id, attempt, claim_id, pid) VALUES ($1, $2, $3, $4)",
				u.ID, a.Attempt, a.ClaimID, os.Getpid())
			return err
		})
	}
}

// worker is one child process and its output.
type worker struct {
	cmd *exec.Cmd
	out *bytes.Buffer
}

func startWorker(t *testing.T, url string) *worker {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=1", workerURLEnv+"="+url)
	w := &worker{cmd: cmd, out: new(bytes.Buffer)}
	cmd.Stdout = w.out
	cmd.Stderr = w.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	return w
}

// stopWorker ends w with sig and waits for it, keeping its output.
func stopWorker(w *worker, sig os.Signal, mu *sync.Mutex, logs *bytes.Buffer) error {
	_ = w.cmd.Process.Signal(sig)
	err := w.cmd.Wait()
	mu.Lock()
	fmt.Fprintf(logs, "--- worker %d (%v): %v\n%s", w.cmd.Process.Pid, sig, err, w.out.String())
	mu.Unlock()
	return err
}

// TestKilledWorkersMakeEachEffectOnce: three worker processes handle 2,000
// updates from one database through the intake runner, each writing its
// effect under OwnsTx in the same transaction, while the test SIGKILLs
// workers at random moments and restarts them. In the end every update is
// completed (or abandoned with its attempts spent) and no effect exists
// twice; every completed update has its effect.
func TestKilledWorkersMakeEachEffectOnce(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()
	st, err := pgstore.New(ctx, pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE effects (update_id bigint NOT NULL, attempt int NOT NULL, claim_id text NOT NULL, pid int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	updates := killUpdates
	if testing.Short() {
		updates = killUpdates / 4
	}
	in := make([]intake.Incoming, updates)
	for i := range in {
		id := int64(i + 1)
		in[i] = intake.Incoming{
			UpdateID:   id,
			Body:       fmt.Appendf(nil, `{"update_id":%d,"message":{"chat":{"id":%d},"text":"hi"}}`, id, id%40),
			ReceivedAt: time.Now(),
		}
	}
	if _, err := addBatch(ctx, st, in); err != nil {
		t.Fatal(err)
	}

	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t.Logf("kill schedule seed %d", seed)

	url := pool.Config().ConnString()
	var (
		logMu sync.Mutex
		logs  bytes.Buffer
	)
	workers := make([]*worker, killWorkers)
	for i := range workers {
		workers[i] = startWorker(t, url)
	}
	defer func() {
		for _, w := range workers {
			_ = stopWorker(w, syscall.SIGKILL, &logMu, &logs)
		}
		if t.Failed() {
			logMu.Lock()
			t.Logf("worker output:\n%s", logs.String())
			logMu.Unlock()
		}
	}()

	count := func(q string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	deadline := time.Now().Add(killDeadline)
	kills := 0
	for {
		left := count("SELECT count(*) FROM telegram_updates WHERE state IN ('pending', 'processing', 'failed')")
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d updates still unfinished after %v (%d kills)", left, killDeadline, kills)
		}
		// Kill a random worker at a random moment while work remains, and
		// start a new one in its place.
		wait := time.Duration(200+rng.IntN(800)) * time.Millisecond
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-timer.C:
		}
		if kills < killMaxKills && count("SELECT count(*) FROM effects") > 0 {
			i := rng.IntN(killWorkers)
			_ = stopWorker(workers[i], syscall.SIGKILL, &logMu, &logs)
			workers[i] = startWorker(t, url)
			kills++
		}
	}
	if kills == 0 {
		t.Fatal("the work finished before any worker was killed; the test proved nothing")
	}

	states := map[string]int{}
	rows, err := pool.Query(ctx, "SELECT state, count(*) FROM telegram_updates GROUP BY state")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		states[s] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if states["completed"]+states["abandoned"] != updates {
		t.Fatalf("final states %v, want all %d completed or abandoned", states, updates)
	}
	dups := count("SELECT count(*) FROM (SELECT update_id FROM effects GROUP BY update_id HAVING count(*) > 1) d")
	if dups != 0 {
		t.Errorf("%d updates have their effect more than once", dups)
	}
	missing := count(`SELECT count(*) FROM telegram_updates u WHERE u.state = 'completed'
		AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.update_id = u.update_id)`)
	if missing != 0 {
		t.Errorf("%d completed updates have no effect", missing)
	}
	reclaimed := count("SELECT count(*) FROM telegram_updates WHERE attempts > 1")
	// Updates whose effect committed but whose worker died before settling:
	// a later attempt found the effect and did not repeat it.
	committedThenKilled := count(`SELECT count(*) FROM telegram_updates u JOIN effects e USING (update_id)
		WHERE u.state = 'completed' AND e.attempt < u.attempts`)
	t.Logf("%d kills; final states %v; %d updates needed more than one attempt, %d of them after their effect had committed",
		kills, states, reclaimed, committedThenKilled)
	if reclaimed == 0 {
		t.Error("no update was ever reclaimed: the kills never interrupted an attempt")
	}
}
