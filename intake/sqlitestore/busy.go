package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"modernc.org/sqlite"

	"github.com/tgrelay/tgrelay/internal/backoff"
)

// sqliteBusy is SQLite's primary result code SQLITE_BUSY.
const sqliteBusy = 5

// isBusy reports whether err is SQLITE_BUSY or one of its extended codes.
func isBusy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqliteBusy
}

// pingWaiting opens db's first connection, whose pragmas may switch a new
// file to WAL mode, retrying while SQLite answers SQLITE_BUSY, for at most
// bound. Switching the journal mode takes a lock for which SQLite does not
// call the busy handler, so processes that create the same file at once
// (several serve starting together) would otherwise fail at once with
// "database is locked" rather than wait under busy_timeout.
func pingWaiting(ctx context.Context, db *sql.DB, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for attempt := 1; ; attempt++ {
		err := db.PingContext(ctx)
		delay := busyBackoff.Delay(attempt)
		if err == nil || !isBusy(err) || time.Now().Add(delay).After(deadline) {
			return err
		}
		if backoff.Sleep(ctx, delay) != nil {
			return err
		}
	}
}

// busyBackoff paces pingWaiting's retries.
var busyBackoff = backoff.Capped{Base: 2 * time.Millisecond, Factor: 2, Max: 100 * time.Millisecond}
