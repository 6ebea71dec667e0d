package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// searchPageFirst cuts a Search page before it applies the filters, as a
// query with its LIMIT on the rows and the conditions applied after would:
// the page is the newest rows (below the cursor), and of it only those the
// filters select are listed.
type searchPageFirst struct{ *memstore.Store }

func (s searchPageFirst) Search(ctx context.Context, q intake.SearchQuery) ([]intake.Row, error) {
	page, err := s.Store.Search(ctx, intake.SearchQuery{Before: q.Before, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	all := q
	all.Limit = 1000
	matching, err := s.Store.Search(ctx, all)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(page, func(r intake.Row) bool {
		return !slices.ContainsFunc(matching, func(m intake.Row) bool { return m.UpdateID == r.UpdateID })
	}), nil
}

func TestSearchPageFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return searchPageFirst{m} }), "Admin")
	requireCases(t, res, "Admin/SearchPageOfMatches", "Admin/Inspect")
	requireMessage(t, res, "Admin/SearchPageOfMatches", "Search(state failed, limit 1) = []; want [1]")
	requireMessage(t, res, "Admin/Inspect", "Search chat: 5,3, want 5,3,1")
}
