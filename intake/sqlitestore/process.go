package sqlitestore

import (
	"context"
	"fmt"
	"time"
)

// Heartbeats (intake.ProcessStore) live in the table <table>_procs.
// Several processes may share one database file, and SQLite's write lock
// says nothing about whether the process that last held a row is alive, so
// the store keeps heartbeats like a shared database does. Every write goes
// through the shared write transaction, as claims do.

// Register implements [intake.ProcessStore.Register].
func (s *Store) Register(ctx context.Context, process string, until time.Time) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.register, &n, process, ms(until))); err != nil {
		return false, fmt.Errorf("sqlitestore: register process: %w", err)
	}
	return n > 0, nil
}

// Beat implements [intake.ProcessStore.Beat].
func (s *Store) Beat(ctx context.Context, process string, until, now time.Time) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.beat, &n, process, ms(until), ms(now))); err != nil {
		return false, fmt.Errorf("sqlitestore: heartbeat: %w", err)
	}
	return n > 0, nil
}

// Leave implements [intake.ProcessStore.Leave].
func (s *Store) Leave(ctx context.Context, process string) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.leave, &n, process)); err != nil {
		return false, fmt.Errorf("sqlitestore: leave: %w", err)
	}
	return n > 0, nil
}

// Reap implements [intake.ProcessStore.Reap].
func (s *Store) Reap(ctx context.Context, now time.Time) (int, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.reap, &n, ms(now))); err != nil {
		return 0, fmt.Errorf("sqlitestore: reap processes: %w", err)
	}
	return int(n), nil
}
