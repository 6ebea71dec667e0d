package pgtest_test

import (
	"context"
	"log"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// Example starts a durable throwaway cluster, as a benchmark does, makes a
// database on it and stops it. Tests use pgtest.URL instead. It needs the
// server binaries, so it has no checked output.
func Example() {
	ctx := context.Background()
	cluster, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Stop()

	url, err := cluster.CreateDatabase(ctx)
	if err != nil {
		log.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	// Use conn, or hand url to pgxpool.New.
}
