package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// exhaustionsByTime lists the first page of exhaustions by exhaustion time
// rather than update id, as an SQL store whose first-page query ordered by
// its due_at column would (later pages keep the update id order).
type exhaustionsByTime struct{ *memstore.Store }

func (s exhaustionsByTime) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	if q.After != nil || q.Limit < 1 {
		return s.Store.DueExhaustions(ctx, q)
	}
	all, err := s.Store.DueExhaustions(ctx, intake.ExhaustionQuery{Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(all, func(a, b intake.Exhaustion) int { return a.ExhaustedAt.Compare(b.ExhaustedAt) })
	return all[:min(q.Limit, len(all))], nil
}

func TestExhaustionsByTimeFail(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return exhaustionsByTime{m}
	}), "Exhaust/ListedInUpdateIDOrder")
	requireCases(t, res, "Exhaust/ListedInUpdateIDOrder")
	requireMessage(t, res, "Exhaust/ListedInUpdateIDOrder", "DueExhaustions(limit 10, after nil) listed [3 2 1]", "want [1 2 3]")
}
