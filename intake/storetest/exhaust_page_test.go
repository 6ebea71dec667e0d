package storetest

import (
	"context"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// exhaustionPageFirst cuts a DueExhaustions page before it keeps the
// unacknowledged exhaustions, as a query with its LIMIT on the rows after
// the cursor and the exhaustion condition applied after would.
type exhaustionPageFirst struct{ *memstore.Store }

func (s exhaustionPageFirst) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	page, err := s.List(ctx, intake.ListQuery{After: q.After, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	all, err := s.Store.DueExhaustions(ctx, intake.ExhaustionQuery{After: q.After, Limit: 1000})
	if err != nil {
		return nil, err
	}
	var out []intake.Exhaustion
	for _, r := range page {
		for _, e := range all {
			if e.UpdateID == r.UpdateID {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func TestExhaustionPageFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return exhaustionPageFirst{m} }), "Exhaust")
	requireCases(t, res, "Exhaust/CursorPageOfExhaustions")
	requireMessage(t, res, "Exhaust/CursorPageOfExhaustions", "DueExhaustions(limit 1, after 1) listed []; want [8]")
}
