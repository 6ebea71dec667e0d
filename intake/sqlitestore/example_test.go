package sqlitestore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// A handler fences its domain write with OwnsTx in a BEGIN IMMEDIATE
// transaction on the store's own handle.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlitestore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	s, err := sqlitestore.Open(ctx, filepath.Join(dir, "bot.db"), sqlitestore.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	if _, err := s.DB().ExecContext(ctx, `CREATE TABLE greetings (update_id INTEGER PRIMARY KEY)`); err != nil {
		log.Fatal(err)
	}

	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	added, _ := s.Add(ctx, intake.Incoming{UpdateID: 7, Body: []byte(`{"update_id":7}`), ReceivedAt: now})
	id, claimed, _ := s.Claim(ctx, 7, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 3})
	fmt.Println("added:", added, "claimed attempt:", id.Attempt, claimed)

	tx, err := s.DB().BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		log.Fatal(err)
	}
	owns, err := s.OwnsTx(ctx, tx, id, now.Add(time.Second))
	if err != nil {
		log.Fatal(err)
	}
	if owns {
		if _, err := tx.ExecContext(ctx, `INSERT INTO greetings VALUES (?)`, id.UpdateID); err != nil {
			log.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	settled, _ := s.Settle(ctx, id, intake.Settlement{State: intake.StateCompleted, At: now.Add(time.Second)})
	fmt.Println("wrote:", owns, "settled:", settled)
	// Output:
	// added: true claimed attempt: 1 true
	// wrote: true settled: true
}

// Migrations gives the schema steps for teams that apply schema changes with
// their own tool; Schema joins them into one script.
func ExampleMigrations() {
	ms, err := sqlitestore.Migrations("bot_updates")
	if err != nil {
		log.Fatal(err)
	}
	first := ms[0]
	fmt.Printf("%03d %s\n", first.Version, first.Name)
	// Output:
	// 001 create_table
}
