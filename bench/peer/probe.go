package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

const (
	// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
	// /proc/<pid>/stat: 100 on every Linux architecture Go supports.
	clockTicks = 100
	// idleTimeout bounds the wait for a closed pool's backends to end.
	idleTimeout = 30 * time.Second
	// idlePoll is how often that wait looks.
	idlePoll = 10 * time.Millisecond
)

// pgProbe reads what a PostgreSQL cluster shows about its work: its
// processes' CPU, its WAL position and a database's commits. It queries
// through the cluster's admin database, whose own transactions are counted
// there, not in the measured database.
type pgProbe struct {
	admin      *pgxpool.Pool
	postmaster int
	version    string
}

func newPGProbe(ctx context.Context, cluster *pgtest.Cluster) (*pgProbe, error) {
	if cluster.Dir() == "" {
		return nil, errors.New("postgres: an attached server: its CPU cannot be read")
	}
	b, err := os.ReadFile(filepath.Join(cluster.Dir(), "data", "postmaster.pid"))
	if err != nil {
		return nil, fmt.Errorf("postgres pid: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("postgres pid: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(cluster.AdminURL())
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = 1
	admin, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p := &pgProbe{admin: admin, postmaster: pid}
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&p.version); err != nil {
		admin.Close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return p, nil
}

func (p *pgProbe) close() { p.admin.Close() }

// lsn is the cluster's current WAL insert position.
func (p *pgProbe) lsn(ctx context.Context) (string, error) {
	var s string
	err := p.admin.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&s)
	return s, err
}

// walSince is how many WAL bytes the cluster has written since from.
func (p *pgProbe) walSince(ctx context.Context, from string) (int64, error) {
	var n int64
	err := p.admin.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::bigint", from).Scan(&n)
	return n, err
}

// commits is the database's committed transactions as its statistics show
// them (a backend reports its own as it ends, or about once a second).
func (p *pgProbe) commits(ctx context.Context, db string) (int64, error) {
	var n int64
	err := p.admin.QueryRow(ctx, "SELECT coalesce(sum(xact_commit), 0)::bigint FROM pg_stat_database WHERE datname = $1", db).Scan(&n)
	return n, err
}

// waitIdle waits until no backend is connected to db.
func (p *pgProbe) waitIdle(ctx context.Context, db string) error {
	ctx, cancel := context.WithTimeout(ctx, idleTimeout)
	defer cancel()
	t := time.NewTicker(idlePoll)
	defer t.Stop()
	for {
		var n int
		if err := p.admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", db).Scan(&n); err != nil {
			return fmt.Errorf("postgres: waiting for %s's backends to end: %w", db, err)
		}
		if n == 0 {
			return nil
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("postgres: %d backends still on %s: %w", n, db, ctx.Err())
		}
	}
}

// cpu is the CPU time (user and system) the cluster has used so far: the
// postmaster and its live children, plus the postmaster's reaped children,
// so backends that ended are counted too.
func (p *pgProbe) cpu() (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	seen := false
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || (pid != p.postmaster && st.ppid != p.postmaster) {
			continue // gone meanwhile, or not this cluster's
		}
		total += st.cpu
		if pid == p.postmaster {
			total += st.children
			seen = true
		}
	}
	if !seen {
		return 0, fmt.Errorf("postgres: postmaster %d not found in /proc", p.postmaster)
	}
	return total, nil
}

// procStat is the part of /proc/<pid>/stat the probe reads.
type procStat struct {
	ppid     int
	cpu      time.Duration // utime + stime
	children time.Duration // cutime + cstime: reaped children
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat parses a /proc/<pid>/stat line (proc(5)): the command name
// is in parentheses and may hold spaces, so fields are counted after the
// last ')'.
func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, errors.New("proc stat: no command name")
	}
	// After ")": state(3) ppid(4) … utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return procStat{}, errors.New("proc stat: too few fields")
	}
	var v [5]int64
	for j, k := range []int{4, 14, 15, 16, 17} {
		n, err := strconv.ParseInt(f[k-3], 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("proc stat field %d: %w", k, err)
		}
		v[j] = n
	}
	tick := time.Second / clockTicks
	return procStat{ppid: int(v[0]), cpu: time.Duration(v[1]+v[2]) * tick, children: time.Duration(v[3]+v[4]) * tick}, nil
}

// processCPU is the CPU time (user and system) this process has used so
// far, or 0 when it cannot be read.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAverage is /proc/loadavg's three load averages, or "unknown": shared
// machines drift, and the table says how busy this one was.
func loadAverage() string {
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
