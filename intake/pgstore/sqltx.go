package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// OwnsSQLTx is [Store.OwnsTx] for a database/sql transaction, such as one
// from a *sql.DB opened with github.com/jackc/pgx/v5/stdlib (for example
// stdlib.OpenDBFromPool on the store's pool). It reports whether id still
// holds a live lease at at, and locks the update's row FOR UPDATE until tx
// ends, so no reclaim can pass between this check and tx's commit.
//
// tx must be on the store's database. Apps outside Go get the same fence from
// the SQL function <table>_owns (see [Schema]).
func (s *Store) OwnsSQLTx(ctx context.Context, tx *sql.Tx, id intake.Identity, at time.Time) (bool, error) {
	var owned bool
	err := tx.QueryRowContext(ctx, s.q.owns, id.UpdateID, id.Attempt, id.ClaimID, ms(at)).Scan(&owned)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.fail("owns in sql transaction", err)
	}
	return owned, nil
}
