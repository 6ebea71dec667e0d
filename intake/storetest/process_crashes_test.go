package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// crashesForgotten forgets a row's crashes when an attempt fails: Get
// shows none after a failed settlement, and the next claims' crash budget
// counts only the crashes since, as a store that reset the count in its
// settlement would.
type crashesForgotten struct {
	*memstore.Store
	mu     sync.Mutex
	forgot map[int64]int // crashes forgotten, by update id
}

func (s *crashesForgotten) forgotten(id int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.forgot[id]
}

func (s *crashesForgotten) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	row, _, err := s.Store.Get(ctx, id.UpdateID)
	if err != nil {
		return false, err
	}
	ok, err := s.Store.Settle(ctx, id, st)
	if ok && st.State == intake.StateFailed {
		s.mu.Lock()
		s.forgot[id.UpdateID] = row.Crashes
		s.mu.Unlock()
	}
	return ok, err
}

func (s *crashesForgotten) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	row, ok, err := s.Store.Get(ctx, id)
	row.Crashes -= s.forgotten(id)
	return row, ok, err
}

func (s *crashesForgotten) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	if p.MaxCrashes > 0 {
		p.MaxCrashes += s.forgotten(id)
	}
	return s.Store.ClaimAs(ctx, id, o, p)
}

func TestCrashesForgottenFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &crashesForgotten{Store: m, forgot: map[int64]int{}}
	}), "Process/CrashesKept")
	requireCases(t, res, "Process/CrashesKept")
	requireMessage(t, res, "Process/CrashesKept", "Get(1) after its next attempt failed shows 0 crashes; want 1")
	requireMessage(t, res, "Process/CrashesKept", `ClaimAs(1, now 31ms, process "c", max crashes 2) took update 1`, "want it spent")
}
