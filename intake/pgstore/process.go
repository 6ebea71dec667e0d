package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Clock bounds of [Config.MaxClockSkew].
const (
	// DefaultMaxClockSkew is the clock bound when Config.MaxClockSkew is
	// zero. Hosts kept by NTP agree within milliseconds; 2 s leaves room for
	// a loaded database and stays far below what a takeover can tolerate:
	// a heartbeat renewed every few seconds against a 10 s timeout, a lease
	// renewed every quarter of it.
	DefaultMaxClockSkew = 2 * time.Second
	// MaxMaxClockSkew is the largest accepted Config.MaxClockSkew.
	MaxMaxClockSkew = time.Minute
)

// ErrClockSkew is matched by every [*ClockSkewError] with [errors.Is].
var ErrClockSkew = errors.New("pgstore: clock skew")

// ClockSkewError reports that this host's clock differs from the database's
// by more than [Config.MaxClockSkew], so the store refused a claim or a
// heartbeat and changed nothing. Every time in the table is the clock of
// the host that wrote it (see [intake.Store]); a host whose clock ran ahead
// would see live leases and heartbeats end early and take them. Fix the
// host's clock (NTP); the store accepts it again as soon as it agrees.
type ClockSkewError struct {
	// Skew is this host's clock minus the database's: positive when this
	// host runs ahead.
	Skew time.Duration
	// Bound is the configured Config.MaxClockSkew.
	Bound time.Duration
	// Op is the refused operation.
	Op string
}

// Error implements error.
func (e *ClockSkewError) Error() string {
	dir := "ahead of"
	if e.Skew < 0 {
		dir = "behind"
	}
	return fmt.Sprintf("pgstore: %s refused: this host's clock is %v %s the database's, more than Config.MaxClockSkew %v",
		e.Op, e.Skew.Abs(), dir, e.Bound)
}

// Is reports whether target is [ErrClockSkew].
func (e *ClockSkewError) Is(target error) bool { return target == ErrClockSkew }

// clockSkewCode is the SQLSTATE the SQL function <table>_clock raises.
const clockSkewCode = "TG001"

func (s *Store) skewError(op string, pgErr *pgconn.PgError) error {
	skew, _ := strconv.ParseInt(pgErr.Detail, 10, 64)
	return &ClockSkewError{Skew: time.Duration(skew) * time.Millisecond, Bound: time.Duration(s.skew) * time.Millisecond, Op: op}
}

// Register implements [intake.ProcessStore.Register]. Like a claim it fails
// with a [*ClockSkewError] when this host's clock is off, so a runner
// refuses to start on such a host.
func (s *Store) Register(ctx context.Context, process string, until time.Time) (bool, error) {
	tag, err := s.execClocked(ctx, s.q.register, process, ms(until), clockNow{}, s.skew)
	if err != nil {
		return false, s.fail("register process", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Beat implements [intake.ProcessStore.Beat], checking this host's clock
// like [Store.Register].
func (s *Store) Beat(ctx context.Context, process string, until, now time.Time) (bool, error) {
	tag, err := s.execClocked(ctx, s.q.beat, process, ms(until), ms(now), clockNow{}, s.skew)
	if err != nil {
		return false, s.fail("heartbeat", err)
	}
	return tag.RowsAffected() == 1, nil
}

// clockNow marks the argument of execClocked that is this host's clock.
type clockNow struct{}

// execClocked runs sql on a connection of the pool, reading this host's
// clock into the clockNow argument only once the connection is in hand, so
// that a wait for the pool never reads as clock skew.
func (s *Store) execClocked(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer conn.Release()
	for i, a := range args {
		if _, ok := a.(clockNow); ok {
			args[i] = ms(s.clock())
		}
	}
	return conn.Exec(ctx, sql, args...)
}

// Leave implements [intake.ProcessStore.Leave].
func (s *Store) Leave(ctx context.Context, process string) (bool, error) {
	tag, err := s.pool.Exec(ctx, s.q.leave, process)
	if err != nil {
		return false, s.fail("leave", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Reap implements [intake.ProcessStore.Reap].
func (s *Store) Reap(ctx context.Context, now time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, s.q.reap, ms(now))
	if err != nil {
		return 0, s.fail("reap processes", err)
	}
	return int(tag.RowsAffected()), nil
}
