package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// completionKeepsError keeps the error text a completing settlement
// carries, as an SQL store whose single-row settlement set the error
// column from the settlement whatever its state would.
type completionKeepsError struct {
	*memstore.Store
	mu   sync.Mutex
	kept map[int64]string
}

func (s *completionKeepsError) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	ok, err := s.Store.Settle(ctx, id, st)
	if ok && st.State == intake.StateCompleted {
		s.mu.Lock()
		s.kept[id.UpdateID] = st.Error
		s.mu.Unlock()
	}
	return ok, err
}

func (s *completionKeepsError) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	r, ok, err := s.Store.Get(ctx, id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if text, kept := s.kept[id]; kept && r.State == intake.StateCompleted {
		r.Error = text
	}
	return r, ok, err
}

func TestCompletionKeepsErrorFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &completionKeepsError{Store: m, kept: map[int64]string{}}
	}), "Admin/CompletionClearsError")
	requireCases(t, res, "Admin/CompletionClearsError")
	requireMessage(t, res, "Admin/CompletionClearsError", `Get(1): Error "not kept: completed", want ""`)
}
