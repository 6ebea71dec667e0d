//go:build unix

package sqlitestore

import (
	"errors"
	"os"
	"syscall"
)

// lockFile creates path and takes an exclusive flock on it, without
// waiting; the lock lasts as long as the returned file is open.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		_ = os.Remove(path)
		return nil, err
	}
	return f, nil
}

// holderGone reports whether the process holding path's lock is gone: the
// file exists and its lock can be taken. When it reports true it has
// removed the file. A missing file, or one still locked, reports false.
func holderGone(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return false // held: alive (or paused), or we cannot tell
	}
	// Removed while locked, so no one else takes it for a second death.
	rm := os.Remove(path)
	return rm == nil || errors.Is(rm, os.ErrNotExist)
}

// procLocks reports whether this platform has the process locks.
const procLocks = true
