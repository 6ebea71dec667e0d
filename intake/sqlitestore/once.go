package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// recordEffectSQL records an effect unless it is recorded already.
const recordEffectSQL = `INSERT INTO "{{table}}_effects" (update_id, effect, attempt, claim_id, applied_at)
VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING`

// Once applies an effect of one update exactly once: it runs fn inside one
// transaction on [Store.DB] that also checks that id still owns its update
// and records the effect, keyed by the update id and effect (a name of the
// handler's choosing; "" when the handler has one effect). Use it for the
// handler's domain writes:
//
//	applied, err := store.Once(ctx, a.Identity, "count-vote", func(tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, `UPDATE polls SET votes = votes + 1 WHERE id = ?`, pollID)
//		return err
//	})
//
// The answers:
//
//   - true, nil: fn ran and its writes committed with the record.
//   - false, nil: the effect was already applied, by this attempt or an
//     earlier one of the same update (one that wrote, then failed, and was
//     retried): fn did not run. Carry on as if it had (send the reply).
//   - false, an error matching [intake.ErrNotOwner]: id no longer owns the
//     update (its lease lapsed and another attempt may run it): fn did not
//     run. Return the error; the runner treats the attempt as lost.
//   - false, fn's error (wrapped): fn failed and nothing was committed.
//   - false, another error: the database failed; nothing was committed.
//
// So a handler that writes, then fails to send its reply, and is retried,
// counts the vote once; a stale attempt never writes; of two concurrent
// attempts (there is only one owner at a time) at most one applies it.
//
// The transaction holds SQLite's one write lock, which the store's own
// writes (the webhook's commits included) wait for: keep fn short and
// within this database — no network calls, no sleeping, no calls to the
// store's writing methods (those wait for the same connection: a
// deadlock). Read with [Store.ReadDB] outside it.
func (s *Store) Once(ctx context.Context, id intake.Identity, effect string, fn func(tx *sql.Tx) error) (applied bool, err error) {
	at := time.Now().Truncate(time.Millisecond)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: once %d: begin: %w", id.UpdateID, err)
	}
	defer func() {
		if !applied {
			tx.Rollback()
		}
	}()
	owns, err := s.OwnsTx(ctx, tx, id, at)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: once %d: %w", id.UpdateID, err)
	}
	if !owns {
		return false, fmt.Errorf("sqlitestore: once %d attempt %d: %w", id.UpdateID, id.Attempt, intake.ErrNotOwner)
	}
	res, err := tx.ExecContext(ctx, strings.ReplaceAll(recordEffectSQL, "{{table}}", s.table),
		id.UpdateID, effect, id.Attempt, id.ClaimID, ms(at))
	if err != nil {
		return false, fmt.Errorf("sqlitestore: once %d: record effect: %w", id.UpdateID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		if err != nil {
			return false, fmt.Errorf("sqlitestore: once %d: record effect: %w", id.UpdateID, err)
		}
		return false, nil // already applied
	}
	if err := fn(tx); err != nil {
		return false, fmt.Errorf("sqlitestore: once %d: %w", id.UpdateID, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("sqlitestore: once %d: commit: %w", id.UpdateID, err)
	}
	return true, nil
}

// ReadDB returns the store's handle for reading: for [Open], a pool of
// read-only connections that never wait for the one writer, so a domain
// read does not queue behind the webhook's commits or an open
// [Store.Once] transaction (WAL readers see the last commit). For [New] it
// is the caller's handle.
func (s *Store) ReadDB() *sql.DB { return s.r }
