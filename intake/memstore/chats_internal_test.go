package memstore

import (
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// TestChatsFollowTheRows: the rows kept by chat for strict order are the
// stored rows of that chat, no more: a pruned row leaves its chat, and a
// chat without rows is forgotten, so a long run does not keep every chat
// it ever saw.
func TestChatsFollowTheRows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := New()
	for id, chat := range map[int64]string{1: "a", 2: "a", 3: "b", 4: ""} {
		if _, err := s.Add(ctx, intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: t0, Chat: chat}); err != nil {
			t.Fatal(err)
		}
	}
	complete := func(id int64) {
		t.Helper()
		got, ok, err := s.Claim(ctx, id, intake.ClaimOpts{Now: t0, LeaseUntil: t0.Add(time.Minute), MaxAttempts: 3})
		if err != nil || !ok {
			t.Fatalf("claim %d: %v, %v", id, ok, err)
		}
		if ok, err := s.Settle(ctx, got, intake.Settlement{State: intake.StateCompleted, At: t0}); err != nil || !ok {
			t.Fatalf("settle %d: %v, %v", id, ok, err)
		}
	}
	complete(1)
	complete(3)
	complete(4)
	if n, err := s.Prune(ctx, t0.Add(time.Second)); err != nil || n != 3 {
		t.Fatalf("Prune = %d, %v; want 3", n, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.chats) != 1 || len(s.chats["a"]) != 1 || s.chats["a"][2] == nil {
		t.Errorf("chats after the prune: %v; want chat a holding row 2 alone", s.chats)
	}
}
