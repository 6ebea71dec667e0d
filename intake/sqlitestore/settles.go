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

// settleManySQL is settleSQL for rows settlements, each a row of VALUES:
// update id, attempt, state, at, retry at, error, claim id. It returns the
// ids it settled.
func settleManySQL(table string, rows int) string {
	var b strings.Builder
	q := `"` + table + `"`
	b.WriteString(`UPDATE ` + q + ` SET
    state      = v.column3,
    settled_at = CASE WHEN v.column3 = 'failed' THEN NULL ELSE v.column4 END,
    due_at     = CASE WHEN v.column3 = 'failed' THEN v.column5 ELSE ` + q + `.due_at END,
    error      = CASE WHEN v.column3 = 'completed' THEN NULL ELSE v.column6 END
FROM (VALUES `)
	writeParamRows(&b, rows, 7)
	b.WriteString(`) AS v
WHERE ` + q + `.update_id = v.column1 AND ` + q + `.state = 'processing' AND ` + q + `.attempts = v.column2
  AND ` + q + `.due_at >= v.column4 AND ` + q + `.claim_id = v.column7
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
	settle, record [settleChunkSizes]*sql.Stmt
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
	}
	return nil
}

func (p *settleStmts) close() error {
	var errs []error
	for k := range settleChunkSizes {
		for _, st := range []*sql.Stmt{p.settle[k], p.record[k]} {
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
// or, for a chunk of one, through the single-row statements.
func (s *Store) runSettles(ctx context.Context, tx *sql.Tx, ws []*settleWrite) error {
	var recorded []*settleWrite // applied, with a record to write
	for _, size := range chunks(len(ws)) {
		chunk := ws[:size]
		ws = ws[size:]
		if size == 1 {
			if err := s.settleOp(chunk[0])(ctx, tx); err != nil {
				return err
			}
			continue
		}
		args := make([]any, 0, 7*size)
		byID := make(map[int64]*settleWrite, size)
		for _, w := range chunk {
			*w.n = 0
			byID[w.id.UpdateID] = w
			args = append(args, w.id.UpdateID, w.id.Attempt, string(w.st.State), ms(w.st.At), ms(w.st.RetryAt), w.st.Error, w.id.ClaimID)
		}
		rows, err := tx.StmtContext(ctx, s.settles.settle[sizeIndex(size)]).QueryContext(ctx, args...)
		if err != nil {
			return err
		}
		err = eachID(rows, func(id int64) error {
			w := byID[id]
			if w == nil {
				return fmt.Errorf("settled update %d, which the batch did not hold", id)
			}
			*w.n = 1
			if w.st.Attempt != nil {
				recorded = append(recorded, w)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return s.recordSettles(ctx, tx, recorded)
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
// ([intake.Settlement.Attempt]).
func (s *Store) settleOp(w *settleWrite) writeOp {
	id, st := w.id, w.st
	return func(ctx context.Context, tx *sql.Tx) error {
		if err := execOp(s.q.settle, w.n, id.UpdateID, id.Attempt, string(st.State), ms(st.At), ms(st.RetryAt), st.Error, id.ClaimID)(ctx, tx); err != nil {
			return err
		}
		if *w.n == 0 || st.Attempt == nil {
			return nil
		}
		return s.recordSettles(ctx, tx, []*settleWrite{w})
	}
}
