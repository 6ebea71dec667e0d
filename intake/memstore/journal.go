package memstore

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Admits reports whether id holds a live lease at at or is its update's
// tail; see [intake.JournalStore.Admits].
func (s *Store) Admits(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: admits: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	return ok && r.admits(id, at), nil
}

// RecordIntent records that id is about to send call, fenced by id's live
// lease or its tail; see [intake.JournalStore.RecordIntent]. The journal
// lives in the update's row, so pruning the row forgets it.
func (s *Store) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	if err := ctx.Err(); err != nil {
		return intake.JournalEntry{}, intake.IntentStale, fmt.Errorf("memstore: record intent: %w", err)
	}
	if err := intake.CheckCall(call); err != nil {
		return intake.JournalEntry{}, intake.IntentStale, fmt.Errorf("memstore: record intent: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	if !ok || !r.admits(id, at) {
		return intake.JournalEntry{}, intake.IntentStale, nil
	}
	if e, ok := r.calls[call]; ok && e.Outcome != intake.CallNotDispatched {
		return cloneEntry(e), intake.IntentJournaled, nil
	}
	e := &intake.JournalEntry{
		UpdateID: id.UpdateID, Call: call,
		Attempt: id.Attempt, ClaimID: id.ClaimID,
		Outcome: intake.CallPending, IntendedAt: at,
	}
	if r.calls == nil {
		r.calls = make(map[intake.Call]*intake.JournalEntry)
	}
	r.calls[call] = e
	return cloneEntry(e), intake.IntentRecorded, nil
}

// RecordOutcome records the outcome of the pending entry id recorded for
// call; see [intake.JournalStore.RecordOutcome].
func (s *Store) RecordOutcome(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("memstore: record outcome: %w", err)
	}
	if err := intake.CheckCallResult(call, res); err != nil {
		return false, fmt.Errorf("memstore: record outcome: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[id.UpdateID]
	if !ok {
		return false, nil
	}
	e, ok := r.calls[call]
	if !ok || e.Outcome != intake.CallPending || e.Attempt != id.Attempt || e.ClaimID != id.ClaimID {
		return false, nil
	}
	e.Outcome, e.Status, e.Body, e.DecidedAt = res.Outcome, res.Status, bytes.Clone(res.Body), at
	return true, nil
}

// Journal lists the update's journaled calls; see
// [intake.JournalStore.Journal].
func (s *Store) Journal(ctx context.Context, updateID int64) ([]intake.JournalEntry, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: journal: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[updateID]
	if !ok {
		return nil, nil
	}
	out := make([]intake.JournalEntry, 0, len(r.calls))
	for _, e := range r.calls {
		out = append(out, cloneEntry(e))
	}
	slices.SortFunc(out, compareEntries)
	return out, nil
}

// compareEntries orders entries as [intake.JournalStore.Journal] lists them.
func compareEntries(a, b intake.JournalEntry) int {
	return cmp.Or(
		a.IntendedAt.Compare(b.IntendedAt),
		cmp.Compare(a.Method, b.Method),
		cmp.Compare(a.ParamsHash, b.ParamsHash),
		cmp.Compare(a.Occurrence, b.Occurrence),
	)
}

func cloneEntry(e *intake.JournalEntry) intake.JournalEntry {
	out := *e
	out.Body = bytes.Clone(e.Body)
	return out
}

// RecordOutcomeDeferred records at once, as [Store.RecordOutcome]: a store in
// memory has no commits to share; see
// [intake.JournalStore.RecordOutcomeDeferred].
func (s *Store) RecordOutcomeDeferred(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	return s.RecordOutcome(ctx, id, call, res, at)
}
