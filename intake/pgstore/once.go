package pgstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/intake"
)

// recordEffectSQL records an effect unless it is recorded already: $1
// update id, $2 effect, $3 attempt, $4 claim id, $5 at.
const recordEffectSQL = `INSERT INTO {{table}}_effects (update_id, effect, attempt, claim_id, applied_at)
VALUES ($1::bigint, $2::text, $3::integer, $4::text, $5::bigint) ON CONFLICT DO NOTHING`

// Once applies an effect of one update exactly once: it runs fn inside one
// transaction on the store's pool that also checks that id still owns its
// update (locking the update's row) and records the effect, keyed by the
// update id and effect (a name of the handler's choosing; "" when the
// handler has one effect). The answers:
//
//   - true, nil: fn ran and its writes committed with the record.
//   - false, nil: the effect was already applied, by this attempt or an
//     earlier one of the same update (one that wrote, then failed, and was
//     retried): fn did not run. Carry on as if it had.
//   - false, an error matching [intake.ErrNotOwner]: id no longer owns the
//     update: fn did not run.
//   - false, fn's error (wrapped), or a database error: nothing committed.
//
// Concurrent calls for one update wait on the row lock, so at most one
// applies the effect. Keep fn to this database's work: the update's row
// stays locked (and a renewal of its lease waits) until it returns. Apps in
// other languages call the SQL function <table>_once the same way (see
// [Schema]). [Store.OnceSQL] is the same for a database/sql handle.
func (s *Store) Once(ctx context.Context, id intake.Identity, effect string, fn func(tx pgx.Tx) error) (applied bool, err error) {
	at := time.Now().Truncate(time.Millisecond)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, s.fail("once: begin", err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return false, s.fail("once: begin", err)
	}
	defer func() {
		if !applied {
			tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	owns, err := s.OwnsTx(ctx, tx, id, at)
	if err != nil {
		return false, err
	}
	if !owns {
		return false, fmt.Errorf("pgstore: once %d attempt %d: %w", id.UpdateID, id.Attempt, intake.ErrNotOwner)
	}
	tag, err := tx.Exec(ctx, s.effectSQL(), id.UpdateID, effect, id.Attempt, id.ClaimID, ms(at))
	if err != nil {
		return false, s.fail("once: record effect", err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil // already applied
	}
	if err := fn(tx); err != nil {
		return false, fmt.Errorf("pgstore: once %d: %w", id.UpdateID, err)
	}
	// The end of ctx during the COMMIT cancels it at the server, and the
	// COMMIT's own answer says whether it applied (cancelAtServer); its
	// end before the COMMIT rolls the transaction back.
	if err := ctx.Err(); err != nil {
		return false, s.fail("once: commit", context.Cause(ctx))
	}
	if err := cancelAtServer(ctx, conn, func(ctx context.Context) error { return tx.Commit(ctx) }); err != nil {
		return false, s.fail("once: commit", err)
	}
	return true, nil
}

// OnceSQL is [Store.Once] for a database/sql handle on the store's
// database, such as one from github.com/jackc/pgx/v5/stdlib
// (stdlib.OpenDBFromPool on the store's pool): the transaction is begun on
// db and fn gets it.
func (s *Store) OnceSQL(ctx context.Context, db *sql.DB, id intake.Identity, effect string, fn func(tx *sql.Tx) error) (applied bool, err error) {
	at := time.Now().Truncate(time.Millisecond)
	// The transaction's own context, which its COMMIT runs in, is not
	// ctx: a driver whose COMMIT's context ends returns at once, as failed,
	// while the server may still commit it (pgx's stdlib does). The end of
	// ctx before the COMMIT rolls the transaction back instead.
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeBound)
	defer cancel()
	tx, err := db.BeginTx(tctx, nil)
	if err != nil {
		return false, s.fail("once: begin", err)
	}
	defer func() {
		if !applied {
			tx.Rollback()
		}
	}()
	owns, err := s.OwnsSQLTx(ctx, tx, id, at)
	if err != nil {
		return false, err
	}
	if !owns {
		return false, fmt.Errorf("pgstore: once %d attempt %d: %w", id.UpdateID, id.Attempt, intake.ErrNotOwner)
	}
	res, err := tx.ExecContext(ctx, s.effectSQL(), id.UpdateID, effect, id.Attempt, id.ClaimID, ms(at))
	if err != nil {
		return false, s.fail("once: record effect", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, s.fail("once: record effect", err)
	}
	if n == 0 {
		return false, nil // already applied
	}
	if err := fn(tx); err != nil {
		return false, fmt.Errorf("pgstore: once %d: %w", id.UpdateID, err)
	}
	if err := ctx.Err(); err != nil {
		return false, s.fail("once: commit", context.Cause(ctx))
	}
	if err := tx.Commit(); err != nil {
		if errors.Is(err, sql.ErrTxDone) {
			return false, fmt.Errorf("pgstore: once %d: fn ended the transaction: %w", id.UpdateID, err)
		}
		return false, s.fail("once: commit", err)
	}
	return true, nil
}

func (s *Store) effectSQL() string { return strings.ReplaceAll(recordEffectSQL, "{{table}}", s.table) }
