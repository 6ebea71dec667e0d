package pgstore

import (
	"context"
	"strings"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

// The attempt history (migration 006): the table <table>_att, pruned with
// its update and marked by a requeue through triggers, so Prune and
// Requeue need no statement of their own for it.

// attemptSQL is the history's statements for one table.
type attemptSQL struct {
	record, settleRecorded, settleDone writeSQL
	list                               string
}

// attemptSQLCache maps a table name to its *attemptSQL.
var attemptSQLCache sync.Map

func (s *Store) attemptSQL() *attemptSQL {
	if q, ok := attemptSQLCache.Load(s.table); ok {
		return q.(*attemptSQL)
	}
	f := strings.NewReplacer("{{table}}", s.table).Replace
	q := &attemptSQL{
		// Recorded only while the update has a row.
		record: newWriteSQL(f(`INSERT INTO {{table}}_att
			(update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body)
			SELECT $1::bigint, $2::integer, $3::text, $4::text, $5::bigint, $6::bigint, $7::text, $8::text,
			       $9::integer, $10::text, $11::bytea
			WHERE EXISTS (SELECT 1 FROM {{table}} WHERE update_id = $1::bigint)`)),
		// settleSQL and, in the same statement, only when it applied, the
		// attempt's record: $8 process, $9 started, $10 ended, $11
		// outcome, $12 error, $13 status, $14 header, $15 body. It changes
		// as many history rows as it settles rows: 1 or 0. settleManySQL
		// (queries.go) writes the same record for many settlements: keep
		// the two equivalent.
		settleRecorded: newWriteSQL(f(`WITH settled AS (` + settleSQL + ` RETURNING update_id)
			INSERT INTO {{table}}_att
			(update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body)
			SELECT update_id, $2::integer, $7::text, $8::text, $9::bigint, $10::bigint, $11::text, $12::text,
			       $13::integer, $14::text, $15::bytea
			FROM settled`)),
		// settleSQL for a settlement to completed that carries its
		// attempt's record, which the row keeps itself (migration 007):
		// $1 update id, $2 attempt, $3 at, $4 claim id, then the record's
		// $5 process, $6 started, $7 ended, $8 outcome, $9 error, $10
		// status, $11 header, $12 body. settleManySQL (queries.go) keeps
		// a completion's record the same way: keep the two equivalent.
		settleDone: newWriteSQL(f(`UPDATE {{table}} SET
				state          = 'completed',
				settled_at     = $3::bigint,
				error          = NULL,
				rec_after      = (SELECT coalesce(max(seq), 0) FROM {{table}}_att),
				rec_process    = $5::text,
				rec_started_at = $6::bigint,
				rec_ended_at   = $7::bigint,
				rec_outcome    = $8::text,
				rec_error      = $9::text,
				rec_status     = $10::integer,
				rec_header     = $11::text,
				rec_body       = $12::bytea
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND due_at >= $3::bigint AND claim_id = $4::text`)),
		// The history rows in the order recorded (seq), with the record a
		// completed row holds (migration 007) right after the rows up to
		// its rec_after: k orders the two kinds.
		list: f(`SELECT update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body,
				2 * seq AS k
			FROM {{table}}_att WHERE update_id = $1::bigint
			UNION ALL
			SELECT update_id, attempts, coalesce(claim_id, ''), coalesce(rec_process, ''), rec_started_at, rec_ended_at,
				rec_outcome, coalesce(rec_error, ''), coalesce(rec_status, 0), coalesce(rec_header, ''),
				coalesce(rec_body, ''::bytea), 2 * rec_after + 1
			FROM {{table}} WHERE update_id = $1::bigint AND rec_outcome IS NOT NULL
			ORDER BY k`),
	}
	v, _ := attemptSQLCache.LoadOrStore(s.table, q)
	return v.(*attemptSQL)
}

// RecordAttempt implements [intake.AdminStore.RecordAttempt]. It is one
// statement of a group-committed write transaction (see writes.go), so
// recording adds no commit of its own under load.
func (s *Store) RecordAttempt(ctx context.Context, rec intake.AttemptRecord) (bool, error) {
	if err := rec.Validate(); err != nil {
		return false, s.fail("record attempt", err)
	}
	n, err := s.write(ctx, "record attempt", writeReq{updateID: rec.UpdateID, sql: s.attemptSQL().record,
		args: []any{rec.UpdateID, rec.Attempt, rec.ClaimID, rec.Process, ms(rec.StartedAt), ms(rec.EndedAt),
			string(rec.Outcome), rec.Error, rec.Status, sqlschema.EncodeHeader(rec.Header), body(rec.Body)}})
	return n > 0, err
}

// Attempts implements [intake.AdminStore.Attempts].
func (s *Store) Attempts(ctx context.Context, updateID int64) ([]intake.AttemptRecord, error) {
	rows, err := s.pool.Query(ctx, s.attemptSQL().list, updateID)
	if err != nil {
		return nil, s.fail("attempts", err)
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
			return nil, s.fail("attempts", err)
		}
		rec.StartedAt, rec.EndedAt, rec.Outcome = fromMS(started), fromMS(ended), intake.AttemptOutcome(outcome)
		if rec.Header, err = sqlschema.DecodeHeader(header); err != nil {
			return nil, s.fail("attempts", err)
		}
		if len(rec.Body) == 0 {
			rec.Body = nil
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("attempts", err)
	}
	return out, nil
}
