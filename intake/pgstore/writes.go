package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Group commit of the single-statement writes.
//
// Every state change of a row (claim, renew, settle, exhaust, acknowledge,
// requeue) is one conditional statement. Run on its own, each would be a
// transaction of its own and a WAL flush of its own. Instead, concurrent
// writes share a transaction (internal/groupcommit): a write that finds none
// in progress starts one at once; the writes that arrive meanwhile run
// together in the next one, each its own statement, and one commit makes
// them all durable before any of them returns. Each statement stays atomic
// by itself, so sharing a commit changes no outcome.
//
// A shared transaction takes two round trips, whatever its size. The first
// sends, as one pgx.Batch: BEGIN; lockRows, which locks the batch's rows in
// update id order, skipping any row another transaction holds (FOR NO KEY
// UPDATE SKIP LOCKED, the lock an UPDATE takes anyway), and leaves the ids
// it locked in a transaction-local setting; then every write, sorted by
// update id (writes to one row keep their order), each in its shared form
// (see writeSQL). The second is COMMIT.
//
// Row locks. A shared transaction never waits for a row lock. A row can be
// held for long by someone else: an application's domain transaction that
// locked it through [Store.OwnsTx] (which a reclaim, and the owner's own
// renewal, must wait for, by design), another sweeper's [Store.DueTx], or
// another process's write. Waiting inside a shared transaction would stall
// every write of the batch, and every write queued behind it, for as long as
// that domain transaction stays open. So a write's shared form has one more
// condition, on its parameters only: its row is among those lockRows
// locked. For a row lockRows skipped, the condition is false before the row
// is looked at, so the write neither waits for the row nor changes it; it
// leaves the batch, and its caller runs it alone, on the pool and outside
// the group, exactly as before group commit: it waits for the lock (a
// reclaim still waits for the fenced transaction's commit and then gets the
// next attempt) while the group goes on. A shared transaction thus only
// writes rows it already holds and never waits, so two processes' shared
// transactions cannot deadlock; taking the locks and running the writes in
// update id order keeps that true even if a lock were ever waited for.
//
// Skipping a held row (rather than waiting under SET LOCAL lock_timeout)
// keeps one held row from stalling the writes queued behind it; the
// measurements are in BENCHMARKS.md, "pgstore group commit".
//
// Failures. If any statement of a shared transaction fails (or BEGIN does),
// the transaction is rolled back and every write of it is run alone by its
// caller, so one failing write cannot fail the others and each gets its own
// answer. If the COMMIT itself fails, its outcome is unknown, and running
// the writes again could misreport one that did commit; every write of the
// batch then fails with that error, as a lone write's failed commit does.

const (
	// maxWriteBatch bounds the writes that share one transaction.
	maxWriteBatch = 256
	// writeBound bounds one shared transaction. It never waits for a row
	// lock, so this is only a guard against a stuck connection.
	writeBound = time.Minute
)

// writeReq is one single-statement write of one row.
type writeReq struct {
	updateID int64
	sql      writeSQL
	args     []any
	// dest receives the values of a statement with RETURNING (one row at
	// most); nil for a statement without. The values are valid only when
	// the write reports one row.
	dest []any
	// clockArg, when above zero, is the 1-based position in args of this
	// host's clock for <table>_clock. It is read once a connection is in
	// hand, just before the statement is sent, so that neither the group
	// commit's queue nor the pool's wait reads as clock skew.
	clockArg int
}

// stampClock fills r's clock argument, if it has one.
func (s *Store) stampClock(r writeReq) {
	if r.clockArg > 0 {
		r.args[r.clockArg-1] = ms(s.clock())
	}
}

// writeRes answers a writeReq.
type writeRes struct {
	n     int64 // rows changed
	alone bool  // the write did not run in the batch: its caller runs it alone
}

// testHooks observe the group commit in tests; nil in production.
type testHooks struct {
	// enter is called by every write before it joins the group.
	enter func()
	// batch is called by a leader with the update ids of a shared
	// transaction's writes, in the order they run, before it runs them.
	batch func(ids []int64)
	// end is called after a shared transaction with the update ids it ran
	// and whether it committed.
	end func(ids []int64, committed bool)
}

// write runs r in a transaction shared with concurrent writes, or alone when
// the shared one could not run it, and returns the rows it changed once its
// transaction is durable. op names the operation in errors.
func (s *Store) write(ctx context.Context, op string, r writeReq) (int64, error) {
	if s.hooks != nil && s.hooks.enter != nil {
		s.hooks.enter()
	}
	res, err := s.writes.Do(ctx, r)
	if err != nil {
		return 0, s.fail(op, err)
	}
	if res.alone {
		res.n, err = s.writeAlone(ctx, r)
		if err != nil {
			return 0, s.fail(op, err)
		}
	}
	return res.n, nil
}

// writeAlone runs r as one autocommit statement on the pool.
func (s *Store) writeAlone(ctx context.Context, r writeReq) (int64, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	s.stampClock(r)
	if r.dest == nil {
		tag, err := conn.Exec(ctx, r.sql.alone, r.args...)
		if err != nil {
			return 0, err
		}
		return tag.RowsAffected(), nil
	}
	err = conn.QueryRow(ctx, r.sql.alone, r.args...).Scan(r.dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// orderWrites returns the indexes of ids sorted by update id; writes to one
// row keep their relative order.
func orderWrites(ids []int64) []int {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case ids[a] < ids[b]:
			return -1
		case ids[a] > ids[b]:
			return 1
		}
		return 0
	})
	return order
}

// commitWrites is the group's CommitFunc. It returns an error only when the
// COMMIT of the shared transaction failed.
func (s *Store) commitWrites(ctx context.Context, reqs []writeReq) ([]writeRes, error) {
	res := make([]writeRes, len(reqs))
	aloneAll := func() ([]writeRes, error) {
		for i := range res {
			res[i] = writeRes{alone: true}
		}
		return res, nil
	}
	ids := make([]int64, len(reqs))
	for i, r := range reqs {
		ids[i] = r.updateID
	}
	order := orderWrites(ids)

	runIDs := make([]int64, len(order))
	for k, i := range order {
		runIDs[k] = ids[i]
	}
	if s.hooks != nil && s.hooks.batch != nil {
		s.hooks.batch(runIDs)
	}
	committed := false
	if s.hooks != nil && s.hooks.end != nil {
		defer func() { s.hooks.end(runIDs, committed) }()
	}

	// Round trip 1: begin, lock the batch's rows that nobody else holds, and
	// run every write in update id order.
	rows := make([]int64, 0, len(order)) // distinct ids, ascending
	for _, id := range runIDs {
		if n := len(rows); n == 0 || rows[n-1] != id {
			rows = append(rows, id)
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return aloneAll()
	}
	defer conn.Release() // after the rollback below
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(s.q.lockRows, rows)
	for _, i := range order {
		s.stampClock(reqs[i])
		b.Queue(reqs[i].sql.shared, reqs[i].args...)
	}
	br := conn.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(ctx) }() // no-op once committed; closes the connection if ctx ended
	err = readShared(br, reqs, order, res)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return aloneAll()
	}

	// Round trip 2: one commit for all of them.
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit of %d shared writes: %w", len(reqs), err)
	}
	committed = true
	return res, nil
}

// readShared reads a shared transaction's first round trip: the begin, the
// rows locked, then the answers of reqs[order[0]], reqs[order[1]], … into
// res, stopping at the first error. A write of a row that was not locked
// changed nothing and is marked alone.
func readShared(br pgx.BatchResults, reqs []writeReq, order []int, res []writeRes) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	var (
		ids     []int64
		setting string
	)
	if err := br.QueryRow().Scan(&ids, &setting); err != nil {
		return err
	}
	for _, i := range order {
		r := reqs[i]
		_, locked := slices.BinarySearch(ids, r.updateID)
		var n int64
		if r.dest == nil {
			tag, err := br.Exec()
			if err != nil {
				return err
			}
			n = tag.RowsAffected()
		} else {
			err := br.QueryRow().Scan(r.dest...)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil:
				return err
			default:
				n = 1
			}
		}
		switch {
		case locked:
			res[i].n = n
		case n != 0: // cannot happen: the shared form changes only locked rows
			return fmt.Errorf("a shared write changed update %d, which it had not locked", r.updateID)
		default:
			res[i].alone = true
		}
	}
	return nil
}
