package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// listPageFirst cuts a List page before it applies the filters, as a query
// with its LIMIT on the rows and the conditions applied after would: the
// page is the first rows after the cursor, and of it only those the
// filters select are listed.
type listPageFirst struct{ *memstore.Store }

func (s listPageFirst) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	page, err := s.Store.List(ctx, intake.ListQuery{After: q.After, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(page, func(r intake.Row) bool {
		return q.State != "" && r.State != q.State || q.Unacknowledged && !r.Unacknowledged()
	}), nil
}

func TestListPageFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return listPageFirst{m} }), "Admin")
	requireCases(t, res, "Admin/ListPageOfMatches")
	requireMessage(t, res, "Admin/ListPageOfMatches", "List(state failed, limit 1) = []; want [3]")
}
