package storetest

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// abandonRecordInRow keeps the record riding on an abandonment made while
// other settlements are in flight in the row, as it keeps a completion's,
// instead of in the history, as a store whose merged statement for
// concurrent settlements took any final settlement for a completion
// would: the record lists in its place until a later completion's record
// takes the row's slot and it is gone.
type abandonRecordInRow struct {
	*memstore.Store
	inFlight atomic.Int32
	mu       sync.Mutex
	inRow    map[int64]rowRecord
}

// rowRecord is a record kept in its row, listed after the first after
// records of its update's history.
type rowRecord struct {
	rec   intake.AttemptRecord
	after int
}

func (s *abandonRecordInRow) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	time.Sleep(time.Millisecond) // a group commit's window: settlements in flight together share a statement
	merged := s.inFlight.Load() > 1
	if st.Attempt == nil || (st.State != intake.StateCompleted && !(merged && st.State == intake.StateAbandoned)) {
		return s.Store.Settle(ctx, id, st)
	}
	rec := *st.Attempt
	rec.UpdateID, rec.Attempt, rec.ClaimID = id.UpdateID, id.Attempt, id.ClaimID
	st.Attempt = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, err := s.Store.Settle(ctx, id, st)
	if !ok || err != nil {
		return ok, err
	}
	delete(s.inRow, id.UpdateID) // the row's one slot
	if st.State == intake.StateCompleted {
		_, err = s.Store.RecordAttempt(ctx, rec)
		return true, err
	}
	hist, err := s.Store.Attempts(ctx, id.UpdateID)
	s.inRow[id.UpdateID] = rowRecord{rec: rec, after: len(hist)}
	return true, err
}

func (s *abandonRecordInRow) Attempts(ctx context.Context, updateID int64) ([]intake.AttemptRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hist, err := s.Store.Attempts(ctx, updateID)
	if r, ok := s.inRow[updateID]; ok && err == nil {
		hist = slices.Insert(hist, min(r.after, len(hist)), r.rec)
	}
	return hist, err
}

func TestAbandonRecordInRowFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &abandonRecordInRow{Store: m, inRow: map[int64]rowRecord{}}
	}), "Batch", "History")
	requireCases(t, res, "Batch/ConcurrentRecordsSurviveRequeue")
	// Which update's settlements shared the broken store's window is up to
	// the scheduler, so the message is matched without its update id.
	requireMessage(t, res, "Batch/ConcurrentRecordsSurviveRequeue", "after a concurrent abandoned settlement, a requeue and a completion: Attempts(", ") listed 2 records")
}
