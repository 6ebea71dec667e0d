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
// A shared transaction takes three round trips, whatever its size:
//
//  1. BEGIN and one SELECT … FOR NO KEY UPDATE SKIP LOCKED that locks the
//     rows of the batch, in update id order;
//  2. the writes whose rows it locked, sorted by update id (writes to one
//     row keep their order), sent together as one pgx.Batch;
//  3. COMMIT.
//
// Row locks. A shared transaction never waits for a row lock. A row can be
// locked for long by someone else: an application's domain transaction that
// holds it through [Store.OwnsTx] (which a reclaim, and the owner's own
// renewal, must wait for, by design), another sweeper's [Store.DueTx], or
// another process's write. Waiting inside a shared transaction would stall
// every write of the batch, and every write queued behind it, for as long as
// that domain transaction stays open. So the first statement skips locked
// rows (SKIP LOCKED), and a write whose row it did not lock leaves the batch:
// its caller runs it alone, on the pool and outside the group, exactly as
// before group commit, so it waits for the lock (a reclaim still waits for
// the fenced transaction's commit and then gets the next attempt) while
// the group goes on. Because the writes that stay touch only rows the batch
// already holds, a batch never waits and two processes' batches cannot
// deadlock; locking in update id order and running the writes in that order
// keep that true even if a lock were ever waited for. This was chosen over
// lock_timeout: a timeout would stall the batch up to the timeout on every
// fenced row and then redo the whole batch, and any value short enough to
// keep the stall small is also short enough to trip on an ordinary commit
// of another process.
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
	sql      string
	args     []any
	// dest receives the values of a statement with RETURNING (one row at
	// most); nil for a statement without. The values are valid only when
	// the write reports one row.
	dest []any
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
	if r.dest == nil {
		tag, err := s.pool.Exec(ctx, r.sql, r.args...)
		if err != nil {
			return 0, err
		}
		return tag.RowsAffected(), nil
	}
	err := s.pool.QueryRow(ctx, r.sql, r.args...).Scan(r.dest...)
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
	rows := make([]int64, 0, len(reqs)) // distinct ids, ascending
	for _, i := range order {
		if n := len(rows); n == 0 || rows[n-1] != ids[i] {
			rows = append(rows, ids[i])
		}
	}

	// Round trip 1: begin, and lock the batch's rows that nobody else holds.
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(s.q.lockRows, rows)
	br := s.pool.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(ctx) }() // no-op once committed; closes the connection if ctx ended
	locked, err := readLocked(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return aloneAll()
	}

	// Round trip 2: the writes of the locked rows, in update id order.
	run := make([]int, 0, len(order))
	runIDs := make([]int64, 0, len(order))
	for _, i := range order {
		if _, ok := locked[ids[i]]; ok {
			run = append(run, i)
			runIDs = append(runIDs, ids[i])
		} else {
			res[i].alone = true
		}
	}
	if s.hooks != nil && s.hooks.batch != nil {
		s.hooks.batch(runIDs)
	}
	committed := false
	if s.hooks != nil && s.hooks.end != nil {
		defer func() { s.hooks.end(runIDs, committed) }()
	}
	if len(run) > 0 {
		wb := &pgx.Batch{}
		for _, i := range run {
			wb.Queue(reqs[i].sql, reqs[i].args...)
		}
		wr := tx.SendBatch(ctx, wb)
		err := readWrites(wr, reqs, run, res)
		if cerr := wr.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return aloneAll()
		}
	}

	// Round trip 3: one commit for all of them.
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("commit of %d shared writes: %w", len(run), err)
	}
	committed = true
	return res, nil
}

// readLocked reads the first batch's results: the begin, then the ids of the
// rows locked.
func readLocked(br pgx.BatchResults) (map[int64]struct{}, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	rs, err := br.Query()
	if err != nil {
		return nil, err
	}
	got, err := pgx.CollectRows(rs, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	locked := make(map[int64]struct{}, len(got))
	for _, id := range got {
		locked[id] = struct{}{}
	}
	return locked, nil
}

// readWrites reads the results of the writes reqs[run[0]], reqs[run[1]], …
// into res, stopping at the first error.
func readWrites(wr pgx.BatchResults, reqs []writeReq, run []int, res []writeRes) error {
	for _, i := range run {
		if reqs[i].dest == nil {
			tag, err := wr.Exec()
			if err != nil {
				return err
			}
			res[i].n = tag.RowsAffected()
			continue
		}
		err := wr.QueryRow().Scan(reqs[i].dest...)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			res[i].n = 0
		case err != nil:
			return err
		default:
			res[i].n = 1
		}
	}
	return nil
}
