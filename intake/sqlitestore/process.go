package sqlitestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Heartbeats (intake.ProcessStore) live in the table <table>_procs. Several
// processes may share one database file, and SQLite's write lock says
// nothing about whether the process that last claimed a row is alive, so
// the store keeps heartbeats like a shared database does. Every write goes
// through the shared write transaction, as claims do.
//
// One host can say more than a heartbeat, though: WAL mode needs every
// process of a file on one host (they share its memory index), so each
// process registered through a Store also holds an exclusive flock on a
// file of its own, <database>-procs/<id>.lock, created before its row.
// The kernel drops the lock the instant the process dies, kill -9
// included. Reap takes over the lock of every registered process that
// holds none any more and removes that process at once, without waiting
// for its heartbeat to lapse, so a restarted serve gets its dead
// predecessor's updates back as soon as it starts. A process that is only
// paused keeps its lock and is judged by its heartbeat. Where the lock file
// cannot be made (a read-only directory, a non-unix system), heartbeats
// alone decide.

// procLocker holds this store's process locks.
type procLocker struct {
	dir string // "" when there are none (no database file)

	mu    sync.Mutex
	files map[string]*os.File // process id → its locked file
}

func newProcLocker(dbFile string) *procLocker {
	l := &procLocker{files: map[string]*os.File{}}
	if dbFile != "" && procLocks {
		l.dir = dbFile + "-procs"
	}
	return l
}

func (l *procLocker) path(process string) string { return filepath.Join(l.dir, process+".lock") }

// lock takes process's lock, or does nothing when locks are unavailable
// or the lock is held already (by this store or another). It reports
// whether it took the lock, which only then is this call's to release.
func (l *procLocker) lock(process string) bool {
	if l.dir == "" || !validProcessFile(process) {
		return false
	}
	if err := os.MkdirAll(l.dir, 0o700); err != nil {
		return false
	}
	f, err := lockFile(l.path(process))
	if err != nil {
		return false
	}
	l.mu.Lock()
	l.files[process] = f
	l.mu.Unlock()
	return true
}

// unlock releases and removes process's lock, if this store holds it.
func (l *procLocker) unlock(process string) {
	l.mu.Lock()
	f := l.files[process]
	delete(l.files, process)
	l.mu.Unlock()
	if f != nil {
		_ = os.Remove(f.Name())
		f.Close()
	}
}

// holds reports whether this store holds process's lock.
func (l *procLocker) holds(process string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.files[process] != nil
}

// close releases every lock.
func (l *procLocker) close() {
	l.mu.Lock()
	ids := make([]string, 0, len(l.files))
	for id := range l.files {
		ids = append(ids, id)
	}
	l.mu.Unlock()
	for _, id := range ids {
		l.unlock(id)
	}
}

// validProcessFile reports whether a process id can name a lock file: the
// intake's ids are hex, and anything with a path separator or a dot is
// refused (the heartbeat still works without a lock).
func validProcessFile(process string) bool {
	if process == "" || len(process) > 128 {
		return false
	}
	for _, c := range process {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Register implements [intake.ProcessStore.Register]. The process's lock
// is taken before its row is written (see above).
func (s *Store) Register(ctx context.Context, process string, until time.Time) (bool, error) {
	// A refused registration releases only a lock it took itself: the lock
	// of the registration already live stays with it.
	took := s.procs.lock(process)
	var n int64
	err := s.write(ctx, execOp(s.q.register, &n, process, ms(until)))
	if took && (err != nil || n == 0) {
		s.procs.unlock(process)
	}
	if err != nil {
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

// Leave implements [intake.ProcessStore.Leave], releasing the process's
// lock after its row is gone.
func (s *Store) Leave(ctx context.Context, process string) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.leave, &n, process)); err != nil {
		return false, fmt.Errorf("sqlitestore: leave: %w", err)
	}
	s.procs.unlock(process)
	return n > 0, nil
}

// Reap implements [intake.ProcessStore.Reap]: it removes the heartbeats
// that lapsed, and also those of registered processes whose lock is free,
// which are gone for certain however live their heartbeat still looks.
func (s *Store) Reap(ctx context.Context, now time.Time) (int, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.reap, &n, ms(now))); err != nil {
		return 0, fmt.Errorf("sqlitestore: reap processes: %w", err)
	}
	if s.procs.dir == "" {
		return int(n), nil
	}
	ids, err := s.processIDs(ctx)
	if err != nil {
		return int(n), fmt.Errorf("sqlitestore: reap processes: %w", err)
	}
	for _, id := range ids {
		if s.procs.holds(id) || !validProcessFile(id) || !holderGone(s.procs.path(id)) {
			continue
		}
		var gone int64
		if err := s.write(ctx, execOp(s.q.leave, &gone, id)); err != nil {
			return int(n), fmt.Errorf("sqlitestore: reap process: %w", err)
		}
		n += gone
	}
	return int(n), nil
}

// processIDs lists the registered processes.
func (s *Store) processIDs(ctx context.Context) ([]string, error) {
	rows, err := s.q.procs.QueryContext(ctx)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}
