package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// claimAddCountsCrash records a claimed AddBatchAs as if a process had
// already crashed on it: Get shows one crash more, and a takeover's crash
// budget is one smaller, as a store whose claimed rows start with a crash
// counted would spend it.
type claimAddCountsCrash struct {
	*memstore.Store
	mu      sync.Mutex
	claimed map[int64]bool
}

func (s *claimAddCountsCrash) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	res, err := s.Store.AddBatchAs(ctx, reqs, p)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range res {
		if r.Added && reqs[i].Claim != nil {
			s.claimed[reqs[i].UpdateID] = true
		}
	}
	return res, err
}

func (s *claimAddCountsCrash) started(id int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claimed[id]
}

func (s *claimAddCountsCrash) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	row, ok, err := s.Store.Get(ctx, id)
	if ok && s.started(id) {
		row.Crashes++
	}
	return row, ok, err
}

func (s *claimAddCountsCrash) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	if s.started(id) && p.MaxCrashes > 1 {
		p.MaxCrashes--
	}
	return s.Store.ClaimAs(ctx, id, o, p)
}

func TestClaimAddCountsCrashFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &claimAddCountsCrash{Store: m, claimed: map[int64]bool{}}
	}), "ClaimOnAdd/ClaimedAddHasNoCrash")
	requireCases(t, res, "ClaimOnAdd/ClaimedAddHasNoCrash")
	requireMessage(t, res, "ClaimOnAdd/ClaimedAddHasNoCrash", "Get(1) after its claimed add shows 1 crashes; want 0")
	requireMessage(t, res, "ClaimOnAdd/ClaimedAddHasNoCrash", `ClaimAs(1, now 101ms, process "b", max crashes 2)`, "want attempt 2")
}
