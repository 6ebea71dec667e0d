package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/relay"
)

// libraryCloseTimeout bounds the drain of an in-process relay at the end
// of a run.
const libraryCloseTimeout = 10 * time.Second

// startRelayLibraries starts the relay library in this process, as a Go
// bot embeds it: relay.New on serve's own stores with their defaults, the
// webhook on a loopback listener, the gateway on, forwarding to target.
// These variants share this process with the load generator, the sink and
// the in-process baseline, so they compare with the baseline like for
// like, where serve pays a process boundary the baseline does not. One
// runs on SQLite in dir and, with pgURL set, one on that PostgreSQL
// database. stop ends each relay and closes its store; it is set even on
// an error.
func startRelayLibraries(ctx context.Context, dir, pgURL, apiRoot, token, target string) (variants []servedRelay, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	start := func(name, about string, store intake.Store, closeStore func()) error {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closeStore()
			return err
		}
		r, err := relay.New(relay.Config{
			Token:          token,
			APIRoot:        apiRoot,
			Store:          store,
			Listener:       ln,
			Path:           relayWebhookPath,
			Secret:         relaySecret,
			NoWebhookCheck: true,
			Forward:        forward.Config{URL: target},
			// serve's --log-level warn.
			Logger: slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
		if err != nil {
			ln.Close()
			closeStore()
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := r.Start(ctx); err != nil {
			r.Close(ctx) // releases what New made; Start stopped what it started
			closeStore()
			return fmt.Errorf("%s: %w", name, err)
		}
		stops = append(stops, func() {
			cctx, cancel := context.WithTimeout(context.Background(), libraryCloseTimeout)
			defer cancel()
			r.Close(cctx)
			closeStore()
		})
		variants = append(variants, servedRelay{name: name, about: about, url: "http://" + ln.Addr().String() + relayWebhookPath})
		return nil
	}
	sq, err := sqlitestore.Open(ctx, filepath.Join(dir, "library.db"), sqlitestore.Config{})
	if err != nil {
		return nil, stop, fmt.Errorf("library-sqlite: %w", err)
	}
	if err := start("library-sqlite", "the relay library in this process (relay.New on sqlitestore, as a Go bot embeds it): serve's work without its process boundary, like for like with the baseline", sq, func() { sq.Close() }); err != nil {
		return nil, stop, err
	}
	if pgURL == "" {
		return variants, stop, nil
	}
	pool, err := pgxpool.New(ctx, pgURL)
	if err != nil {
		return nil, stop, fmt.Errorf("library-postgres: %w", err)
	}
	pg, err := pgstore.New(ctx, pool, pgstore.Config{})
	if err != nil {
		pool.Close()
		return nil, stop, fmt.Errorf("library-postgres: %w", err)
	}
	if err := start("library-postgres", "library-sqlite on PostgreSQL (pgstore, its own database)", pg, pool.Close); err != nil {
		return nil, stop, err
	}
	return variants, stop, nil
}

// startRelayContractFloors starts the contract floors in this process, the
// floors the library variants compare with like for like: the least
// contract floor (floor-min-sqlite, floor-min-postgres) and the contract
// floor on serve's own store (floor-store-sqlite, floor-store-postgres),
// each on a SQLite file of its own in dir and, with pgDB set, on a
// PostgreSQL database of its own. stop ends them; it is set even on an
// error.
func startRelayContractFloors(ctx context.Context, dir string, pgDB func(context.Context) (string, error), stats *pgStatements, target, via string) (variants []servedRelay, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	floors := []struct {
		name, about, file string
		open              func(context.Context, string) (floorStore, error)
	}{
		{"floor-min-sqlite", "floor-min-sqlite-proc in this process, like for like with library-sqlite", "floor-min.db", func(ctx context.Context, p string) (floorStore, error) { return openFloorMinSQLite(ctx, p) }},
		{"floor-store-sqlite", "floor-store-sqlite-proc in this process, like for like with library-sqlite", "floor-store.db", func(ctx context.Context, p string) (floorStore, error) { return openFloorContractSQLite(ctx, p) }},
		{"floor-min-postgres", "floor-min-postgres-proc in this process, like for like with library-postgres", "", func(ctx context.Context, u string) (floorStore, error) { return openFloorMinPostgres(ctx, u) }},
		{"floor-store-postgres", "floor-store-postgres-proc in this process, like for like with library-postgres", "", func(ctx context.Context, u string) (floorStore, error) { return openFloorContractPostgres(ctx, u) }},
	}
	for _, f := range floors {
		db, err := floorDB(ctx, dir, f.file, pgDB, stats, f.name)
		if err != nil {
			return nil, stop, err
		}
		if db == "" {
			continue // a PostgreSQL floor without a cluster
		}
		st, err := f.open(ctx, db)
		if err != nil {
			return nil, stop, fmt.Errorf("%s: %w", f.name, err)
		}
		fl, err := startRelayFloor(st, target, via)
		if err != nil {
			st.close()
			return nil, stop, fmt.Errorf("%s: %w", f.name, err)
		}
		stops = append(stops, fl.close)
		variants = append(variants, servedRelay{name: f.name, about: f.about, url: fl.url})
	}
	return variants, stop, nil
}
