package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
)

// Example runs an intake on PostgreSQL whose handler fences its domain write
// with OwnsTx: the write commits only while the attempt still owns the
// update, and a reclaim by another process waits for that commit. It needs
// a server, so it has no checked output.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	store, err := pgstore.New(ctx, pool, pgstore.Config{}) // creates or upgrades telegram_updates
	if err != nil {
		log.Fatal(err)
	}
	runner, err := intake.New(intake.Config{
		Store: store,
		AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				owned, err := store.OwnsTx(ctx, tx, a.Identity, time.Now())
				if err != nil {
					return err
				}
				if !owned {
					return errors.New("lost the update to another worker")
				}
				_, err = tx.Exec(ctx,
					`INSERT INTO replies (update_id, claim_id) VALUES ($1, $2) ON CONFLICT (update_id) DO NOTHING`,
					u.ID, a.ClaimID)
				return err
			})
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := runner.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer runner.Close(ctx)
	// Serve runner's webhook handler, or call runner.Accept, from here on.
}

// ExampleMigrations lists the schema's steps, for teams whose own migration
// tool owns the schema (they then set Config.NoCreate).
func ExampleMigrations() {
	ms, err := pgstore.Migrations("telegram_updates")
	if err != nil {
		log.Fatal(err)
	}
	first := ms[0]
	fmt.Printf("%03d_%s.up.sql\n", first.Version, first.Name)
	// Output:
	// 001_create_table.up.sql
}

// ExampleSchema finds the fence function in the schema: an application in
// any language calls it inside the transaction of its own write, and writes
// only when it returns true.
func ExampleSchema() {
	ddl, err := pgstore.Schema("bot_updates")
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(ddl, "\n") {
		if strings.HasPrefix(line, "CREATE OR REPLACE FUNCTION bot_updates_owns(") {
			fmt.Println(line)
		}
	}
	// Output:
	// CREATE OR REPLACE FUNCTION bot_updates_owns(update_id bigint, attempt integer, claim_id text, at_ms bigint)
	// CREATE OR REPLACE FUNCTION bot_updates_owns(update_id bigint, attempt integer, claim_id text, at_ms bigint DEFAULT NULL)
}
