package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/intake"
)

// The outgoing-call journal ([intake.JournalStore]) lives in the table
// "<table>_journal" (migration 2). Intents and outcomes are single
// statements that join the shared write transactions of writes.go; a
// statement-level trigger deletes an update's entries with its row.

type journalSQL struct {
	intent, outcome writeSQL
	owns, find      string
	list            string
}

var journalSQLCache sync.Map // table name → *journalSQL

const journalColumns = `update_id, method, params_hash, occurrence, attempt, claim_id, outcome, status, body, intended_at, decided_at`

func (s *Store) journalSQL() *journalSQL {
	if q, ok := journalSQLCache.Load(s.table); ok {
		return q.(*journalSQL)
	}
	r := strings.NewReplacer("{{table}}", s.table, "{{columns}}", journalColumns)
	f := r.Replace
	q := &journalSQL{
		// $1 update id, $2 attempt, $3 claim id, $4 at, $5 method, $6 hash,
		// $7 occurrence. Inserts only for an admitted identity (a live
		// lease, or the tail of the row it completed; see
		// intake.JournalStore), and replaces only a not-dispatched entry.
		// FOR KEY SHARE makes the admission and the insert one step against
		// a Prune: alone on the pool (its row held elsewhere, so outside a
		// shared transaction) the statement waits for a DELETE of the row
		// and then finds it gone, instead of inserting an entry the DELETE's
		// trigger cannot see, which would outlive the row.
		intent: newWriteSQL(f(`INSERT INTO {{table}}_journal AS j ({{columns}})
			SELECT $1::bigint, $5::text, $6::text, $7::integer, $2::integer, $3::text, 'pending', 0, ''::bytea, $4::bigint, NULL
			FROM {{table}}
			WHERE update_id = $1::bigint AND attempts = $2::integer AND claim_id = $3::text
			  AND (state = 'processing' AND due_at >= $4::bigint OR state = 'completed')
			FOR KEY SHARE
			ON CONFLICT (update_id, method, params_hash, occurrence) DO UPDATE SET
				attempt = EXCLUDED.attempt, claim_id = EXCLUDED.claim_id, outcome = 'pending',
				status = 0, body = ''::bytea, intended_at = EXCLUDED.intended_at, decided_at = NULL
			WHERE j.outcome = 'not_dispatched'`)),
		// $1 update id, $2 method, $3 hash, $4 occurrence, $5 attempt,
		// $6 claim id, $7 outcome, $8 status, $9 body, $10 at.
		outcome: newWriteSQL(f(`UPDATE {{table}}_journal SET outcome = $7::text, status = $8::integer, body = $9::bytea, decided_at = $10::bigint
			WHERE update_id = $1::bigint AND method = $2::text AND params_hash = $3::text AND occurrence = $4::integer
			  AND attempt = $5::integer AND claim_id = $6::text AND outcome = 'pending'`)),
		owns: f(`SELECT EXISTS (SELECT 1 FROM {{table}}
			WHERE update_id = $1::bigint AND attempts = $2::integer AND claim_id = $3::text
			  AND (state = 'processing' AND due_at >= $4::bigint OR state = 'completed'))`),
		find: f(`SELECT {{columns}} FROM {{table}}_journal
			WHERE update_id = $1::bigint AND method = $2::text AND params_hash = $3::text AND occurrence = $4::integer`),
		list: f(`SELECT {{columns}} FROM {{table}}_journal WHERE update_id = $1::bigint
			ORDER BY intended_at, method, params_hash, occurrence`),
	}
	actual, _ := journalSQLCache.LoadOrStore(s.table, q)
	return actual.(*journalSQL)
}

func scanEntry(r pgx.Row) (intake.JournalEntry, error) {
	var (
		e        intake.JournalEntry
		outcome  string
		intended int64
		decided  *int64
	)
	if err := r.Scan(&e.UpdateID, &e.Method, &e.ParamsHash, &e.Occurrence, &e.Attempt, &e.ClaimID,
		&outcome, &e.Status, &e.Body, &intended, &decided); err != nil {
		return intake.JournalEntry{}, err
	}
	if e.Body == nil {
		e.Body = []byte{}
	}
	e.Outcome = intake.CallOutcome(outcome)
	e.IntendedAt = time.UnixMilli(intended).UTC()
	if decided != nil {
		e.DecidedAt = time.UnixMilli(*decided).UTC()
	}
	return e, nil
}

// Admits implements [intake.JournalStore.Admits] as a plain read: id holds
// a live lease at at, or it is the tail of the row it completed.
func (s *Store) Admits(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	var ok bool
	if err := s.pool.QueryRow(ctx, s.journalSQL().owns, id.UpdateID, id.Attempt, id.ClaimID, at.UnixMilli()).Scan(&ok); err != nil {
		return false, s.fail("admits", err)
	}
	return ok, nil
}

// intentTries bounds RecordIntent's rounds. A round repeats only when the
// entry it met turned not-dispatched between its insert and its read.
const intentTries = 4

// RecordIntent implements [intake.JournalStore.RecordIntent]: one fenced
// insert (lease or tail), joined to a shared write transaction; when it
// inserts nothing, a read tells a stale identity from a journaled call.
func (s *Store) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	const op = "record intent"
	if err := intake.CheckCall(call); err != nil {
		return intake.JournalEntry{}, intake.IntentStale, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	q := s.journalSQL()
	atMS := at.UnixMilli()
	for range intentTries {
		n, err := s.write(ctx, op, writeReq{updateID: id.UpdateID, sql: q.intent,
			args: []any{id.UpdateID, id.Attempt, id.ClaimID, atMS, call.Method, call.ParamsHash, call.Occurrence}})
		if err != nil {
			return intake.JournalEntry{}, intake.IntentStale, err
		}
		if n > 0 {
			return intake.JournalEntry{
				UpdateID: id.UpdateID, Call: call, Attempt: id.Attempt, ClaimID: id.ClaimID,
				Outcome: intake.CallPending, Body: []byte{}, IntendedAt: time.UnixMilli(atMS).UTC(),
			}, intake.IntentRecorded, nil
		}
		var live bool
		if err := s.pool.QueryRow(ctx, q.owns, id.UpdateID, id.Attempt, id.ClaimID, atMS).Scan(&live); err != nil {
			return intake.JournalEntry{}, intake.IntentStale, s.fail(op, err)
		}
		if !live {
			return intake.JournalEntry{}, intake.IntentStale, nil
		}
		e, err := scanEntry(s.pool.QueryRow(ctx, q.find, id.UpdateID, call.Method, call.ParamsHash, call.Occurrence))
		switch {
		case err == nil && e.Outcome != intake.CallNotDispatched:
			return e, intake.IntentJournaled, nil
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			return intake.JournalEntry{}, intake.IntentStale, s.fail(op, err)
		}
	}
	return intake.JournalEntry{}, intake.IntentStale, fmt.Errorf("pgstore: %s %d: the entry kept changing for %d rounds", op, id.UpdateID, intentTries)
}

// RecordOutcome implements [intake.JournalStore.RecordOutcome].
func (s *Store) RecordOutcome(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	const op = "record outcome"
	if err := intake.CheckCallResult(call, res); err != nil {
		return false, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	body := res.Body
	if body == nil {
		body = []byte{}
	}
	n, err := s.write(ctx, op, writeReq{updateID: id.UpdateID, sql: s.journalSQL().outcome,
		args: []any{id.UpdateID, call.Method, call.ParamsHash, call.Occurrence, id.Attempt, id.ClaimID,
			string(res.Outcome), res.Status, body, at.UnixMilli()}})
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// Journal implements [intake.JournalStore.Journal].
func (s *Store) Journal(ctx context.Context, updateID int64) ([]intake.JournalEntry, error) {
	rows, err := s.pool.Query(ctx, s.journalSQL().list, updateID)
	if err != nil {
		return nil, s.fail("journal", err)
	}
	defer rows.Close()
	var out []intake.JournalEntry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, s.fail("journal", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("journal", err)
	}
	return out, nil
}

// RecordOutcomeDeferred implements
// [intake.JournalStore.RecordOutcomeDeferred] by recording at once, as
// [Store.RecordOutcome]: PostgreSQL flushes concurrent commits together
// anyway, so holding the outcome back would save no commit.
func (s *Store) RecordOutcomeDeferred(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	return s.RecordOutcome(ctx, id, call, res, at)
}
