package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Group commit of the single-statement writes.
//
// Every state change of a row (claim, renew, settle, exhaust, acknowledge,
// requeue) is one conditional statement. Run on its own, each would be a
// transaction of its own and a WAL flush of its own. Instead, concurrent
// writes share a transaction (internal/groupcommit): a write that finds none
// in progress starts one at once; the writes that arrive meanwhile run
// together in the next one, and one commit makes them all durable before
// any of them returns. Each write stays atomic by itself, so sharing a
// commit changes no outcome.
//
// A shared transaction takes two round trips, whatever its size. The first
// sends, as one pgx.Batch: BEGIN; lockRows, which locks the batch's rows in
// update id order, skipping any row another transaction holds (FOR NO KEY
// UPDATE SKIP LOCKED, the lock an UPDATE takes anyway), and leaves the ids
// it locked in a transaction-local setting; then the merged settlements in
// one statement (below); then every other write, sorted by update id
// (writes to one row keep their order), each in its shared form (see
// writeSQL). The second is COMMIT.
//
// Merged settlements. Under load most writes are settlements
// ([Store.Settle]), and every statement costs the server a bind and an
// execution of its own. So the settlements of a shared transaction whose
// row no other write of it touches run as one statement, settleMany
// (settleManySQL): settleSQL over arrays, one element per settlement, with
// the same conditions and values, and settleRecorded's attempt record for
// exactly those that applied and carry one. It answers the update ids it
// settled, from which each caller gets its own answer. A settlement that
// shares its row with another write of the batch (a second settlement of
// the same attempt, a record, a renewal) is not merged and runs in its own
// statement, in its row's order; so settleMany never sees an update id
// twice, and the writes of one row run in the order they would unmerged.
// The writes of a batch are concurrent calls, so any order of the writes
// of different rows is one they could have run in: running the merged
// ones first changes no outcome. A lone mergeable settlement runs in its
// own form.
//
// Row locks. A shared transaction never waits for a row lock. A row can be
// held for long by someone else: an application's domain transaction that
// locked it through [Store.OwnsTx] (which a reclaim, and the owner's own
// renewal, must wait for, by design), another sweeper's [Store.DueTx], or
// another process's write. Waiting inside a shared transaction would stall
// every write of the batch, and every write queued behind it, for as long as
// that domain transaction stays open. So a write's shared form has one more
// condition, on its parameters only: its row is among those lockRows
// locked (settleMany drops the settlements of other rows from its arrays
// before it joins them with the table). For a row lockRows skipped, the
// condition is false before the row is looked at, so the write neither
// waits for the row nor changes it; it leaves the batch, and its caller
// runs it alone, on the pool and outside the group, exactly as before group
// commit: it waits for the lock (a reclaim still waits for the fenced
// transaction's commit and then gets the next attempt) while the group
// goes on. A shared transaction thus only
// writes rows it already holds and never waits, so two processes' shared
// transactions cannot deadlock; taking the locks in update id order (and
// running the unmerged writes in it) keeps that true even if a lock were
// ever waited for.
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
	// settle, for a settlement (sql is settle or settleRecorded), holds its
	// values once more, for a shared transaction to run it in settleMany
	// with the batch's other settlements; nil for any other write.
	settle *settleVals
}

// settleVals are one settlement's parameters of settleManySQL.
type settleVals struct {
	attempt          int
	state            string
	at, retryAt      int64
	errText, claimID string
	// rec reports that the settlement carries an attempt record, the
	// fields below; without one they are zero and unused.
	rec                     bool
	process                 string
	started, ended          int64
	outcome, recErr, header string
	status                  int
	body                    []byte
}

// settleArgs collects the settlements reqs[i], i in idx, as settleManySQL's
// parameters, one array element per settlement.
func settleArgs(reqs []writeReq, idx []int) []any {
	var (
		ids, ats, retries, starts, ends              []int64
		attempts, statuses                           []int
		states, errs, claims, procs, outcomes, rerrs []string
		headers                                      []string
		recs                                         []bool
		bodies                                       [][]byte
	)
	for _, i := range idx {
		v := reqs[i].settle
		ids, attempts, states = append(ids, reqs[i].updateID), append(attempts, v.attempt), append(states, v.state)
		ats, retries, errs, claims = append(ats, v.at), append(retries, v.retryAt), append(errs, v.errText), append(claims, v.claimID)
		recs, procs, starts, ends = append(recs, v.rec), append(procs, v.process), append(starts, v.started), append(ends, v.ended)
		outcomes, rerrs, statuses = append(outcomes, v.outcome), append(rerrs, v.recErr), append(statuses, v.status)
		headers, bodies = append(headers, v.header), append(bodies, v.body)
	}
	return []any{ids, attempts, states, ats, retries, errs, claims,
		recs, procs, starts, ends, outcomes, rerrs, statuses, headers, bodies}
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
	// merged is called after batch, when the transaction runs settlements
	// as one statement (settleMany), with their update ids; they are the
	// first len(ids) of batch's.
	merged func(ids []int64)
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

// writeAlone runs r as one autocommit statement on the pool. The end of
// ctx cancels it at the server (see cancelAtServer): it may wait for a row
// lock (a domain transaction's, see "Row locks"), and its answer must say
// whether it applied.
func (s *Store) writeAlone(ctx context.Context, r writeReq) (int64, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var n int64
	err = cancelAtServer(ctx, conn, func(ctx context.Context) error {
		var err error
		n, err = s.runAlone(ctx, conn, r)
		return err
	})
	return n, err
}

// cancelAtServer runs op, a statement on conn that commits (an autocommit
// write, a COMMIT), in a context of its own, bounded by writeBound, so
// that its answer says whether it applied. When ctx ends first, pgx would
// close the connection and return at once, its cancel request following
// on its own: the statement could still commit (a lock it waited for
// freed meanwhile) after its caller was told it failed. Here the end of
// ctx sends the cancel request and op waits for the statement's own
// answer: an error, wrapping ctx's cause, when the server cancelled it;
// its result when it had run. A connection a cancel request went to is
// closed, so the pool drops it and the request cannot reach a later
// statement.
func cancelAtServer(ctx context.Context, conn *pgxpool.Conn, op func(ctx context.Context) error) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeBound)
	defer cancel()
	sent := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(sent)
		_ = conn.Conn().PgConn().CancelRequest(wctx)
	})
	err := op(wctx)
	if !stop() {
		<-sent
		_ = conn.Conn().Close(wctx)
		if err != nil {
			err = fmt.Errorf("%w: %w", context.Cause(ctx), err)
		}
	}
	return err
}

// runAlone runs r's statement alone on conn and returns the rows it
// changed.
func (s *Store) runAlone(ctx context.Context, conn *pgxpool.Conn, r writeReq) (int64, error) {
	s.stampClock(r)
	if r.dest == nil {
		tag, err := conn.Exec(ctx, r.sql.alone, r.args...)
		if err != nil {
			return 0, err
		}
		return tag.RowsAffected(), nil
	}
	err := conn.QueryRow(ctx, r.sql.alone, r.args...).Scan(r.dest...)
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

// minMerged is the fewest settlements a shared transaction runs as one
// statement (settleMany); a lone one runs in its own form.
const minMerged = 2

// mergeSettles splits order, the indexes of a batch's writes in update id
// order, into the settlements the shared transaction runs as one statement
// (settleMany) and the writes it runs each as its own statement, still in
// update id order. A settlement is merged only when no other write of the
// batch is of its row, so the writes of one row keep their order, and
// settleMany never sees an update id twice. With fewer than minMerged such
// settlements, none is merged.
func mergeSettles(reqs []writeReq, order []int) (merged, rest []int) {
	rest = make([]int, 0, len(order))
	for k, i := range order {
		id := reqs[i].updateID
		only := (k == 0 || reqs[order[k-1]].updateID != id) &&
			(k == len(order)-1 || reqs[order[k+1]].updateID != id)
		if only && reqs[i].settle != nil {
			merged = append(merged, i)
		} else {
			rest = append(rest, i)
		}
	}
	if len(merged) < minMerged {
		return nil, order
	}
	return merged, rest
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
	merged, rest := mergeSettles(reqs, order)

	// The merged settlements run first, in one statement; then the other
	// writes, each in its own, in update id order.
	runIDs := make([]int64, 0, len(reqs))
	for _, i := range slices.Concat(merged, rest) {
		runIDs = append(runIDs, ids[i])
	}
	if s.hooks != nil && s.hooks.batch != nil {
		s.hooks.batch(runIDs)
	}
	if s.hooks != nil && s.hooks.merged != nil && merged != nil {
		s.hooks.merged(runIDs[:len(merged)])
	}
	committed := false
	if s.hooks != nil && s.hooks.end != nil {
		defer func() { s.hooks.end(runIDs, committed) }()
	}

	// Round trip 1: begin, lock the batch's rows that nobody else holds, and
	// run the writes.
	rows := make([]int64, 0, len(order)) // distinct ids, ascending
	for _, i := range order {
		if n := len(rows); n == 0 || rows[n-1] != ids[i] {
			rows = append(rows, ids[i])
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
	if merged != nil {
		b.Queue(s.q.settleMany, settleArgs(reqs, merged)...)
	}
	for _, i := range rest {
		s.stampClock(reqs[i])
		b.Queue(reqs[i].sql.shared, reqs[i].args...)
	}
	br := conn.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(ctx) }() // no-op once committed; closes the connection if ctx ended
	err = readShared(br, reqs, merged, rest, res)
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

// readShared reads a shared transaction's first round trip into res,
// stopping at the first error: the begin, the rows locked, settleMany's
// answer for the merged settlements if any, then the answers of
// reqs[rest[0]], reqs[rest[1]], … A write of a row that was not locked
// changed nothing and is marked alone.
func readShared(br pgx.BatchResults, reqs []writeReq, merged, rest []int, res []writeRes) error {
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
	answer := func(i int, n int64) error {
		_, locked := slices.BinarySearch(ids, reqs[i].updateID)
		switch {
		case locked:
			res[i].n = n
		case n != 0: // cannot happen: the shared forms change only locked rows
			return fmt.Errorf("a shared write changed update %d, which it had not locked", reqs[i].updateID)
		default:
			res[i].alone = true
		}
		return nil
	}
	if merged != nil {
		rows, err := br.Query()
		if err != nil {
			return fmt.Errorf("%d settlements in one statement: %w", len(merged), err)
		}
		settled, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return fmt.Errorf("%d settlements in one statement: %w", len(merged), err)
		}
		slices.Sort(settled)
		applied := 0
		for _, i := range merged {
			var n int64
			if _, ok := slices.BinarySearch(settled, reqs[i].updateID); ok {
				n, applied = 1, applied+1
			}
			if err := answer(i, n); err != nil {
				return err
			}
		}
		if applied != len(settled) { // cannot happen: settleMany is given each update id once
			return fmt.Errorf("%d settlements in one statement settled %d rows, %d of them theirs",
				len(merged), len(settled), applied)
		}
	}
	for _, i := range rest {
		r := reqs[i]
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
		if err := answer(i, n); err != nil {
			return err
		}
	}
	return nil
}
