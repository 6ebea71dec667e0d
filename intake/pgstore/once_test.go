package pgstore_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
)

func onceSetup(t *testing.T) (*pgstore.Store, *pgxpool.Pool) {
	t.Helper()
	s, pool := newStore(t)
	if _, err := pool.Exec(t.Context(), `CREATE TABLE votes (n integer NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return s, pool
}

func voteCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), `SELECT coalesce(sum(n), 0) FROM votes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func vote(ctx context.Context, s *pgstore.Store, id intake.Identity, effect string) (bool, error) {
	return s.Once(ctx, id, effect, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO votes (n) VALUES (1)`)
		return err
	})
}

func claim(t *testing.T, s *pgstore.Store, updateID int64, now, until time.Time) intake.Identity {
	t.Helper()
	id, ok, err := s.Claim(t.Context(), updateID, intake.ClaimOpts{Now: now, LeaseUntil: until, MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("claim %d = %v, %v", updateID, ok, err)
	}
	return id
}

func add(t *testing.T, s *pgstore.Store, updateID int64, now time.Time) {
	t.Helper()
	if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: updateID, Body: []byte(`{"update_id":1}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
}

// A handler that writes, then fails, and is retried under a new identity
// applies its effect once.
func TestOnceAppliesAcrossARetry(t *testing.T) {
	t.Parallel()
	s, pool := onceSetup(t)
	var answers []bool
	var mu sync.Mutex
	r, err := intake.New(intake.Config{
		Store: s,
		Handler: func(ctx context.Context, u intake.Update) error {
			a, _ := intake.AttemptFrom(ctx)
			applied, err := vote(ctx, s, a.Identity, "")
			if err != nil {
				return err
			}
			mu.Lock()
			answers = append(answers, applied)
			mu.Unlock()
			if a.Attempt == 1 {
				return errors.New("reply could not be sent")
			}
			return nil
		},
		RetryFunc: func(error, int) (time.Duration, bool) { return 0, true },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	if _, err := r.Accept(ctx, []byte(`{"update_id":1,"message":{"chat":{"id":1}}}`)); err != nil {
		t.Fatal(err)
	}
	for {
		row, _, err := s.Get(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if row.State == intake.StateCompleted {
			break
		}
		if err := r.Idle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := voteCount(t, pool); n != 1 {
		t.Fatalf("votes = %d after a write, a failure and a retry; want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 2 || !answers[0] || answers[1] {
		t.Fatalf("Once answered %v, want [true false]", answers)
	}
}

// A stale attempt never applies, through Once, OnceSQL or the SQL function.
func TestOnceRefusesAStaleAttempt(t *testing.T) {
	t.Parallel()
	s, pool := onceSetup(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	add(t, s, 7, now)
	stale := claim(t, s, 7, now.Add(-time.Hour), now.Add(-time.Minute))
	live := claim(t, s, 7, now, now.Add(time.Minute))

	if applied, err := vote(ctx, s, stale, ""); applied || !errors.Is(err, intake.ErrNotOwner) {
		t.Fatalf("Once by the stale attempt = %v, %v; want ErrNotOwner", applied, err)
	}
	db := stdlib.OpenDBFromPool(pool)
	defer db.Close()
	sqlVote := func(id intake.Identity, effect string) (bool, error) {
		return s.OnceSQL(ctx, db, id, effect, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO votes (n) VALUES (1)`)
			return err
		})
	}
	if applied, err := sqlVote(stale, ""); applied || !errors.Is(err, intake.ErrNotOwner) {
		t.Fatalf("OnceSQL by the stale attempt = %v, %v; want ErrNotOwner", applied, err)
	}
	if applied, err := sqlVote(live, "a"); !applied || err != nil {
		t.Fatalf("OnceSQL by the live attempt = %v, %v; want applied", applied, err)
	}
	if applied, err := vote(ctx, s, live, "a"); applied || err != nil {
		t.Fatalf("Once of an applied effect = %v, %v; want false, nil", applied, err)
	}
	errFn := errors.New("domain failure")
	if applied, err := s.Once(ctx, live, "b", func(tx pgx.Tx) error {
		tx.Exec(ctx, `INSERT INTO votes (n) VALUES (100)`)
		return errFn
	}); applied || !errors.Is(err, errFn) {
		t.Fatalf("Once with a failing fn = %v, %v; want fn's error", applied, err)
	}
	if applied, err := vote(ctx, s, live, "b"); !applied || err != nil {
		t.Fatalf("Once of b after its failure = %v, %v; want applied", applied, err)
	}

	// The SQL function, as an app in another language calls it.
	fn := func(id intake.Identity, effect string) bool {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		var apply bool
		if err := tx.QueryRow(ctx, `SELECT `+s.Table()+`_once($1, $2, $3, $4, $5)`,
			id.UpdateID, id.Attempt, id.ClaimID, time.Now().UnixMilli(), effect).Scan(&apply); err != nil {
			t.Fatal(err)
		}
		if apply {
			if _, err := tx.Exec(ctx, `INSERT INTO votes (n) VALUES (1)`); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		return apply
	}
	if fn(stale, "c") {
		t.Fatal("the SQL function let a stale attempt apply")
	}
	if !fn(live, "c") || fn(live, "c") {
		t.Fatal("the SQL function did not apply effect c exactly once")
	}
	if n := voteCount(t, pool); n != 3 {
		t.Fatalf("votes = %d, want 3 (effects a, b, c once each)", n)
	}
}

// Concurrent calls for one update never both apply.
func TestOnceConcurrentCallsApplyOnce(t *testing.T) {
	t.Parallel()
	s, pool := onceSetup(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Millisecond)
	add(t, s, 9, now)
	id := claim(t, s, 9, now, now.Add(time.Minute))
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	for range 6 {
		wg.Go(func() {
			ok, err := vote(ctx, s, id, "")
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				applied++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := voteCount(t, pool); applied != 1 || n != 1 {
		t.Fatalf("%d calls applied, votes = %d; want exactly 1", applied, n)
	}
}

// TestOnceCancelledDuringCommitReportsWhatHappened: Once's context ends
// while its COMMIT runs (a deferred trigger makes the commit wait for a
// lock the test holds, and the test lets it go as soon as Once returns,
// or half a second after the cancellation).
// Once says "nothing committed" with every error: so after an error the
// effect must not be committed, and after success it must be.
func TestOnceCancelledDuringCommitReportsWhatHappened(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	onceCancelledDuringCommit(t, s, pool, func(ctx context.Context, id intake.Identity) (bool, error) {
		return s.Once(ctx, id, "slow", func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO slow_commit (n) VALUES (1)`)
			return err
		})
	})
}

// TestOnceSQLCancelledDuringCommitReportsWhatHappened is
// TestOnceCancelledDuringCommitReportsWhatHappened for OnceSQL.
func TestOnceSQLCancelledDuringCommitReportsWhatHappened(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	onceCancelledDuringCommit(t, s, pool, func(ctx context.Context, id intake.Identity) (bool, error) {
		return s.OnceSQL(ctx, db, id, "slow", func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO slow_commit (n) VALUES (1)`)
			return err
		})
	})
}

// onceCancelledDuringCommit runs once (an Once or OnceSQL that inserts a
// row into slow_commit) with a context that ends while its COMMIT waits,
// and checks that its answer agrees with what committed.
func onceCancelledDuringCommit(t *testing.T, s *pgstore.Store, pool *pgxpool.Pool, once func(context.Context, intake.Identity) (bool, error)) {
	t.Helper()
	ctx := t.Context()
	for _, q := range []string{
		`CREATE TABLE slow_commit (n integer NOT NULL)`,
		`CREATE FUNCTION slow_commit_check() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$`,
		`CREATE CONSTRAINT TRIGGER slow_commit_check AFTER INSERT ON slow_commit
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit_check()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	add(t, s, 1, now)
	id := claim(t, s, 1, now, now.Add(time.Hour))
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_xact_lock(4242)`); err != nil {
		t.Fatal(err)
	}

	octx, cancel := context.WithCancel(ctx)
	defer cancel()
	returned := make(chan struct{})
	released := make(chan error, 1)
	go func() {
		// Cancel once the commit waits in its deferred trigger, then free
		// the lock as soon as Once returns, or half a second later.
		for deadline := time.Now().Add(bounded); time.Now().Before(deadline); {
			var k int
			err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory'`).Scan(&k)
			if err != nil || k > 0 {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		select {
		case <-returned:
		case <-time.After(500 * time.Millisecond):
		}
		released <- holder.Commit(ctx)
	}()
	applied, err := once(octx, id)
	close(returned)
	if err := <-released; err != nil {
		t.Fatal(err)
	}
	if octx.Err() == nil {
		t.Fatalf("Once returned %v, %v before its context was cancelled during the commit", applied, err)
	}
	// Let whatever still runs at the server finish.
	waitFor(t, bounded, "no commit still waiting", func() (bool, error) {
		var k int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&k)
		return k == 0, err
	})
	waitServerIdle(t, pool)
	var rows int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM slow_commit`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	t.Logf("Once = %v, %v; rows committed: %d", applied, err, rows)
	if committed := rows > 0; committed != (err == nil && applied) {
		t.Fatalf("Once = %v, %v, but its writes are committed: %v", applied, err, committed)
	}
}
