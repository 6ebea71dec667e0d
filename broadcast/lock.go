//go:build unix

package broadcast

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// ErrLocked is returned (wrapped) by [Run] when another runner holds the
// broadcast's lock.
var ErrLocked = errors.New("broadcast: already running")

// ErrLockLost is returned (wrapped) by [Run] when the lock file the runner
// holds is no longer the one at the lock path (it was removed or replaced).
// A runner that lost its lock neither sends nor writes again.
var ErrLockLost = errors.New("broadcast: lock lost")

// fileLock is an exclusive kernel lock (flock) on a lock file. The kernel
// drops it when its holder dies, so it is never reclaimed by age. It is
// never unlinked: removing it would let two runners lock two different
// files.
type fileLock struct {
	path string
	mu   sync.Mutex
	f    *os.File    // nil once released
	held os.FileInfo // the locked file's identity, taken once it is locked
}

// lockGrace is how long acquireLock retries a lock that is held: a child
// process forked by this one (os/exec, before its exec) holds a copy of
// every descriptor for an instant, and with it a lock just released.
const lockGrace = 100 * time.Millisecond

// flockBriefly takes an exclusive flock on f, retrying for lockGrace while
// it is held.
func flockBriefly(f *os.File) error {
	deadline := time.Now().Add(lockGrace)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// acquireLock takes the lock at path, waiting at most lockGrace.
func acquireLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("broadcast: open lock: %w", err)
	}
	if err := flockBriefly(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s is held by another process", ErrLocked, path)
		}
		return nil, fmt.Errorf("broadcast: lock %s: %w", path, err)
	}
	held, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("broadcast: lock %s: %w", path, err)
	}
	l := &fileLock{path: path, f: f, held: held}
	if err := l.check(); err != nil {
		l.release()
		// The file was replaced between open and flock: another runner may
		// hold the new one.
		return nil, fmt.Errorf("%w: lock file replaced while locking", ErrLocked)
	}
	return l, nil
}

// check fails unless the lock is held and the lock path still names the
// locked file (same device and inode). The locked file's own identity never
// changes while it is open, so only the path is looked up each time.
func (l *fileLock) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("%w: released", ErrLockLost)
	}
	now, err := os.Stat(l.path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrLockLost, err)
	}
	if !os.SameFile(l.held, now) {
		return fmt.Errorf("%w: %s was replaced", ErrLockLost, l.path)
	}
	return nil
}

// release drops the lock. It is idempotent.
func (l *fileLock) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close() // closing the descriptor drops the flock
		l.f = nil
	}
}

// tryShared takes a non-blocking shared flock on f and drops it at once. It
// reports true when an exclusive lock (a runner's) is held on the file.
func tryShared(f *os.File, path string) (bool, error) {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("broadcast: probe lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		return false, fmt.Errorf("broadcast: probe lock %s: %w", path, err)
	}
	return false, nil
}
