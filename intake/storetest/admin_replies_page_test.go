package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// repliesPageFirst cuts a Replies page before it applies the filters, as a
// query with its LIMIT on the journal and the conditions applied after
// would: the page is the newest entries (below the cursor), and of it only
// those the filters select are listed.
type repliesPageFirst struct{ *memstore.Store }

func (s repliesPageFirst) Replies(ctx context.Context, q intake.ReplyQuery) ([]intake.Reply, error) {
	page, err := s.Store.Replies(ctx, intake.ReplyQuery{Before: q.Before, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	matching, err := s.Store.Replies(ctx, intake.ReplyQuery{Outcomes: q.Outcomes, Method: q.Method, Chat: q.Chat, Since: q.Since, Until: q.Until, Before: q.Before, Limit: 1000})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(page, func(r intake.Reply) bool {
		return !slices.ContainsFunc(matching, func(m intake.Reply) bool { return m.Key() == r.Key() })
	}), nil
}

func TestRepliesPageFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return repliesPageFirst{m} }), "Admin")
	requireCases(t, res, "Admin/RepliesPageOfMatches")
	requireMessage(t, res, "Admin/RepliesPageOfMatches", "Replies(method sendMessage, limit 1) = []; want [2/sendMessage]")
}
