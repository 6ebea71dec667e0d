package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/intake"
)

// The operator's reads (part of [intake.AdminStore]): plain statements on the
// pool, each bounded by its query's limit.

var _ intake.AdminStore = (*Store)(nil)

// rowColumnsNoBody are rowColumns with the body left out (read as NULL).
const rowColumnsNoBody = `r.update_id, r.state, r.attempts, r.claim_id, r.received_at, r.due_at, r.settled_at, r.error, NULL::bytea, r.crashes`

// conds collects the conditions of a statement and their arguments.
type conds struct {
	where []string
	args  []any
}

// add appends cond, whose %d is the placeholder number of v.
func (c *conds) add(cond string, v any) {
	c.args = append(c.args, v)
	c.where = append(c.where, fmt.Sprintf(cond, len(c.args)))
}

func (c *conds) sql() string {
	if len(c.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.where, " AND ")
}

func (s *Store) fillTable(text string) string { return strings.ReplaceAll(text, "{{table}}", s.table) }

// Search implements [intake.AdminStore.Search].
func (s *Store) Search(ctx context.Context, q intake.SearchQuery) ([]intake.Row, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: search: %w", err)
	}
	var c conds
	if q.State != "" {
		c.add("state = $%d::text", string(q.State))
	}
	if q.Unacknowledged {
		c.where = append(c.where, "state = 'abandoned' AND settled_at IS NULL")
	}
	if q.Crashed {
		c.where = append(c.where, "crashes > 0")
	}
	if q.Chat != "" {
		c.add("chat = $%d::text", q.Chat)
	}
	if q.Text != "" {
		c.add("position($%d::bytea in body) > 0", []byte(q.Text))
	}
	if q.Before != nil {
		c.add("update_id < $%d::bigint", *q.Before)
	}
	c.args = append(c.args, q.Limit)
	text := s.fillTable(`SELECT `+rowColumns+` FROM {{table}}`) + c.sql() + fmt.Sprintf(" ORDER BY update_id DESC LIMIT $%d::integer", len(c.args))
	rows, err := s.pool.Query(ctx, text, c.args...)
	if err != nil {
		return nil, s.fail("search", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (intake.Row, error) { return scanRow(r) })
	if err != nil {
		return nil, s.fail("search", err)
	}
	return out, nil
}

// Replies implements [intake.AdminStore.Replies].
func (s *Store) Replies(ctx context.Context, q intake.ReplyQuery) ([]intake.Reply, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: replies: %w", err)
	}
	var c conds
	if len(q.Outcomes) > 0 {
		outs := make([]string, len(q.Outcomes))
		for i, o := range q.Outcomes {
			outs[i] = string(o)
		}
		c.add("j.outcome = ANY($%d::text[])", outs)
	}
	if q.Method != "" {
		c.add("j.method = $%d::text", q.Method)
	}
	if q.Chat != "" {
		c.add("r.chat = $%d::text", q.Chat)
	}
	if !q.Since.IsZero() {
		c.add("j.intended_at >= $%d::bigint", q.Since.UnixMilli())
	}
	if !q.Until.IsZero() {
		c.add("j.intended_at < $%d::bigint", q.Until.UnixMilli())
	}
	if k := q.Before; k != nil {
		n := len(c.args)
		c.args = append(c.args, k.IntendedAt.UnixMilli(), k.UpdateID, k.Method, k.ParamsHash, k.Occurrence)
		c.where = append(c.where, fmt.Sprintf("(j.intended_at, j.update_id, j.method, j.params_hash, j.occurrence) < ($%d::bigint, $%d::bigint, $%d::text, $%d::text, $%d::integer)",
			n+1, n+2, n+3, n+4, n+5))
	}
	c.args = append(c.args, q.Limit)
	text := s.fillTable(`SELECT j.update_id, j.method, j.params_hash, j.occurrence, j.attempt, j.claim_id, j.outcome, j.status, j.body,
		j.intended_at, j.decided_at, `+rowColumnsNoBody+`, r.chat
		FROM {{table}}_journal j JOIN {{table}} r ON r.update_id = j.update_id`) + c.sql() +
		fmt.Sprintf(` ORDER BY j.intended_at DESC, j.update_id DESC, j.method DESC, j.params_hash DESC, j.occurrence DESC LIMIT $%d::integer`, len(c.args))
	rows, err := s.pool.Query(ctx, text, c.args...)
	if err != nil {
		return nil, s.fail("replies", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (intake.Reply, error) {
		var rep intake.Reply
		var outcome string
		var intended int64
		var decided *int64
		row, err := scanRow(&splitScan{r: r, head: []any{&rep.UpdateID, &rep.Method, &rep.ParamsHash, &rep.Occurrence, &rep.Attempt, &rep.ClaimID,
			&outcome, &rep.Status, &rep.Body, &intended, &decided}, tail: []any{&rep.Chat}})
		if err != nil {
			return rep, err
		}
		rep.Row = row
		rep.Outcome = intake.CallOutcome(outcome)
		rep.IntendedAt = fromMS(intended)
		if decided != nil {
			rep.DecidedAt = fromMS(*decided)
		}
		return rep, nil
	})
	if err != nil {
		return nil, s.fail("replies", err)
	}
	return out, nil
}

// splitScan scans a result row whose columns are head's, then scanRow's,
// then tail's.
type splitScan struct {
	r          pgx.Row
	head, tail []any
}

func (s *splitScan) Scan(dest ...any) error {
	all := append(append(append([]any{}, s.head...), dest...), s.tail...)
	return s.r.Scan(all...)
}

// Processes implements [intake.AdminStore.Processes].
func (s *Store) Processes(ctx context.Context, limit int) (intake.ProcessList, error) {
	var out intake.ProcessList
	if err := intake.CheckProcessesLimit(limit); err != nil {
		return out, fmt.Errorf("pgstore: processes: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.fillTable(`SELECT process_id, until_ms FROM {{table}}_procs ORDER BY process_id LIMIT $1::integer`), limit)
	if err != nil {
		return out, s.fail("processes", err)
	}
	out.Processes, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (intake.Process, error) {
		var p intake.Process
		var until int64
		err := r.Scan(&p.ID, &until)
		p.Until = fromMS(until)
		return p, err
	})
	if err != nil {
		return out, s.fail("processes", err)
	}
	rows, err = s.pool.Query(ctx, s.fillTable(`SELECT `+rowColumnsNoBody+`, r.owner FROM {{table}} r
		WHERE r.state = 'processing' ORDER BY r.update_id DESC LIMIT $1::integer`), limit)
	if err != nil {
		return out, s.fail("processes", err)
	}
	out.Held, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (intake.Holding, error) {
		var h intake.Holding
		var owner *string
		row, err := scanRow(&splitScan{r: r, tail: []any{&owner}})
		h.Row = row
		if owner != nil {
			h.Owner = *owner
		}
		return h, err
	})
	if err != nil {
		return out, s.fail("processes", err)
	}
	return out, nil
}

// HeldBehind implements [intake.AdminStore.HeldBehind].
func (s *Store) HeldBehind(ctx context.Context, updateID int64) (int64, bool, error) {
	var first *int64
	err := s.pool.QueryRow(ctx, s.fillTable(`SELECT min(o.update_id) FROM {{table}} r JOIN {{table}} o
		ON o.chat = r.chat AND o.update_id < r.update_id AND o.state IN ('pending', 'processing', 'failed')
		WHERE r.update_id = $1::bigint AND r.chat <> ''`), updateID).Scan(&first)
	if err != nil {
		return 0, false, s.fail("held behind", err)
	}
	if first == nil {
		return 0, false, nil
	}
	return *first, true, nil
}
