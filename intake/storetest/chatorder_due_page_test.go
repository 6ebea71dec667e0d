package storetest

import (
	"context"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// chatPageFirst cuts a strict listing's page before it keeps one chat's
// rows, as a query with its LIMIT before the chat condition would: the
// page is the strict listing of every chat, and of it only the chat's rows
// are listed.
type chatPageFirst struct{ *memstore.Store }

func (s chatPageFirst) DueInOrder(ctx context.Context, q intake.DueQuery, chat string) ([]intake.StoredUpdate, error) {
	page, err := s.Store.DueInOrder(ctx, q, "")
	if err != nil || chat == "" {
		return page, err
	}
	ofChat, err := s.Search(ctx, intake.SearchQuery{Chat: chat, Limit: 1000})
	if err != nil {
		return nil, err
	}
	in := map[int64]bool{}
	for _, r := range ofChat {
		in[r.UpdateID] = true
	}
	var out []intake.StoredUpdate
	for _, u := range page {
		if in[u.UpdateID] {
			out = append(out, u)
		}
	}
	return out, nil
}

func TestChatPageFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return chatPageFirst{m} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/DueChatPage")
	requireMessage(t, res, "ChatOrder/DueChatPage", `DueInOrder(now 10ms, limit 1, chat "a") = []; want [5]`)
}
