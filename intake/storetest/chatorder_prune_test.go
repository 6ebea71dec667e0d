package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// pruneForgetsChat forgets a chat's order once a prune removed one of its
// rows, as a store that keeps each chat's rows apart for strict order and
// dropped a chat's remaining rows with its pruned one would: its strict
// claims of that chat's rows then take them as Claim does, out of order.
// Its listings are memstore's, which read every row.
type pruneForgetsChat struct {
	*memstore.Store
	mu     sync.Mutex
	chats  map[int64]string // the chat of each row recorded through Add
	forgot map[string]bool  // the chats a prune forgot
}

func (s *pruneForgetsChat) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	ok, err := s.Store.Add(ctx, u)
	if ok {
		s.mu.Lock()
		s.chats[u.UpdateID] = u.Chat
		s.mu.Unlock()
	}
	return ok, err
}

func (s *pruneForgetsChat) Prune(ctx context.Context, before time.Time) (int, error) {
	n, err := s.Store.Prune(ctx, before)
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, chat := range s.chats {
		if _, ok, gerr := s.Store.Get(ctx, id); gerr == nil && !ok && chat != "" {
			s.forgot[chat] = true
			delete(s.chats, id)
		}
	}
	return n, err
}

func (s *pruneForgetsChat) ClaimInOrder(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	s.mu.Lock()
	forgot := s.forgot[s.chats[id]]
	s.mu.Unlock()
	if forgot {
		return s.Store.ClaimAs(ctx, id, o, p)
	}
	return s.Store.ClaimInOrder(ctx, id, o, p)
}

func TestPruneForgetsChatFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &pruneForgetsChat{Store: m, chats: map[int64]string{}, forgot: map[string]bool{}}
	}), "ChatOrder/PruneKeepsChatHeld")
	requireCases(t, res, "ChatOrder/PruneKeepsChatHeld")
	requireMessage(t, res, "ChatOrder/PruneKeepsChatHeld", "ClaimInOrder(4, now 50ms) = attempt 1, true; want false")
	requireMessage(t, res, "ChatOrder/PruneKeepsChatHeld", "ClaimInOrder(3, now 50ms) = attempt 1, true; want false")
}
