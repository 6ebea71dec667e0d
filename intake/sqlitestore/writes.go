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
//
// Settlements are the exception to "each its own statement": a shared
// transaction runs its settlements batched, and under load a settlement
// is deferred to the next transaction rather than starting one
// (settles.go).

const (
	// maxWriteBatch bounds the writes that share one transaction.
	maxWriteBatch = 256
	// writeBound is the write group's Bound, the context a shared
	// transaction is given. runWrites runs the transaction without its
	// cancellation (see there): the busy timeout bounds the wait for
	// SQLite's write lock.
	writeBound = time.Minute
)

// writeOp is one single-statement write, run inside a transaction on the
// writer connection. It records its results in variables of its caller,
// which are valid only when the write returns no error.
type writeOp func(ctx context.Context, tx *sql.Tx) error

// writeReq is one request of the write group: a writeOp, or a settlement,
// which runs batched with the other settlements of its transaction
// (settles.go).
type writeReq struct {
	op     writeOp
	settle *settleWrite
}

// write runs op in a transaction shared with concurrent writes, and returns
// once that transaction is durable.
func (s *Store) write(ctx context.Context, op writeOp) error {
	return s.do(ctx, writeReq{op: op})
}

func (s *Store) do(ctx context.Context, r writeReq) error {
	opErr, err := s.writes.Do(ctx, r)
	if err != nil {
		return err
	}
	return opErr
}

// commitWrites is the group's CommitFunc: reqs in one transaction, or each
// alone when one of them fails.
func (s *Store) commitWrites(ctx context.Context, reqs []writeReq) ([]error, error) {
	if s.txStart != nil {
		s.txStart()
	}
	errs := make([]error, len(reqs))
	if len(reqs) > 1 && s.runTx(ctx, reqs) == nil {
		return errs, nil
	}
	for i, r := range reqs {
		errs[i] = s.runTx(ctx, []writeReq{r})
	}
	return errs, nil
}

// runTx runs reqs in one transaction on the writer and commits it, unless
// the path no longer names the open database file: a commit then would land
// in a file that does not survive a restart (see [ErrDatabaseGone]). The
// settlements of distinct updates run first, batched; the other writes
// (a second settlement of an update among them) follow in their order.
func (s *Store) runTx(ctx context.Context, reqs []writeReq) error {
	var (
		settles []*settleWrite
		ops     = make([]writeOp, 0, len(reqs))
		seen    map[int64]bool
	)
	for _, r := range reqs {
		switch {
		case r.settle == nil && r.op == nil: // Close's flush of the deferred settlements
		case r.settle == nil:
			ops = append(ops, r.op)
		case seen[r.settle.id.UpdateID]:
			ops = append(ops, s.settleOp(r.settle))
		default:
			if seen == nil {
				seen = make(map[int64]bool, len(reqs))
			}
			seen[r.settle.id.UpdateID] = true
			settles = append(settles, r.settle)
		}
	}
	err := s.runWrites(ctx, settles, ops)
	if s.txDone != nil {
		s.txDone(len(settles), err)
	}
	return err
}

// runWrites is runTx's transaction: settles batched, then ops.
//
// The transaction runs without ctx's cancellation (its values are kept).
// Nothing in it needs an interrupt: its statements are point writes in
// bounded batches, SQLite ends the wait for the write lock after the busy
// timeout, and no interrupt ends a stalled disk write. A context that can
// end is not free with modernc.org/sqlite: each statement run under one
// starts a goroutine to watch it and a progress callback every thousand
// VM steps. In bench relay those were about four goroutines per
// transaction and 2% of serve's CPU.
func (s *Store) runWrites(ctx context.Context, settles []*settleWrite, ops []writeOp) error {
	ctx = context.WithoutCancel(ctx)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := s.runSettles(ctx, tx, settles); err != nil {
		_ = tx.Rollback()
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
