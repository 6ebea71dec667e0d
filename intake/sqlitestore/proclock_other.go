//go:build !unix

package sqlitestore

import (
	"errors"
	"os"
)

var errNoLocks = errors.New("sqlitestore: process locks need a unix system")

func lockFile(string) (*os.File, error) { return nil, errNoLocks }

func holderGone(string) bool { return false }

// procLocks reports whether this platform has the process locks.
const procLocks = false
