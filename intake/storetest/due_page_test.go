package storetest

import (
	"context"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// duePageFirst cuts Due's page before it judges the rows due, as a query
// with its LIMIT on the stored rows and the due conditions applied after
// would: the lowest q.Limit update ids are the page, and of those only the
// due ones are listed.
type duePageFirst struct{ *memstore.Store }

func (s duePageFirst) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	page, err := s.List(ctx, intake.ListQuery{Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	inPage := map[int64]bool{}
	for _, r := range page {
		inPage[r.UpdateID] = true
	}
	q.Limit = len(page) + 1
	due, err := s.Store.Due(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []intake.StoredUpdate
	for _, u := range due {
		if inPage[u.UpdateID] {
			out = append(out, u)
		}
	}
	return out, nil
}

func TestDuePageFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return duePageFirst{m} }), "Add", "Claim")
	requireCases(t, res, "Claim/DuePageOfDueRows")
	requireMessage(t, res, "Claim/DuePageOfDueRows", "Due(now 100ms, pending before 40ms, limit 2) = []; want [6 7]")
}
