package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// ErrDatabaseGone is wrapped by the error of every write, [Store.Stats] and
// [Store.Health] while the store's path no longer names the database file
// it has open: the file was deleted (with its directory, say) or replaced by
// another file. The open connections would go on writing into a file that
// is unlinked or no longer the one at the path, so nothing written would
// survive a restart; the store refuses instead, and an intake answers the
// webhook 503 so that Telegram delivers the update again. When the path
// names the open file again (it was moved back), the store recovers by
// itself; a different file at the path needs a restart.
var ErrDatabaseGone = errors.New("sqlitestore: the database file is gone")

// DefaultFileCheckInterval is how often the background check of an open
// store looks at its path when Config.FileCheckInterval is zero.
const DefaultFileCheckInterval = time.Second

// MaxFileCheckInterval is the largest accepted Config.FileCheckInterval.
const MaxFileCheckInterval = time.Minute

// fileWatch remembers which file the store opened and whether its path
// still names it. Safe for concurrent use.
type fileWatch struct {
	path   string      // "" when the database has no file (nothing to check)
	opened os.FileInfo // the file as opened

	mu       sync.Mutex
	gone     error       // the last check's answer: nil, or an error wrapping ErrDatabaseGone
	onChange func(error) // Config.OnFileChange; nil reports nothing

	stop chan struct{} // closed by Close; nil without a background check
	done chan struct{}
}

// newFileWatch records the file at path, which the store has just opened.
func newFileWatch(path string) (*fileWatch, error) {
	fw := &fileWatch{path: path}
	if path == "" {
		return fw, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: stat %s: %w", path, err)
	}
	fw.opened = fi
	return fw, nil
}

// databaseFile returns the path of db's main database file, as SQLite
// opened it, or "" for a database without one.
func databaseFile(ctx context.Context, db *sql.DB) (string, error) {
	var file string
	err := db.QueryRowContext(ctx, `SELECT file FROM pragma_database_list WHERE name = 'main'`).Scan(&file)
	if err != nil {
		return "", fmt.Errorf("sqlitestore: find the database file: %w", err)
	}
	return file, nil
}

// check stats the path now and records the answer: nil while the path
// names the opened file, an error wrapping ErrDatabaseGone otherwise. It
// reports whether the answer changed, and reports a change to onChange
// itself, whichever path checked first (a commit, a health probe, the
// background check), so the change is told once. Checks are serialised, so
// the changes are told in the order they were seen.
func (fw *fileWatch) check() (changed bool, err error) {
	if fw.path == "" {
		return false, nil
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fi, statErr := os.Stat(fw.path)
	switch {
	case statErr != nil:
		err = fmt.Errorf("%w: %s: %w", ErrDatabaseGone, fw.path, statErr)
	case !os.SameFile(fi, fw.opened):
		err = fmt.Errorf("%w: %s now names another file (device or inode changed); restart on the right file", ErrDatabaseGone, fw.path)
	}
	changed = (err == nil) != (fw.gone == nil)
	fw.gone = err
	if changed && fw.onChange != nil {
		fw.onChange(err)
	}
	return changed, err
}

// watch records onChange, the receiver of every changed answer, and runs
// check every interval until stop is closed.
func (fw *fileWatch) watch(interval time.Duration, onChange func(error)) {
	if fw.path == "" {
		return
	}
	fw.mu.Lock()
	fw.onChange = onChange
	fw.mu.Unlock()
	fw.stop, fw.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(fw.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-fw.stop:
				return
			case <-t.C:
				fw.check()
			}
		}
	}()
}

// close stops the background check and waits for it.
func (fw *fileWatch) close() {
	if fw.stop != nil {
		close(fw.stop)
		<-fw.done
	}
}

// Health reports nil while the store can serve: its path still names the
// open database file (see [ErrDatabaseGone]) and a read succeeds. Readiness
// probes call it; it checks the file now rather than trusting the last
// background check.
func (s *Store) Health(ctx context.Context) error {
	if _, err := s.file.check(); err != nil {
		return err
	}
	var one int
	if err := s.r.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("sqlitestore: health: %w", err)
	}
	return nil
}

// Created reports whether [Open] created the database file: the path named
// no file before. A caller logs it once, with the path, so that a new empty
// database on a mistyped path does not go unnoticed.
func (s *Store) Created() bool { return s.created }

// Path returns the database file's path as SQLite opened it, or "" for a
// database without one.
func (s *Store) Path() string { return s.file.path }
