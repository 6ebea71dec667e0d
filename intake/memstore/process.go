package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// ownerLapsedLocked reports whether r is processing under an owner that is
// not live at now: a takeover that counts a crash. The caller holds s.mu.
func (s *Store) ownerLapsedLocked(r *row, now time.Time) bool {
	if r.state != intake.StateProcessing || r.owner == "" {
		return false
	}
	until, ok := s.procs[r.owner]
	return !ok || until.Before(now)
}

// Register implements [intake.ProcessStore.Register].
func (s *Store) Register(ctx context.Context, process string, until time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: register: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.procs[process]; ok {
		return false, nil
	}
	s.procs[process] = until
	return true, nil
}

// Beat implements [intake.ProcessStore.Beat].
func (s *Store) Beat(ctx context.Context, process string, until, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: beat: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end, ok := s.procs[process]
	if !ok || end.Before(now) {
		return false, nil
	}
	if until.After(end) {
		s.procs[process] = until
	}
	return true, nil
}

// Leave implements [intake.ProcessStore.Leave].
func (s *Store) Leave(ctx context.Context, process string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: leave: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.procs[process]
	delete(s.procs, process)
	return ok, nil
}

// Reap implements [intake.ProcessStore.Reap].
func (s *Store) Reap(ctx context.Context, now time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("memstore: reap: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p, until := range s.procs {
		if until.Before(now) {
			delete(s.procs, p)
			n++
		}
	}
	return n, nil
}
