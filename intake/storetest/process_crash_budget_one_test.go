package storetest

import (
	"context"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// crashBudgetOneIsNone takes a crash budget of one for no budget, as an
// SQL store whose claim tested MaxCrashes > 1 rather than > 0 would.
type crashBudgetOneIsNone struct{ *memstore.Store }

func (s crashBudgetOneIsNone) ClaimAs(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	if p.MaxCrashes == 1 {
		p.MaxCrashes = 0
	}
	return s.Store.ClaimAs(ctx, updateID, opts, p)
}

func TestCrashBudgetOneIsNoneFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return crashBudgetOneIsNone{m}
	}), "Process/CrashBudgetOfOne", "Process/CrashBudget")
	requireCases(t, res, "Process/CrashBudgetOfOne")
	requireMessage(t, res, "Process/CrashBudgetOfOne", "ClaimAs at 51ms with MaxCrashes 1 took {update 1, attempt 2,")
}
