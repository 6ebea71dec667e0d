package memstore

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// RecordAttempt appends rec to the history of its update's row; see
// [intake.AdminStore.RecordAttempt]. The history lives in the row, so
// pruning the row forgets it.
func (s *Store) RecordAttempt(ctx context.Context, rec intake.AttemptRecord) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: record attempt: %w", err)
	}
	if err := rec.Validate(); err != nil {
		return false, fmt.Errorf("memstore: record attempt: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[rec.UpdateID]
	if !ok {
		return false, nil
	}
	r.history = append(r.history, cloneRecord(rec))
	return true, nil
}

// Attempts lists the history of an update in the order recorded; see
// [intake.AdminStore.Attempts]. The records returned are the caller's.
func (s *Store) Attempts(ctx context.Context, updateID int64) ([]intake.AttemptRecord, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: attempts: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[updateID]
	if !ok {
		return nil, nil
	}
	out := make([]intake.AttemptRecord, 0, len(r.history))
	for _, rec := range r.history {
		out = append(out, cloneRecord(rec))
	}
	return out, nil
}

// requeued appends the requeue mark of [intake.AdminStore.Requeue] to the
// row's history. The caller holds s.mu.
func (r *row) requeued(updateID int64, now time.Time) {
	r.history = append(r.history, intake.AttemptRecord{
		UpdateID: updateID, ClaimID: r.claimID, StartedAt: now, EndedAt: now, Outcome: intake.AttemptRequeued,
	})
}

// cloneRecord copies the record's body and header, so neither the caller
// nor the store sees the other's changes.
func cloneRecord(rec intake.AttemptRecord) intake.AttemptRecord {
	if rec.Body != nil {
		rec.Body = bytes.Clone(rec.Body)
	}
	if rec.Header != nil {
		h := make(http.Header, len(rec.Header))
		for k, vs := range rec.Header {
			h[k] = append([]string(nil), vs...)
		}
		rec.Header = h
	}
	return rec
}
