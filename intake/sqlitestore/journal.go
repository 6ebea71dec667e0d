package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// The outgoing-call journal ([intake.JournalStore]) lives in the table
// "<table>_journal" (migration 002). Its writes join the shared write
// transactions of writes.go, so an intent costs no fsync of its own under
// load, and a deferred outcome ([Store.RecordOutcomeDeferred]) rides in
// the transaction of the next intent; a trigger deletes an update's entries
// with its row.

// DeferredOutcomeWait bounds how long [Store.RecordOutcomeDeferred] holds an
// outcome back for the next intent to carry it into its commit.
const DeferredOutcomeWait = 5 * time.Millisecond

// journalSQL is the journal's statements for one table.
type journalSQL struct {
	owns, find, upsert, outcome, list string
}

var journalSQLCache sync.Map // table name → *journalSQL

const journalColumns = `update_id, method, params_hash, occurrence, attempt, claim_id, outcome, status, body, intended_at, decided_at`

func (s *Store) journalSQL() *journalSQL {
	if q, ok := journalSQLCache.Load(s.table); ok {
		return q.(*journalSQL)
	}
	r := strings.NewReplacer("{{table}}", s.table, "{{columns}}", journalColumns)
	q := &journalSQL{
		// An identity is admitted under its live lease or as the tail of
		// the row it completed (see intake.JournalStore).
		owns: r.Replace(`SELECT count(*) FROM "{{table}}"
			WHERE update_id = ?1 AND attempts = ?2 AND claim_id = ?3
			  AND (state = 'processing' AND due_at >= ?4 OR state = 'completed')`),
		find: r.Replace(`SELECT {{columns}} FROM "{{table}}_journal"
			WHERE update_id = ?1 AND method = ?2 AND params_hash = ?3 AND occurrence = ?4`),
		// The common case in one statement: the admission check (the
		// lease, or the tail) and the new entry (or the replacement of a
		// not-dispatched one). It changes no row when the identity is not
		// admitted or the call is journaled; owns and find then tell which.
		upsert: r.Replace(`INSERT INTO "{{table}}_journal" ({{columns}})
			SELECT ?1, ?5, ?6, ?7, ?2, ?3, 'pending', 0, x'', ?4, NULL FROM "{{table}}"
			WHERE update_id = ?1 AND attempts = ?2 AND claim_id = ?3
			  AND (state = 'processing' AND due_at >= ?4 OR state = 'completed')
			ON CONFLICT (update_id, method, params_hash, occurrence) DO UPDATE SET
			    attempt = excluded.attempt, claim_id = excluded.claim_id, outcome = 'pending', status = 0,
			    body = x'', intended_at = excluded.intended_at, decided_at = NULL
			WHERE outcome = 'not_dispatched'`),
		outcome: r.Replace(`UPDATE "{{table}}_journal" SET outcome = ?7, status = ?8, body = ?9, decided_at = ?10
			WHERE update_id = ?1 AND method = ?2 AND params_hash = ?3 AND occurrence = ?4
			  AND attempt = ?5 AND claim_id = ?6 AND outcome = 'pending'`),
		list: r.Replace(`SELECT {{columns}} FROM "{{table}}_journal" WHERE update_id = ?1
			ORDER BY intended_at, method, params_hash, occurrence`),
	}
	actual, _ := journalSQLCache.LoadOrStore(s.table, q)
	return actual.(*journalSQL)
}

// journalState holds the journal's write statements, prepared on the
// writer on first use (parsing them again for every call cost more than
// running them) and closed with the store, and the deferred outcomes
// waiting for a commit to share.
type journalState struct {
	mu       sync.Mutex
	stmts    *journalStmts // nil until prepared, and after close
	closed   bool
	deferred []*deferredOutcome
	flush    *time.Timer // writes the deferred outcomes alone when no intent came
}

// journalStmts is one set of prepared statements; never changed once made,
// so a write holding it after Close gets "statement is closed" errors.
type journalStmts struct {
	owns, find, upsert, outcome *sql.Stmt
}

// deferredOutcome is one outcome of [Store.RecordOutcomeDeferred] on its
// way to a commit.
type deferredOutcome struct {
	id   intake.Identity
	call intake.Call
	res  intake.CallResult
	at   int64
	// n and err are the write's result, valid once done is closed.
	n    int64
	err  error
	done chan struct{}
}

// journalStmts returns the prepared write statements, preparing them if
// needed.
func (s *Store) journalStmts(ctx context.Context) (*journalStmts, error) {
	j := &s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	switch {
	case j.closed:
		return nil, errClosed
	case j.stmts != nil:
		return j.stmts, nil
	}
	q := s.journalSQL()
	var sts [4]*sql.Stmt
	for i, text := range []string{q.owns, q.find, q.upsert, q.outcome} {
		st, err := s.w.PrepareContext(ctx, text)
		if err != nil {
			for _, p := range sts[:i] {
				p.Close()
			}
			return nil, err
		}
		sts[i] = st
	}
	j.stmts = &journalStmts{owns: sts[0], find: sts[1], upsert: sts[2], outcome: sts[3]}
	return j.stmts, nil
}

// close refuses further journal writes, fails the deferred outcomes still
// waiting (Close wrote those that were waiting when it began) and closes
// the prepared statements.
func (j *journalState) close() error {
	j.mu.Lock()
	j.closed = true
	ds := j.deferred
	j.deferred = nil
	if j.flush != nil {
		j.flush.Stop()
		j.flush = nil
	}
	st := j.stmts
	j.stmts = nil
	j.mu.Unlock()
	finishDeferred(ds, errClosed)
	if st == nil {
		return nil
	}
	return errors.Join(st.owns.Close(), st.find.Close(), st.upsert.Close(), st.outcome.Close())
}

// takeDeferred removes and returns the outcomes waiting for a commit.
func (j *journalState) takeDeferred() []*deferredOutcome {
	j.mu.Lock()
	defer j.mu.Unlock()
	ds := j.deferred
	j.deferred = nil
	if j.flush != nil {
		j.flush.Stop()
		j.flush = nil
	}
	return ds
}

// writeDeferred runs the outcome updates of ds in tx. An error fails the
// whole write (the outcomes are then written on their own).
func (q *journalStmts) writeDeferred(ctx context.Context, tx *sql.Tx, ds []*deferredOutcome) error {
	if len(ds) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, q.outcome) // one transaction-bound statement for all of them
	for _, d := range ds {
		r, err := st.ExecContext(ctx, d.id.UpdateID, d.call.Method, d.call.ParamsHash, d.call.Occurrence,
			d.id.Attempt, d.id.ClaimID, string(d.res.Outcome), d.res.Status, d.res.Body, d.at)
		if err != nil {
			return err
		}
		if d.n, err = r.RowsAffected(); err != nil {
			return err
		}
	}
	return nil
}

// finishDeferred tells the callers of ds the result of the write that
// committed them, err.
func finishDeferred(ds []*deferredOutcome, err error) {
	for _, d := range ds {
		if err != nil {
			d.n, d.err = 0, err
		}
		close(d.done)
	}
}

// writeDeferredAlone commits ds in a write of their own.
func (s *Store) writeDeferredAlone(ds []*deferredOutcome) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeBound)
	defer cancel()
	q, err := s.journalStmts(ctx)
	if err != nil {
		return err
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error { return q.writeDeferred(ctx, tx, ds) })
}

// flushDeferred writes the deferred outcomes that no intent carried within
// DeferredOutcomeWait (or at Close).
func (s *Store) flushDeferred() {
	if ds := s.journal.takeDeferred(); len(ds) > 0 {
		finishDeferred(ds, s.writeDeferredAlone(ds))
	}
}

type rowScanner interface{ Scan(dest ...any) error }

func scanEntry(r rowScanner) (intake.JournalEntry, error) {
	var (
		e        intake.JournalEntry
		outcome  string
		intended int64
		decided  sql.NullInt64
	)
	if err := r.Scan(&e.UpdateID, &e.Method, &e.ParamsHash, &e.Occurrence, &e.Attempt, &e.ClaimID,
		&outcome, &e.Status, &e.Body, &intended, &decided); err != nil {
		return intake.JournalEntry{}, err
	}
	e.Body = nonNil(e.Body)
	e.Outcome = intake.CallOutcome(outcome)
	e.IntendedAt = fromMS(intended)
	if decided.Valid {
		e.DecidedAt = fromMS(decided.Int64)
	}
	return e, nil
}

// Admits implements [intake.JournalStore.Admits] as a plain read: id holds
// a live lease at at, or it is the tail of the row it completed.
func (s *Store) Admits(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	var n int
	if err := s.r.QueryRowContext(ctx, s.journalSQL().owns, id.UpdateID, id.Attempt, id.ClaimID, ms(at)).Scan(&n); err != nil {
		return false, fmt.Errorf("sqlitestore: admits %d: %w", id.UpdateID, err)
	}
	return n > 0, nil
}

// RecordIntent implements [intake.JournalStore.RecordIntent]: the
// admission check (lease or tail) and the insert are one statement,
// followed, when it wrote nothing, by the lookups that tell a stale
// identity from a journaled call, in the same write transaction.
func (s *Store) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	if err := intake.CheckCall(call); err != nil {
		return intake.JournalEntry{}, intake.IntentStale, fmt.Errorf("sqlitestore: record intent %d: %w", id.UpdateID, err)
	}
	q, err := s.journalStmts(ctx)
	if err != nil {
		return intake.JournalEntry{}, intake.IntentStale, fmt.Errorf("sqlitestore: record intent %d: %w", id.UpdateID, err)
	}
	var (
		entry  intake.JournalEntry
		intent intake.Intent
	)
	// The outcomes waiting for a commit go first, in the same write: a
	// lookup below then sees them, and they cost no commit of their own.
	carried := s.journal.takeDeferred()
	op := func(ctx context.Context, tx *sql.Tx) error {
		entry, intent = intake.JournalEntry{}, intake.IntentStale
		if err := q.writeDeferred(ctx, tx, carried); err != nil {
			return err
		}
		res, err := tx.StmtContext(ctx, q.upsert).ExecContext(ctx, id.UpdateID, id.Attempt, id.ClaimID, ms(at),
			call.Method, call.ParamsHash, call.Occurrence)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n > 0 {
			entry = intake.JournalEntry{
				UpdateID: id.UpdateID, Call: call, Attempt: id.Attempt, ClaimID: id.ClaimID,
				Outcome: intake.CallPending, Body: []byte{}, IntendedAt: fromMS(ms(at)),
			}
			intent = intake.IntentRecorded
			return nil
		}
		// Nothing written: id is not admitted, or the call is journaled.
		var owned int
		if err := tx.StmtContext(ctx, q.owns).QueryRowContext(ctx, id.UpdateID, id.Attempt, id.ClaimID, ms(at)).Scan(&owned); err != nil {
			return err
		}
		if owned == 0 {
			return nil
		}
		e, err := scanEntry(tx.StmtContext(ctx, q.find).QueryRowContext(ctx, id.UpdateID, call.Method, call.ParamsHash, call.Occurrence))
		if err != nil {
			return fmt.Errorf("the journal entry that kept the intent from being written: %w", err)
		}
		entry, intent = e, intake.IntentJournaled
		return nil
	}
	err = s.write(ctx, op)
	if len(carried) > 0 {
		if err != nil {
			// The outcomes did not commit with the intent: they go alone.
			finishDeferred(carried, s.writeDeferredAlone(carried))
		} else {
			finishDeferred(carried, nil)
		}
	}
	if err != nil {
		return intake.JournalEntry{}, intake.IntentStale, fmt.Errorf("sqlitestore: record intent %d: %w", id.UpdateID, err)
	}
	return entry, intent, nil
}

// RecordOutcome implements [intake.JournalStore.RecordOutcome].
func (s *Store) RecordOutcome(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	if err := intake.CheckCallResult(call, res); err != nil {
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, err)
	}
	body := nonNil(res.Body)
	q, err := s.journalStmts(ctx)
	if err != nil {
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, err)
	}
	var n int64
	op := func(ctx context.Context, tx *sql.Tx) error {
		r, err := tx.StmtContext(ctx, q.outcome).ExecContext(ctx, id.UpdateID, call.Method, call.ParamsHash, call.Occurrence,
			id.Attempt, id.ClaimID, string(res.Outcome), res.Status, body, ms(at))
		if err != nil {
			return err
		}
		n, err = r.RowsAffected()
		return err
	}
	if err := s.write(ctx, op); err != nil {
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, err)
	}
	return n > 0, nil
}

// RecordOutcomeDeferred implements
// [intake.JournalStore.RecordOutcomeDeferred]: the outcome waits up
// to [DeferredOutcomeWait] for the next RecordIntent, which writes it in
// its own transaction before the intent; if none comes, or that write
// fails, it is written on its own. It returns once its write committed.
func (s *Store) RecordOutcomeDeferred(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	if err := intake.CheckCallResult(call, res); err != nil {
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, err)
	}
	if _, err := s.journalStmts(ctx); err != nil {
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, err)
	}
	res.Body = append([]byte{}, res.Body...) // the store copies it
	d := &deferredOutcome{id: id, call: call, res: res, at: ms(at), done: make(chan struct{})}
	j := &s.journal
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, errClosed)
	}
	j.deferred = append(j.deferred, d)
	if j.flush == nil {
		j.flush = time.AfterFunc(DeferredOutcomeWait, s.flushDeferred)
	}
	j.mu.Unlock()
	select {
	case <-d.done:
	case <-ctx.Done():
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, ctx.Err())
	}
	if d.err != nil {
		return false, fmt.Errorf("sqlitestore: record outcome %d: %w", id.UpdateID, d.err)
	}
	return d.n > 0, nil
}

// Journal implements [intake.JournalStore.Journal].
func (s *Store) Journal(ctx context.Context, updateID int64) ([]intake.JournalEntry, error) {
	rows, err := s.r.QueryContext(ctx, s.journalSQL().list, updateID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: journal %d: %w", updateID, err)
	}
	defer rows.Close()
	var out []intake.JournalEntry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: journal %d: %w", updateID, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: journal %d: %w", updateID, err)
	}
	return out, nil
}
