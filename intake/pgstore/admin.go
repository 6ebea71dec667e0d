package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/intake"
)

// List implements [intake.AdminStore.List].
func (s *Store) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: list: %w", err)
	}
	var state *string
	if q.State != "" {
		st := string(q.State)
		state = &st
	}
	rows, err := s.pool.Query(ctx, s.q.list, state, q.Unacknowledged, q.After, q.Limit)
	if err != nil {
		return nil, s.fail("list", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (intake.Row, error) { return scanRow(r) })
	if err != nil {
		return nil, s.fail("list", err)
	}
	return out, nil
}

// Get implements [intake.AdminStore.Get].
func (s *Store) Get(ctx context.Context, updateID int64) (intake.Row, bool, error) {
	row, err := scanRow(s.pool.QueryRow(ctx, s.q.get, updateID))
	if errors.Is(err, pgx.ErrNoRows) {
		return intake.Row{}, false, nil
	}
	if err != nil {
		return intake.Row{}, false, s.fail("get", err)
	}
	return row, true, nil
}

func scanRow(r pgx.Row) (intake.Row, error) {
	var (
		row              intake.Row
		state            string
		claimID, errText *string
		received, due    int64
		settled          *int64
	)
	if err := r.Scan(&row.UpdateID, &state, &row.Attempts, &claimID, &received, &due, &settled, &errText, &row.Body, &row.Crashes); err != nil {
		return intake.Row{}, err
	}
	row.State = intake.State(state)
	row.ReceivedAt = fromMS(received)
	row.DueAt = fromMS(due)
	if settled != nil {
		row.SettledAt = fromMS(*settled)
	}
	if claimID != nil {
		row.ClaimID = *claimID
	}
	if errText != nil {
		row.Error = *errText
	}
	return row, nil
}

// Requeue implements [intake.AdminStore.Requeue]. It leaves claim_id as it
// was; the next claim replaces it, so no earlier identity matches again.
func (s *Store) Requeue(ctx context.Context, updateID int64, now time.Time) (bool, error) {
	n, err := s.write(ctx, "requeue", writeReq{updateID: updateID, sql: s.q.requeue, args: []any{updateID, ms(now)}})
	return n == 1, err
}

// Stats implements [intake.AdminStore.Stats]. Count has an entry for each of
// the five states, zero included. It scans the whole table.
func (s *Store) Stats(ctx context.Context) (intake.Stats, error) {
	st := intake.Stats{Count: map[intake.State]int{
		intake.StatePending: 0, intake.StateProcessing: 0, intake.StateFailed: 0,
		intake.StateCompleted: 0, intake.StateAbandoned: 0,
	}}
	rows, err := s.pool.Query(ctx, s.q.stats)
	if err != nil {
		return intake.Stats{}, s.fail("stats", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			state         string
			count, unack  int64
			oldestPending *int64
		)
		if err := rows.Scan(&state, &count, &unack, &oldestPending); err != nil {
			return intake.Stats{}, s.fail("stats", err)
		}
		st.Count[intake.State(state)] = int(count)
		st.Unacknowledged += int(unack)
		if oldestPending != nil {
			st.OldestPending = fromMS(*oldestPending)
		}
	}
	if err := rows.Err(); err != nil {
		return intake.Stats{}, s.fail("stats", err)
	}
	return st, nil
}

// ErrReadOnly is wrapped by the error of [Store.Health] when the server
// accepts only read-only transactions (a standby, or
// default_transaction_read_only): every write would fail.
var ErrReadOnly = errors.New("pgstore: the server is read-only")

// Health implements [intake.HealthChecker]: it fails when the server cannot
// be reached or only accepts read-only transactions. Writes fail in both
// cases too, so an intake answers the webhook 503, never 200.
func (s *Store) Health(ctx context.Context) error {
	var readOnly string
	if err := s.pool.QueryRow(ctx, "SELECT current_setting('transaction_read_only')").Scan(&readOnly); err != nil {
		return s.fail("health", err)
	}
	if readOnly == "on" {
		return fmt.Errorf("%w: new transactions are read-only", ErrReadOnly)
	}
	return nil
}
