package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// List implements [intake.AdminStore.List].
func (s *Store) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list: %w", err)
	}
	var (
		where []string
		args  []any
	)
	if q.State != "" {
		args = append(args, string(q.State))
		where = append(where, fmt.Sprintf("state = ?%d", len(args)))
	}
	if q.Unacknowledged {
		where = append(where, "state = 'abandoned' AND settled_at IS NULL")
	}
	if q.After != nil {
		args = append(args, *q.After)
		where = append(where, fmt.Sprintf("update_id > ?%d", len(args)))
	}
	text := s.q.listSQL
	if len(where) > 0 {
		text += " WHERE " + strings.Join(where, " AND ")
	}
	args = append(args, q.Limit)
	text += fmt.Sprintf(" ORDER BY update_id LIMIT ?%d", len(args))
	rows, err := s.r.QueryContext(ctx, text, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list: %w", err)
	}
	defer rows.Close()
	var out []intake.Row
	for rows.Next() {
		r, err := scanRow(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: list: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: list: %w", err)
	}
	return out, nil
}

// Get implements [intake.AdminStore.Get].
func (s *Store) Get(ctx context.Context, updateID int64) (intake.Row, bool, error) {
	r, err := scanRow(s.q.get.QueryRowContext(ctx, updateID))
	if errors.Is(err, sql.ErrNoRows) {
		return intake.Row{}, false, nil
	}
	if err != nil {
		return intake.Row{}, false, fmt.Errorf("sqlitestore: get %d: %w", updateID, err)
	}
	return r, true, nil
}

// Requeue implements [intake.AdminStore.Requeue]. The receipt time is kept,
// so a sweep lists the requeued row at once.
func (s *Store) Requeue(ctx context.Context, updateID int64, now time.Time) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.requeue, &n, updateID, ms(now))); err != nil {
		return false, fmt.Errorf("sqlitestore: requeue %d: %w", updateID, err)
	}
	return n > 0, nil
}

// Stats implements [intake.AdminStore.Stats]. Count has an entry for each
// of the five states, zero included.
func (s *Store) Stats(ctx context.Context) (intake.Stats, error) {
	// A readiness probe that counts rows must see a vanished file.
	if _, err := s.file.check(); err != nil {
		return intake.Stats{}, err
	}
	st := intake.Stats{Count: map[intake.State]int{
		intake.StatePending:    0,
		intake.StateProcessing: 0,
		intake.StateFailed:     0,
		intake.StateCompleted:  0,
		intake.StateAbandoned:  0,
	}}
	rows, err := s.q.stats.QueryContext(ctx)
	if err != nil {
		return intake.Stats{}, fmt.Errorf("sqlitestore: stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			state string
			n     int
		)
		if err := rows.Scan(&state, &n); err != nil {
			return intake.Stats{}, fmt.Errorf("sqlitestore: stats: %w", err)
		}
		st.Count[intake.State(state)] += n
	}
	if err := rows.Err(); err != nil {
		return intake.Stats{}, fmt.Errorf("sqlitestore: stats: %w", err)
	}
	var oldest sql.NullInt64
	if err := s.q.statsExtra.QueryRowContext(ctx).Scan(&st.Unacknowledged, &oldest); err != nil {
		return intake.Stats{}, fmt.Errorf("sqlitestore: stats: %w", err)
	}
	if oldest.Valid {
		st.OldestPending = fromMS(oldest.Int64)
	}
	return st, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanRow(sc scanner) (intake.Row, error) {
	var (
		r                intake.Row
		state            string
		claimID, errText sql.NullString
		received, due    int64
		settled          sql.NullInt64
	)
	if err := sc.Scan(&r.UpdateID, &state, &r.Attempts, &claimID, &received, &due, &settled, &errText, &r.Body, &r.Crashes); err != nil {
		return intake.Row{}, err
	}
	r.State = intake.State(state)
	r.ClaimID = claimID.String
	r.ReceivedAt = fromMS(received)
	r.DueAt = fromMS(due)
	if settled.Valid {
		r.SettledAt = fromMS(settled.Int64)
	}
	r.Error = errText.String
	return r, nil
}
