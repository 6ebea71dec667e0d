package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// servedRelay is one serve process that a relay scenario measures.
type servedRelay struct {
	name, about, url string
	// pid is the serve child's process id; 0 for a relay running inside
	// this process (the floors).
	pid int
}

// startRelayServes starts the serve variants the relay scenarios compare:
// serve on SQLite in dir and, with withPG, on a throwaway durable
// PostgreSQL cluster (reported and skipped when none can be started); with
// binB each again from a second build (its own database), to compare two
// builds in one run; with memory serve again with its updates in memory
// (serve-memory). args gives serve's flags for a database. With
// profile set, each serve writes a CPU profile to profile-<variant>.pprof.
// pgDB, nil without a cluster, creates another database on the cluster the
// serves use; postmaster is the cluster's server process (0 without one),
// whose CPU the scenario reads. stop ends every process and the cluster; it is set even on an
// error.
func startRelayServes(ctx context.Context, out io.Writer, dir, bin, binB string, withPG, memory bool,
	args func(db string) []string, token, profile string, stats *pgStatements) (variants []servedRelay, pgDB func(context.Context) (string, error), postmaster int, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	start := func(name, about, bin, db string, env ...string) error {
		s, err := startRelayServe(ctx, name, bin, args(db), token, dir, profile, env...)
		if err != nil {
			return err
		}
		stops = append(stops, s.stop)
		variants = append(variants, servedRelay{name: name, about: about, url: s.webhookURL, pid: s.cmd.Process.Pid})
		return nil
	}
	if err := start("serve-sqlite", "tgrelay serve, SQLite WAL synchronous=FULL (default store)", bin, filepath.Join(dir, "relay.db")); err != nil {
		return nil, nil, 0, stop, err
	}
	if memory {
		if err := start("serve-memory", "tgrelay serve with its updates in memory (not durable; TGRELAY_TEST_MEMORY_STORE): serve's cost without a store", bin, filepath.Join(dir, "relay-memory.db"), "TGRELAY_TEST_MEMORY_STORE=1"); err != nil {
			return nil, nil, 0, stop, err
		}
	}
	if binB != "" {
		if err := start("serve-sqlite-b", "tgrelay serve from -bin-b, SQLite as above", binB, filepath.Join(dir, "relay-b.db")); err != nil {
			return nil, nil, 0, stop, err
		}
	}
	if !withPG {
		return variants, pgDB, postmaster, stop, nil
	}
	cluster, err := pgtest.Start(ctx, pgtest.Options{Settings: stats.settings()}) // durable: fsync on
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil, 0, stop, err
		}
		fmt.Fprintf(out, "postgres: UNAVAILABLE: %v; reporting SQLite only\n", err)
		return variants, pgDB, postmaster, stop, nil
	}
	stops = append(stops, func() { cluster.Stop() })
	if err := stats.attach(ctx, cluster); err != nil {
		return nil, nil, 0, stop, err
	}
	pgDB = cluster.CreateDatabase
	if postmaster, err = postmasterPID(cluster); err != nil {
		return nil, nil, 0, stop, err
	}
	builds := []struct{ name, about, bin string }{
		{"serve-postgres", "tgrelay serve, PostgreSQL (throwaway cluster, fsync on)", bin},
		{"serve-postgres-b", "tgrelay serve from -bin-b, PostgreSQL as above (its own database)", binB},
	}
	for _, b := range builds {
		if b.bin == "" {
			continue
		}
		db, err := cluster.CreateDatabase(ctx)
		if err != nil {
			return nil, nil, 0, stop, fmt.Errorf("postgres: %w", err)
		}
		stats.name(b.name, db)
		if err := start(b.name, b.about, b.bin, db); err != nil {
			return nil, nil, 0, stop, err
		}
	}
	return variants, pgDB, postmaster, stop, nil
}
