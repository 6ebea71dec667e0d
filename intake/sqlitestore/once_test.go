package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

func votes(t *testing.T, s *sqlitestore.Store) int {
	t.Helper()
	var n int
	if err := s.ReadDB().QueryRow(`SELECT coalesce(sum(n), 0) FROM votes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func countVote(ctx context.Context, s *sqlitestore.Store, id intake.Identity, effect string) (bool, error) {
	return s.Once(ctx, id, effect, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO votes (n) VALUES (1)`)
		return err
	})
}

// A handler that writes, then fails (its reply could not be sent), and is
// retried under a new identity applies its effect once.
func TestOnceAppliesAcrossARetry(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	if _, err := s.DB().Exec(`CREATE TABLE votes (n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		answers []bool
	)
	r, err := intake.New(intake.Config{
		Store: s,
		Handler: func(ctx context.Context, u intake.Update) error {
			a, _ := intake.AttemptFrom(ctx)
			applied, err := countVote(ctx, s, a.Identity, "")
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
	if n := votes(t, s); n != 1 {
		t.Fatalf("votes = %d after a write, a failure and a retry; want 1", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(answers) != 2 || !answers[0] || answers[1] {
		t.Fatalf("Once answered %v, want [true false] (applied, then already applied)", answers)
	}
}

func TestOnceRefusesAStaleAttempt(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	if _, err := s.DB().Exec(`CREATE TABLE votes (n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	if _, err := s.Add(ctx, intake.Incoming{UpdateID: 7, Body: []byte(`{"update_id":7}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	// The first claim's lease has already ended; a second claim takes over.
	stale, ok, err := s.Claim(ctx, 7, intake.ClaimOpts{Now: now.Add(-time.Hour), LeaseUntil: now.Add(-time.Minute), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("first claim = %v, %v", ok, err)
	}
	if applied, err := countVote(ctx, s, stale, ""); applied || !errors.Is(err, intake.ErrNotOwner) {
		t.Fatalf("Once with a lapsed lease = %v, %v; want ErrNotOwner", applied, err)
	}
	live, ok, err := s.Claim(ctx, 7, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("second claim = %v, %v", ok, err)
	}
	if applied, err := countVote(ctx, s, stale, ""); applied || !errors.Is(err, intake.ErrNotOwner) {
		t.Fatalf("Once by the stale attempt = %v, %v; want ErrNotOwner", applied, err)
	}
	if applied, err := countVote(ctx, s, live, "a"); !applied || err != nil {
		t.Fatalf("Once by the live attempt = %v, %v; want applied", applied, err)
	}
	// Another effect of the same update is separate; a failing fn commits nothing.
	errFn := errors.New("domain failure")
	if applied, err := s.Once(ctx, live, "b", func(tx *sql.Tx) error {
		tx.Exec(`INSERT INTO votes (n) VALUES (100)`)
		return errFn
	}); applied || !errors.Is(err, errFn) {
		t.Fatalf("Once with a failing fn = %v, %v; want fn's error", applied, err)
	}
	if applied, err := countVote(ctx, s, live, "b"); !applied || err != nil {
		t.Fatalf("Once of effect b after its failure = %v, %v; want applied", applied, err)
	}
	if n := votes(t, s); n != 2 {
		t.Fatalf("votes = %d, want 2 (effects a and b once each)", n)
	}
}

// Concurrent calls for one update never both apply.
func TestOnceConcurrentCallsApplyOnce(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{})
	ctx := t.Context()
	if _, err := s.DB().Exec(`CREATE TABLE votes (n INTEGER NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Millisecond)
	if _, err := s.Add(ctx, intake.Incoming{UpdateID: 9, Body: []byte(`{"update_id":9}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := s.Claim(ctx, 9, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("claim = %v, %v", ok, err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	applied := 0
	for range 8 {
		wg.Go(func() {
			ok, err := countVote(ctx, s, id, "")
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
	if applied != 1 || votes(t, s) != 1 {
		t.Fatalf("%d calls applied, votes = %d; want exactly 1", applied, votes(t, s))
	}
}
