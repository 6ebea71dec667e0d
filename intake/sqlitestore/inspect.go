package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/tgrelay/tgrelay/intake"
)

// The operator's reads (part of [intake.AdminStore]): plain statements on the
// reader pool, each bounded by its query's limit.

var _ intake.AdminStore = (*Store)(nil)

// rowColumnsNoBody are rowColumns with the body left out (read as NULL).
const rowColumnsNoBody = `r.update_id, r.state, r.attempts, r.claim_id, r.received_at, r.due_at, r.settled_at, r.error, NULL, r.crashes`

// Search implements [intake.AdminStore.Search].
func (s *Store) Search(ctx context.Context, q intake.SearchQuery) ([]intake.Row, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: search: %w", err)
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if q.State != "" {
		add("state = ?%d", string(q.State))
	}
	if q.Unacknowledged {
		where = append(where, "state = 'abandoned' AND settled_at IS NULL")
	}
	if q.Crashed {
		where = append(where, "crashes > 0")
	}
	if q.Chat != "" {
		add("chat = ?%d", q.Chat)
	}
	if q.Text != "" {
		add("instr(body, ?%d) > 0", q.Text)
	}
	if q.Before != nil {
		add("update_id < ?%d", *q.Before)
	}
	text := `SELECT ` + rowColumns + ` FROM "{{table}}"`
	if len(where) > 0 {
		text += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit)
	text += fmt.Sprintf(" ORDER BY update_id DESC LIMIT ?%d", len(args))
	rows, err := s.r.QueryContext(ctx, fillSQL(text, s.table), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: search: %w", err)
	}
	defer rows.Close()
	var out []intake.Row
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: search: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: search: %w", err)
	}
	return out, nil
}

// Replies implements [intake.AdminStore.Replies].
func (s *Store) Replies(ctx context.Context, q intake.ReplyQuery) ([]intake.Reply, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: replies: %w", err)
	}
	var (
		where []string
		args  []any
	)
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if len(q.Outcomes) > 0 {
		var in []string
		for _, o := range q.Outcomes {
			args = append(args, string(o))
			in = append(in, fmt.Sprintf("?%d", len(args)))
		}
		where = append(where, "j.outcome IN ("+strings.Join(in, ", ")+")")
	}
	if q.Method != "" {
		add("j.method = ?%d", q.Method)
	}
	if q.Chat != "" {
		add("r.chat = ?%d", q.Chat)
	}
	if !q.Since.IsZero() {
		add("j.intended_at >= ?%d", ms(q.Since))
	}
	if !q.Until.IsZero() {
		add("j.intended_at < ?%d", ms(q.Until))
	}
	if k := q.Before; k != nil {
		n := len(args)
		args = append(args, ms(k.IntendedAt), k.UpdateID, k.Method, k.ParamsHash, k.Occurrence)
		where = append(where, fmt.Sprintf("(j.intended_at, j.update_id, j.method, j.params_hash, j.occurrence) < (?%d, ?%d, ?%d, ?%d, ?%d)",
			n+1, n+2, n+3, n+4, n+5))
	}
	text := `SELECT j.update_id, j.method, j.params_hash, j.occurrence, j.attempt, j.claim_id, j.outcome, j.status, j.body,
		j.intended_at, j.decided_at, ` + rowColumnsNoBody + `, r.chat
		FROM "{{table}}_journal" j JOIN "{{table}}" r ON r.update_id = j.update_id`
	if len(where) > 0 {
		text += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit)
	text += fmt.Sprintf(` ORDER BY j.intended_at DESC, j.update_id DESC, j.method DESC, j.params_hash DESC, j.occurrence DESC LIMIT ?%d`, len(args))
	rows, err := s.r.QueryContext(ctx, fillSQL(text, s.table), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: replies: %w", err)
	}
	defer rows.Close()
	var out []intake.Reply
	for rows.Next() {
		var rep intake.Reply
		var outcome string
		var intended int64
		var decided sql.NullInt64
		// The row's columns are scanned by scanRow through a scanner that
		// first takes the entry's.
		sc := &splitScan{rows: rows, head: []any{&rep.UpdateID, &rep.Method, &rep.ParamsHash, &rep.Occurrence, &rep.Attempt, &rep.ClaimID,
			&outcome, &rep.Status, &rep.Body, &intended, &decided}, tail: []any{&rep.Chat}}
		if rep.Row, err = scanRow(sc); err != nil {
			return nil, fmt.Errorf("sqlitestore: replies: %w", err)
		}
		rep.Outcome = intake.CallOutcome(outcome)
		rep.IntendedAt = fromMS(intended)
		if decided.Valid {
			rep.DecidedAt = fromMS(decided.Int64)
		}
		out = append(out, rep)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: replies: %w", err)
	}
	return out, nil
}

// splitScan scans a result row whose columns are head's, then scanRow's,
// then tail's.
type splitScan struct {
	rows       *sql.Rows
	head, tail []any
}

func (s *splitScan) Scan(dest ...any) error {
	all := append(append(append([]any{}, s.head...), dest...), s.tail...)
	return s.rows.Scan(all...)
}

// Processes implements [intake.AdminStore.Processes].
func (s *Store) Processes(ctx context.Context, limit int) (intake.ProcessList, error) {
	var out intake.ProcessList
	if err := intake.CheckProcessesLimit(limit); err != nil {
		return out, fmt.Errorf("sqlitestore: processes: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, fillSQL(`SELECT process_id, until_ms FROM "{{table}}_procs" ORDER BY process_id LIMIT ?1`, s.table), limit)
	if err != nil {
		return out, fmt.Errorf("sqlitestore: processes: %w", err)
	}
	for rows.Next() {
		var p intake.Process
		var until int64
		if err := rows.Scan(&p.ID, &until); err != nil {
			rows.Close()
			return out, fmt.Errorf("sqlitestore: processes: %w", err)
		}
		p.Until = fromMS(until)
		out.Processes = append(out.Processes, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("sqlitestore: processes: %w", err)
	}
	rows, err = s.r.QueryContext(ctx, fillSQL(`SELECT `+rowColumnsNoBody+`, r.owner FROM "{{table}}" r
		WHERE r.state = 'processing' ORDER BY r.update_id DESC LIMIT ?1`, s.table), limit)
	if err != nil {
		return out, fmt.Errorf("sqlitestore: processes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var h intake.Holding
		var owner sql.NullString
		if h.Row, err = scanRow(&splitScan{rows: rows, tail: []any{&owner}}); err != nil {
			return out, fmt.Errorf("sqlitestore: processes: %w", err)
		}
		h.Owner = owner.String
		out.Held = append(out.Held, h)
	}
	if err := rows.Err(); err != nil {
		return out, fmt.Errorf("sqlitestore: processes: %w", err)
	}
	return out, nil
}

// HeldBehind implements [intake.AdminStore.HeldBehind].
func (s *Store) HeldBehind(ctx context.Context, updateID int64) (int64, bool, error) {
	var first sql.NullInt64
	err := s.r.QueryRowContext(ctx, fillSQL(`SELECT min(o.update_id) FROM "{{table}}" r JOIN "{{table}}" o
		ON o.chat = r.chat AND o.update_id < r.update_id AND `+liveOtherSQL+`
		WHERE r.update_id = ?1 AND r.chat <> ''`, s.table), updateID).Scan(&first)
	if err != nil {
		return 0, false, fmt.Errorf("sqlitestore: held behind %d: %w", updateID, err)
	}
	return first.Int64, first.Valid, nil
}
