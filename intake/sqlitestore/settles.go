package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Batched settlements.
//
// Under load most writes of a shared transaction are settlements, and each
// one alone is two statements (the settlement and its attempt record), whose
// fixed cost in SQLite (binding, stepping, resetting) outweighs the rows they
// change. So runTx runs a batch's settlements together: one UPDATE … FROM
// (VALUES …) RETURNING for up to settleChunk settlements at once, then one
// multi-row INSERT of the records of those that applied. Each settlement's
// conditions are its own row of VALUES, so each one still applies exactly
// when it would alone.
//
// Under load a settlement does not start a transaction of its own: it is
// deferred ([groupcommit.Group.Defer]), and the next transaction, whatever
// starts it, takes it along. That is the next batch of adds, a moment
// away, so settlements stop costing commits of their own: each commit is
// an fsync and a rewrite of the pages it touched, and a settlement-only
// transaction delays the adds (the webhook's answers) queued behind it.
// "Under load" is: a transaction is in progress, or one ended less than
// defaultParkFor ago; when no other write comes within that, the
// settlement starts the transaction itself. On an idle writer a settlement
// commits at once. Measured in bench relay (BENCHMARKS.md): deferring only
// while a transaction is in progress gained 4%, deferring under load as
// above 12% more; a longer bound than 5 ms gained nothing.
//
// Two settlements of one update never share a statement: an UPDATE … FROM
// whose join meets a row twice applies one of the two arbitrarily. The
// second runs alone, after the batched ones (every write of a batch is
// concurrent with the others, so any order is one they could have had).

// settleChunk is the most settlements (or records) one batched statement
// carries: 7 parameters each for settlements, 11 for records, far below
// SQLite's limit of 32766. A batch is cut into chunks of powers of two
// (37 = 32 + 4 + 1), so a store prepares few statements
// (settleChunkSizes) and a batch runs few.
const settleChunk = 64

// settleChunkSizes is how many sizes of batched statements there are: 2,
// 4, …, settleChunk. A chunk of one runs the single-row statements.
const settleChunkSizes = 6

// defaultParkFor bounds how long a settlement under load waits for another
// write's transaction before starting one itself.
const defaultParkFor = 5 * time.Millisecond

// settleWrite is one settlement waiting in the write group. n is set to 1
// when it applied, to 0 when it did not.
type settleWrite struct {
	id intake.Identity
	st intake.Settlement
	n  *int64
}

// done reports whether w completes its update with the attempt's record,
// which the row then keeps itself (settleDoneSQL).
func (w *settleWrite) done() bool {
	return w.st.State == intake.StateCompleted && w.st.Attempt != nil
}

// settleManySQL is settleSQL for rows settlements, each a row of VALUES:
// update id, attempt, state, at, retry at, error, claim id. It returns the
// ids it settled.
func settleManySQL(table string, rows int) string {
	q := `"` + table + `"`
	return settleFromValues(table, rows, 7, "column4", "column7", `
    state      = v.column3,
    settled_at = CASE WHEN v.column3 = 'failed' THEN NULL ELSE v.column4 END,
    due_at     = CASE WHEN v.column3 = 'failed' THEN v.column5 ELSE `+q+`.due_at END,
    error      = CASE WHEN v.column3 = 'completed' THEN NULL ELSE v.column6 END`)
}

// settleDoneManySQL is settleDoneSQL for rows settlements to completed
// that carry their records, each a row of VALUES: update id, attempt, at,
// claim id, then the record's process, started, ended, outcome, error,
// status, header and body. It returns the ids it settled.
func settleDoneManySQL(table string, rows int) string {
	return settleFromValues(table, rows, 12, "column3", "column4", `
    state          = 'completed',
    settled_at     = v.column3,
    error          = NULL,
    rec_after      = (SELECT coalesce(max(seq), 0) FROM "`+table+`_att"),
    rec_process    = v.column5,
    rec_started_at = v.column6,
    rec_ended_at   = v.column7,
    rec_outcome    = v.column8,
    rec_error      = v.column9,
    rec_status     = v.column10,
    rec_header     = v.column11,
    rec_body       = v.column12`)
}

// settleFromValues is an UPDATE … SET set FROM (VALUES …) of rows
// settlements of cols values each, whose first two are the update id and
// the attempt, and the columns named at and claim their time and claim
// id: each applies only to its row while that attempt holds a lease live
// at its time. It returns the ids it settled.
func settleFromValues(table string, rows, cols int, at, claim, set string) string {
	var b strings.Builder
	q := `"` + table + `"`
	b.WriteString(`UPDATE ` + q + ` SET` + set + `
FROM (VALUES `)
	writeParamRows(&b, rows, cols)
	b.WriteString(`) AS v
WHERE ` + q + `.update_id = v.column1 AND ` + q + `.state = 'processing' AND ` + q + `.attempts = v.column2
  AND ` + q + `.due_at >= v.` + at + ` AND ` + q + `.claim_id = v.` + claim + `
RETURNING update_id`)
	return b.String()
}

// recordManySQL is recordSettledSQL for rows records.
func recordManySQL(table string, rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO "` + table + `_att"
    (update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body)
VALUES `)
	writeParamRows(&b, rows, 11)
	return b.String()
}

// writeParamRows writes rows rows of cols anonymous parameters each: (?, ?),
// (?, ?). Anonymous parameters are bound in order, sparing the driver a
// lookup of each one's name.
func writeParamRows(b *strings.Builder, rows, cols int) {
	row := "(" + strings.Repeat("?, ", cols-1) + "?)"
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
}

// settleStmts holds the batched statements, by size: [k] carries 2<<k
// settlements (or records).
type settleStmts struct {
	settle, done, record [settleChunkSizes]*sql.Stmt
}

func (p *settleStmts) prepare(ctx context.Context, w *sql.DB, table string) error {
	for k := range settleChunkSizes {
		rows := 2 << k
		var err error
		if p.settle[k], err = w.PrepareContext(ctx, settleManySQL(table, rows)); err != nil {
			return fmt.Errorf("sqlitestore: prepare: %w", err)
		}
		if p.record[k], err = w.PrepareContext(ctx, recordManySQL(table, rows)); err != nil {
			return fmt.Errorf("sqlitestore: prepare: %w", err)
		}
		if p.done[k], err = w.PrepareContext(ctx, settleDoneManySQL(table, rows)); err != nil {
			return fmt.Errorf("sqlitestore: prepare: %w", err)
		}
	}
	return nil
}

func (p *settleStmts) close() error {
	var errs []error
	for k := range settleChunkSizes {
		for _, st := range []*sql.Stmt{p.settle[k], p.done[k], p.record[k]} {
			if st != nil {
				errs = append(errs, st.Close())
			}
		}
	}
	return errors.Join(errs...)
}

// chunks cuts n into sizes of powers of two, largest first, none above
// settleChunk: 37 is 32, 4, 1.
func chunks(n int) []int {
	var out []int
	for size := settleChunk; size >= 1; size /= 2 {
		for ; n >= size; n -= size {
			out = append(out, size)
		}
	}
	return out
}

// sizeIndex is the index in settleStmts of a chunk of size rows (a power
// of two from 2 to settleChunk).
func sizeIndex(rows int) int { return bits.Len(uint(rows)) - 2 }

// runSettles runs settlements of distinct updates in tx: batched by chunk,
// or, for a chunk of one, through the single-row statements. Settlements
// to completed that carry their records (done) keep them in the row, and
// run as statements of their own kind; the records of the others that
// applied are inserted after them.
func (s *Store) runSettles(ctx context.Context, tx *sql.Tx, ws []*settleWrite) error {
	var done, other []*settleWrite
	for _, w := range ws {
		if w.done() {
			done = append(done, w)
		} else {
			other = append(other, w)
		}
	}
	if err := s.settleChunks(ctx, tx, done, &s.settles.done, 12, func(w *settleWrite) []any {
		return doneArgs(w.id, w.st)
	}); err != nil {
		return err
	}
	if err := s.settleChunks(ctx, tx, other, &s.settles.settle, 7, func(w *settleWrite) []any {
		return []any{w.id.UpdateID, w.id.Attempt, string(w.st.State), ms(w.st.At), ms(w.st.RetryAt), w.st.Error, w.id.ClaimID}
	}); err != nil {
		return err
	}
	var recorded []*settleWrite // applied, with a record to write
	for _, w := range other {
		if *w.n == 1 && w.st.Attempt != nil {
			recorded = append(recorded, w)
		}
	}
	return s.recordSettles(ctx, tx, recorded)
}

// settleChunks runs the settlements ws of one kind in chunks: a chunk of
// one through settleOp, a larger one through stmts, with cols arguments
// of each settlement from args. Each settlement's n tells whether it
// applied.
func (s *Store) settleChunks(ctx context.Context, tx *sql.Tx, ws []*settleWrite, stmts *[settleChunkSizes]*sql.Stmt, cols int, args func(*settleWrite) []any) error {
	for _, size := range chunks(len(ws)) {
		chunk := ws[:size]
		ws = ws[size:]
		if size == 1 {
			if err := s.settle(ctx, tx, chunk[0]); err != nil {
				return err
			}
			continue
		}
		vals := make([]any, 0, cols*size)
		byID := make(map[int64]*settleWrite, size)
		for _, w := range chunk {
			*w.n = 0
			byID[w.id.UpdateID] = w
			vals = append(vals, args(w)...)
		}
		rows, err := tx.StmtContext(ctx, stmts[sizeIndex(size)]).QueryContext(ctx, vals...)
		if err != nil {
			return err
		}
		err = eachID(rows, func(id int64) error {
			w := byID[id]
			if w == nil {
				return fmt.Errorf("settled update %d, which the batch did not hold", id)
			}
			*w.n = 1
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// recordSettles writes the attempt records of applied settlements ws.
func (s *Store) recordSettles(ctx context.Context, tx *sql.Tx, ws []*settleWrite) error {
	for _, size := range chunks(len(ws)) {
		chunk := ws[:size]
		ws = ws[size:]
		st := s.q.recordSettled
		if size > 1 {
			st = s.settles.record[sizeIndex(size)]
		}
		args := make([]any, 0, 11*size)
		for _, w := range chunk {
			rec := *w.st.Attempt
			rec.UpdateID, rec.Attempt, rec.ClaimID = w.id.UpdateID, w.id.Attempt, w.id.ClaimID
			args = append(args, attemptArgs(rec)...)
		}
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// settleOp is w as a write of its own: the single-row settlement followed,
// in its transaction and only when it applied, by the attempt's record
// ([intake.Settlement.Attempt]), unless the row keeps that record itself.
func (s *Store) settleOp(w *settleWrite) writeOp {
	return func(ctx context.Context, tx *sql.Tx) error {
		if err := s.settle(ctx, tx, w); err != nil {
			return err
		}
		if *w.n == 0 || w.st.Attempt == nil || w.done() {
			return nil
		}
		return s.recordSettles(ctx, tx, []*settleWrite{w})
	}
}

// settle runs w's single-row settlement in tx, without the record a
// settlement that is not done inserts apart.
func (s *Store) settle(ctx context.Context, tx *sql.Tx, w *settleWrite) error {
	id, st := w.id, w.st
	if w.done() {
		return execOp(s.q.settleDone, w.n, doneArgs(id, st)...)(ctx, tx)
	}
	return execOp(s.q.settle, w.n, id.UpdateID, id.Attempt, string(st.State), ms(st.At), ms(st.RetryAt), st.Error, id.ClaimID)(ctx, tx)
}
