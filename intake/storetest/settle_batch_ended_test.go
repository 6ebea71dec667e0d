package storetest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// endedResettled answers a settlement made while others are in flight
// applied when its identity's attempt already ended, as a store whose
// merged statement for concurrent settlements lost its state condition
// would: it fences by claim id, attempt and lease end only, and the lease
// end of a settled attempt still looks live.
type endedResettled struct {
	*memstore.Store
	inFlight atomic.Int32
}

func (s *endedResettled) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	time.Sleep(time.Millisecond) // a group commit's window: settlements in flight together share a statement
	merged := s.inFlight.Load() > 1
	ok, err := s.Store.Settle(ctx, id, st)
	if ok || err != nil || !merged {
		return ok, err
	}
	row, found, err := s.Store.Get(ctx, id.UpdateID)
	if err != nil || !found {
		return false, err
	}
	ended := row.State != intake.StateProcessing && row.State != intake.StatePending
	return ended && row.ClaimID == id.ClaimID && row.Attempts == id.Attempt && st.Validate() == nil, nil
}

func TestEndedResettledFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return &endedResettled{Store: m} }), "Batch")
	// ConcurrentSettles sees it only when one of the holder's two
	// settlements of a row ends before the other starts.
	requireCasesOr(t, res, []string{"Batch/ConcurrentSettles"}, "Batch/ConcurrentSettlesOfEndedAttempts")
	requireMessage(t, res, "Batch/ConcurrentSettlesOfEndedAttempts", "of an attempt that ended completed at 10ms = true; want false")
}
