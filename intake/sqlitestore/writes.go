package sqlitestore

import (
	"context"
	"database/sql"
	"time"
)

// Group commit of the single-statement writes.
//
// Every state change of a row (claim, renew, settle, exhaust, acknowledge,
// requeue) is one conditional statement. Run on its own, each would be a
// transaction of its own and, with synchronous=FULL, an fsync of its own:
// with 32 handlers running, claims and settlements would queue for the disk
// one at a time. Instead, concurrent writes share a transaction: a write that
// finds none in progress commits at once; the writes that arrive meanwhile
// run together in the next one, each its own statement, and one commit makes
// them all durable before any of them returns. Each statement stays atomic by
// itself, so sharing a commit changes no outcome. If any statement of a
// shared transaction fails, the transaction is rolled back and each write is
// run again alone, so one failing write cannot fail the others.

const (
	// maxWriteBatch bounds the writes that share one transaction.
	maxWriteBatch = 256
	// writeBound bounds one shared transaction, including the wait for
	// SQLite's write lock.
	writeBound = time.Minute
)

// writeOp is one single-statement write, run inside a transaction on the
// writer connection. It records its results in variables of its caller,
// which are valid only when the write returns no error.
type writeOp func(ctx context.Context, tx *sql.Tx) error

// write runs op in a transaction shared with concurrent writes, and returns
// once that transaction is durable.
func (s *Store) write(ctx context.Context, op writeOp) error {
	opErr, err := s.writes.Do(ctx, op)
	if err != nil {
		return err
	}
	return opErr
}

// commitWrites is the group's CommitFunc: ops in one transaction, or each
// alone when one of them fails.
func (s *Store) commitWrites(ctx context.Context, ops []writeOp) ([]error, error) {
	errs := make([]error, len(ops))
	if len(ops) > 1 && s.runTx(ctx, ops) == nil {
		return errs, nil
	}
	for i, op := range ops {
		errs[i] = s.runTx(ctx, []writeOp{op})
	}
	return errs, nil
}

// runTx runs ops in one transaction on the writer and commits it, unless
// the path no longer names the open database file: a commit then would land
// in a file that does not survive a restart (see [ErrDatabaseGone]).
func (s *Store) runTx(ctx context.Context, ops []writeOp) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if err := op(ctx, tx); err != nil {
			_ = tx.Rollback()
			return err
		}
	}
	if _, err := s.file.check(); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// execOp is a writeOp that executes st and stores the number of rows it
// changed in *n.
func execOp(st *sql.Stmt, n *int64, args ...any) writeOp {
	return func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...)
		if err != nil {
			return err
		}
		*n, err = res.RowsAffected()
		return err
	}
}
