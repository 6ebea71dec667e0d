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
	record, settleRecorded writeSQL
	list                   string
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
		list: f(`SELECT update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body
			FROM {{table}}_att WHERE update_id = $1::bigint ORDER BY seq`),
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
			&outcome, &rec.Error, &rec.Status, &header, &rec.Body); err != nil {
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
