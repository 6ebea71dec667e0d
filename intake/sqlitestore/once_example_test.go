package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// A handler counts a vote exactly once: its first attempt writes and then
// fails to send its reply; the retry finds the vote applied and only sends.
func ExampleStore_Once() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlitestore-once")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "bot.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	if _, err := store.DB().ExecContext(ctx, `CREATE TABLE votes (poll TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
		log.Fatal(err)
	}

	done := make(chan struct{})
	r, err := intake.New(intake.Config{
		Store: store,
		Handler: func(ctx context.Context, u intake.Update) error {
			a, _ := intake.AttemptFrom(ctx)
			applied, err := store.Once(ctx, a.Identity, "vote", func(tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO votes VALUES ('lunch', 1)
					ON CONFLICT (poll) DO UPDATE SET n = n + 1`)
				return err
			})
			if err != nil {
				return err
			}
			fmt.Printf("attempt %d: vote applied now: %v\n", a.Attempt, applied)
			if a.Attempt == 1 {
				return errors.New("reply not sent") // retried; the vote stays counted once
			}
			close(done)
			return nil
		},
		RetryFunc: func(error, int) (time.Duration, bool) { return 0, true },
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := r.Accept(ctx, []byte(`{"update_id":1,"message":{"chat":{"id":7},"text":"lunch"}}`)); err != nil {
		log.Fatal(err)
	}
	<-done
	if err := r.Close(ctx); err != nil {
		log.Fatal(err)
	}
	var n int
	if err := store.ReadDB().QueryRowContext(ctx, `SELECT n FROM votes WHERE poll = 'lunch'`).Scan(&n); err != nil {
		log.Fatal(err)
	}
	fmt.Println("votes:", n)
	// Output:
	// attempt 1: vote applied now: true
	// attempt 2: vote applied now: false
	// votes: 1
}
