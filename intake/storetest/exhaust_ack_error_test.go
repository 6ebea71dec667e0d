package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// ackClearsError clears an exhaustion's error text when it is
// acknowledged, as a store whose acknowledgement set it to NULL would show
// the row: abandoned, with no reason.
type ackClearsError struct {
	*memstore.Store
	mu    sync.Mutex
	acked map[int64]bool
}

func (s *ackClearsError) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	ok, err := s.Store.AcknowledgeExhaustion(ctx, id, at)
	if ok {
		s.mu.Lock()
		s.acked[id.UpdateID] = true
		s.mu.Unlock()
	}
	return ok, err
}

func (s *ackClearsError) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	r, ok, err := s.Store.Get(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.acked[id] && r.State == intake.StateAbandoned {
		r.Error = ""
	}
	return r, ok, err
}

func TestAckClearsErrorFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &ackClearsError{Store: m, acked: map[int64]bool{}}
	}), "Exhaust/AckKeepsError")
	requireCases(t, res, "Exhaust/AckKeepsError")
	requireMessage(t, res, "Exhaust/AckKeepsError", `Get(1) after AcknowledgeExhaustion at 20ms = state abandoned, error ""`, `want abandoned, "gave up"`)
}
