package sqlitestore

import (
	"context"
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

// The attempt history (migration 006): the table <table>_att, pruned with
// its update and marked by a requeue through triggers, so Prune and
// Requeue need no statement of their own for it.

const (
	// ?1 update id, ?2 attempt, ?3 claim id, ?4 process, ?5 started,
	// ?6 ended, ?7 outcome, ?8 error, ?9 status, ?10 header, ?11 body.
	// Recorded only while the update has a row.
	recordAttemptSQL = `INSERT INTO "{{table}}_att"
    (update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11
WHERE EXISTS (SELECT 1 FROM "{{table}}" WHERE update_id = ?1)`
	// recordAttemptSQL's arguments, in a settlement's transaction
	// (intake.Settlement.Attempt) right after the settlement applied, so
	// the row exists. Anonymous parameters, bound in order, spare the
	// driver a lookup of each one's name.
	recordSettledSQL = `INSERT INTO "{{table}}_att"
    (update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// settleDoneSQL is settleSQL for a settlement to completed that
	// carries its attempt's record, which it keeps in the row itself
	// (migration 007): ?1 update id, ?2 attempt, ?3 at, ?4 claim id, then
	// the record's ?5 process, ?6 started, ?7 ended, ?8 outcome, ?9 error,
	// ?10 status, ?11 header, ?12 body. settleDoneManySQL is its form for
	// many settlements at once: keep the two equivalent.
	settleDoneSQL = `UPDATE "{{table}}" SET
    state          = 'completed',
    settled_at     = ?3,
    error          = NULL,
    rec_after      = (SELECT coalesce(max(seq), 0) FROM "{{table}}_att"),
    rec_process    = ?5,
    rec_started_at = ?6,
    rec_ended_at   = ?7,
    rec_outcome    = ?8,
    rec_error      = ?9,
    rec_status     = ?10,
    rec_header     = ?11,
    rec_body       = ?12
WHERE update_id = ?1 AND state = 'processing' AND attempts = ?2 AND due_at >= ?3 AND claim_id = ?4`
	// ?1 update id. The history rows in the order recorded (seq), with
	// the record a completed row holds (migration 007) right after the
	// rows up to its rec_after: k orders the two kinds.
	attemptsSQL = `SELECT update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body,
    2 * seq AS k
FROM "{{table}}_att" WHERE update_id = ?1
UNION ALL
SELECT update_id, attempts, coalesce(claim_id, ''), coalesce(rec_process, ''), rec_started_at, rec_ended_at,
    rec_outcome, coalesce(rec_error, ''), coalesce(rec_status, 0), coalesce(rec_header, ''), coalesce(rec_body, x''),
    2 * rec_after + 1
FROM "{{table}}" WHERE update_id = ?1 AND rec_outcome IS NOT NULL
ORDER BY k`
)

// RecordAttempt implements [intake.AdminStore.RecordAttempt]. It is one
// statement of a group-committed write transaction.
func (s *Store) RecordAttempt(ctx context.Context, rec intake.AttemptRecord) (bool, error) {
	if err := rec.Validate(); err != nil {
		return false, fmt.Errorf("sqlitestore: record attempt: %w", err)
	}
	var n int64
	err := s.write(ctx, execOp(s.q.recordAttempt, &n, attemptArgs(rec)...))
	if err != nil {
		return false, fmt.Errorf("sqlitestore: record attempt of %d: %w", rec.UpdateID, err)
	}
	return n > 0, nil
}

// attemptArgs are the arguments of recordAttemptSQL and recordSettledSQL.
func attemptArgs(rec intake.AttemptRecord) []any {
	return []any{rec.UpdateID, rec.Attempt, rec.ClaimID, rec.Process,
		ms(rec.StartedAt), ms(rec.EndedAt), string(rec.Outcome), rec.Error, rec.Status,
		sqlschema.EncodeHeader(rec.Header), nonNil(rec.Body)}
}

// doneArgs are the arguments of settleDoneSQL, and a row of
// settleDoneManySQL, for the settlement st of id.
func doneArgs(id intake.Identity, st intake.Settlement) []any {
	rec := st.Attempt
	return []any{id.UpdateID, id.Attempt, ms(st.At), id.ClaimID,
		rec.Process, ms(rec.StartedAt), ms(rec.EndedAt), string(rec.Outcome), rec.Error, rec.Status,
		sqlschema.EncodeHeader(rec.Header), nonNil(rec.Body)}
}

// Attempts implements [intake.AdminStore.Attempts].
func (s *Store) Attempts(ctx context.Context, updateID int64) ([]intake.AttemptRecord, error) {
	rows, err := s.r.QueryContext(ctx, fillSQL(attemptsSQL, s.table), updateID)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: attempts of %d: %w", updateID, err)
	}
	defer rows.Close()
	var out []intake.AttemptRecord
	for rows.Next() {
		var (
			rec             intake.AttemptRecord
			started, ended  int64
			outcome, header string
		)
		if err := rows.Scan(&rec.UpdateID, &rec.Attempt, &rec.ClaimID, &rec.Process, &started, &ended,
			&outcome, &rec.Error, &rec.Status, &header, &rec.Body, new(int64)); err != nil {
			return nil, fmt.Errorf("sqlitestore: attempts of %d: %w", updateID, err)
		}
		rec.StartedAt, rec.EndedAt, rec.Outcome = fromMS(started), fromMS(ended), intake.AttemptOutcome(outcome)
		if rec.Header, err = sqlschema.DecodeHeader(header); err != nil {
			return nil, fmt.Errorf("sqlitestore: attempts of %d: %w", updateID, err)
		}
		if len(rec.Body) == 0 {
			rec.Body = nil
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: attempts of %d: %w", updateID, err)
	}
	return out, nil
}
