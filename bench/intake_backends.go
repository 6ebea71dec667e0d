package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// intakeBackend is a database the intake scenarios run on. open returns a
// fresh, empty store (its own file or table) named label, and a function
// that releases it.
type intakeBackend struct {
	name  string // "sqlite" or "postgres"
	about string // how it is configured, for the table header
	open  func(ctx context.Context, label string) (intake.Store, func() error, error)
	// floor opens the relay floor's bare store on the same database (see
	// floorStore): one table with a primary key, a multi-row insert per
	// group commit.
	floor func(ctx context.Context) (floorStore, error)
	// floorMin opens the least contract floor's store on the same
	// database (see floorMinSQLite).
	floorMin func(ctx context.Context) (floorStore, error)
	// dbCPU, when set, reads the CPU time the database's own processes
	// have used so far (PostgreSQL's postmaster and its children); nil
	// for SQLite, which runs in this process.
	dbCPU func() dbCPUTimes
}

// dbCPUTimes is the CPU time a database server's processes have used.
type dbCPUTimes struct {
	// all is every process's: the postmaster, its children and the
	// children it reaped (in 10 ms ticks).
	all time.Duration
	// backends is the live client backends' alone (nanoseconds, from
	// /proc/<pid>/schedstat): the statements' work, without autovacuum,
	// the WAL writer and the checkpointer, whose runs land in whichever
	// variant happens to be measured.
	backends time.Duration
}

// pgServerCPU reads the CPU time of the PostgreSQL server whose postmaster
// is pid postmaster (none when 0); client backends are those connected over the Unix
// socket ("[local]" in their title), the only way pgtest's clusters listen.
func pgServerCPU(postmaster int) (dbCPUTimes, error) {
	var t dbCPUTimes
	if postmaster == 0 {
		return t, nil // no server (pid 1 and others have parent 0)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return t, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || (pid != postmaster && st.ppid != postmaster) {
			continue // gone meanwhile, or not this server's
		}
		t.all += st.cpu
		if pid == postmaster {
			t.all += st.children
			continue
		}
		title, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !bytes.Contains(title, []byte("[local]")) {
			continue
		}
		sched, err := os.ReadFile("/proc/" + e.Name() + "/schedstat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(sched))
		if len(f) == 0 {
			continue
		}
		if ns, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			t.backends += time.Duration(ns)
		}
	}
	return t, nil
}

// intakeBackends prepares SQLite (synchronous=FULL, files in a temporary
// directory) and, when withPG is set, a throwaway durable PostgreSQL cluster
// with one pool of pgConns connections. When PostgreSQL cannot be started it
// says so on out and returns SQLite alone. The returned function removes
// everything.
func intakeBackends(ctx context.Context, out io.Writer, withSQLite, withPG bool, pgConns int) ([]intakeBackend, func(), error) {
	dir, err := os.MkdirTemp("", "tgrelay-bench-intake-")
	if err != nil {
		return nil, nil, err
	}
	cleanups := []func(){func() { os.RemoveAll(dir) }}
	cleanup := func() {
		for _, f := range slices.Backward(cleanups) {
			f()
		}
	}
	backends := []intakeBackend{{
		name:  "sqlite",
		about: "SQLite (modernc) WAL, synchronous=FULL, one writer connection",
		open: func(ctx context.Context, label string) (intake.Store, func() error, error) {
			s, err := sqlitestore.Open(ctx, filepath.Join(dir, label+".db"), sqlitestore.Config{})
			if err != nil {
				return nil, nil, err
			}
			return s, s.Close, nil
		},
		floor: func(ctx context.Context) (floorStore, error) {
			return openFloorSQLite(ctx, filepath.Join(dir, "floor.db"))
		},
		floorMin: func(ctx context.Context) (floorStore, error) {
			return openFloorMinSQLite(ctx, filepath.Join(dir, "floor-min.db"))
		},
	}}
	if !withSQLite {
		backends = nil
	}
	if !withPG {
		fmt.Fprintln(out, "postgres: skipped (-pg=false); reporting SQLite only")
		return backends, cleanup, nil
	}

	cluster, err := pgtest.Start(ctx, pgtest.Options{}) // durable: fsync and synchronous_commit on
	if err != nil {
		if ctx.Err() != nil {
			cleanup()
			return nil, nil, err
		}
		hint := ""
		if errors.Is(err, pgtest.ErrNotInstalled) {
			hint = " (apt-get install postgresql)"
		}
		fmt.Fprintf(out, "postgres: UNAVAILABLE%s: %v\npostgres: reporting SQLite only\n", hint, err)
		return backends, cleanup, nil
	}
	cleanups = append(cleanups, func() { cluster.Stop() })
	dbURL, err := cluster.CreateDatabase(ctx)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("postgres: create database: %w", err)
	}
	pcfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	pcfg.MaxConns = int32(pgConns)
	pcfg.MinConns = int32(pgConns)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("postgres: pool: %w", err)
	}
	cleanups = append(cleanups, pool.Close)
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("postgres: %w", err)
	}
	var dbCPU func() dbCPUTimes
	if postmaster, err := postmasterPID(cluster); err == nil {
		dbCPU = func() dbCPUTimes {
			t, _ := pgServerCPU(postmaster)
			return t
		}
	}
	backends = append(backends, intakeBackend{
		dbCPU: dbCPU,
		name:  "postgres",
		about: fmt.Sprintf("PostgreSQL %s local (Unix socket), fsync and synchronous_commit on, pgx pool of %d", version, pgConns),
		open: func(ctx context.Context, label string) (intake.Store, func() error, error) {
			s, err := pgstore.New(ctx, pool, pgstore.Config{Table: label})
			if err != nil {
				return nil, nil, err
			}
			drop := func() error {
				_, err := pool.Exec(context.Background(), "DROP TABLE "+label)
				return err
			}
			return s, drop, nil
		},
		floor:    func(ctx context.Context) (floorStore, error) { return openFloorPostgres(ctx, dbURL) },
		floorMin: func(ctx context.Context) (floorStore, error) { return openFloorMinPostgres(ctx, dbURL) },
	})
	return backends, cleanup, nil
}

// intakeSingleStore hides every optional capability of a store and records
// a batch one update per transaction (Add after Add, claims dropped): the
// naive store a user would otherwise write.
type intakeSingleStore struct{ intake.Store }

// AddBatch adds each request in a transaction of its own, one after
// another.
func (s intakeSingleStore) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	out := make([]intake.AddResult, len(reqs))
	for i, r := range reqs {
		added, err := s.Add(ctx, r.Incoming)
		if err != nil {
			return nil, err
		}
		out[i].Added = added
	}
	return out, nil
}

// intakeUpdateBody is a realistic private-chat text message update, each on
// its own chat so that the runner's per-chat ordering never serialises them.
func intakeUpdateBody(id int64) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"from":{"id":%d,"is_bot":false,"first_name":"Ada","language_code":"en"},"chat":{"id":%d,"first_name":"Ada","type":"private"},"date":1764417600,"text":"hello from the intake benchmark"}}`,
		id, id, 100000+id, 100000+id)
}

// intakeQuantile returns the q quantile of sorted latencies (nearest rank).
func intakeQuantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// intakeMedianRatio returns the median of a[i]/b[i] over the rounds both
// have (the mean of the middle two for an even count), or 0 for none.
func intakeMedianRatio(a, b []float64) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return median(r)
}

// intakeMS formats a duration in milliseconds.
func intakeMS(d time.Duration) string {
	return fmt.Sprintf("%.2f", float64(d)/float64(time.Millisecond))
}

// intakeGoal renders whether a measured value meets its goal.
func intakeGoal(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// intakeRecorded counts the rows of a store by state (it must be an
// AdminStore, possibly wrapped in intakeSingleStore or intakeBatchTrace).
func intakeRecorded(ctx context.Context, s intake.Store) (intake.Stats, error) {
	switch w := s.(type) {
	case intakeSingleStore:
		s = w.Store
	case *intakeBatchTrace:
		s = w.Store
	}
	a, ok := s.(intake.AdminStore)
	if !ok {
		return intake.Stats{}, fmt.Errorf("%T has no Stats", s)
	}
	return a.Stats(ctx)
}

// intakeCPUTime returns the CPU time (user and system) this process has used
// so far, clients and servers together, or 0 when it cannot be read.
func intakeCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// intakeLoadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg, or "unknown": shared machines drift, and the table says how
// busy this one was.
func intakeLoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
