package telegramtest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

func TestRateLimits(t *testing.T) {
	t.Parallel()
	send := func(t *testing.T, srv *telegramtest.Server, chat int64) answer {
		t.Helper()
		return call(t, srv, "sendMessage", map[string]any{"chat_id": chat, "text": "x"})
	}
	t.Run("per chat", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		f := setup(t, telegramtest.Config{NowFunc: clk.Now})
		// The default allows a burst of 5, then one per second on average.
		for range telegramtest.DefaultChatLimitCount {
			wantOK(t, send(t, f.srv, f.chat.ID))
		}
		a := send(t, f.srv, f.chat.ID)
		wantError(t, a, 429, "Too Many Requests: retry after 5")
		if a.Parameters.RetryAfter != 5 {
			t.Errorf("retry_after = %d", a.Parameters.RetryAfter)
		}
		clk.Advance(4999 * time.Millisecond)
		wantError(t, send(t, f.srv, f.chat.ID), 429, "Too Many Requests: retry after 1")
		clk.Advance(time.Millisecond)
		wantOK(t, send(t, f.srv, f.chat.ID))
		if n := len(f.srv.Messages()); n != 6 {
			t.Errorf("ledger has %d messages, want 6 (refused sends have no effect)", n)
		}
	})
	t.Run("per bot", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		srv := newServer(t, telegramtest.Config{NowFunc: clk.Now, Limits: telegramtest.Limits{Bot: telegramtest.Limit{Count: 3, Per: time.Second}}})
		var chats []int64
		for range 4 {
			u := srv.NewUser("u")
			c, _ := srv.NewPrivateChat(u)
			chats = append(chats, c.ID)
		}
		for _, c := range chats[:3] {
			wantOK(t, send(t, srv, c))
			clk.Advance(100 * time.Millisecond)
		}
		// The window started 300 ms ago: 700 ms left, rounded up to 1 s.
		wantError(t, send(t, srv, chats[3]), 429, "Too Many Requests: retry after 1")
		clk.Advance(700 * time.Millisecond)
		wantOK(t, send(t, srv, chats[3]))
	})
	t.Run("per group", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		srv := newServer(t, telegramtest.Config{NowFunc: clk.Now})
		u := srv.NewUser("u")
		g, _ := srv.NewSupergroup("Team chat", u)
		for range 20 {
			wantOK(t, send(t, srv, g.ID))
			clk.Advance(time.Second) // the per-chat limit allows one per second
		}
		// 20 sent in the last 20 s: the first leaves the minute in 40 s.
		wantError(t, send(t, srv, g.ID), 429, "Too Many Requests: retry after 40")
		clk.Advance(40 * time.Second)
		wantOK(t, send(t, srv, g.ID))
	})
	t.Run("set and disable at run time", func(t *testing.T) {
		t.Parallel()
		clk := newClock()
		f := setup(t, telegramtest.Config{NowFunc: clk.Now})
		wantOK(t, send(t, f.srv, f.chat.ID))
		if err := f.srv.SetLimits(telegramtest.Limits{Disabled: true}); err != nil {
			t.Fatal(err)
		}
		wantOK(t, send(t, f.srv, f.chat.ID))
		if err := f.srv.SetLimits(telegramtest.Limits{Chat: telegramtest.Limit{Count: 1, Per: time.Minute}}); err != nil {
			t.Fatal(err)
		}
		wantError(t, send(t, f.srv, f.chat.ID), 429, "Too Many Requests: retry after 60")
		if err := f.srv.SetLimits(telegramtest.Limits{Chat: telegramtest.Limit{Count: -1}}); err != nil {
			t.Fatal(err)
		}
		wantOK(t, send(t, f.srv, f.chat.ID))
		if err := f.srv.SetLimits(telegramtest.Limits{Bot: telegramtest.Limit{Count: 5}}); err == nil {
			t.Error("SetLimits with Count but no Per succeeded")
		}
	})
}

func TestLedgerUnderConcurrentSends(t *testing.T) {
	t.Parallel()
	srv := newServer(t, noLimits())
	const workers, each = 8, 20
	chats := make([]telegramtest.Chat, workers)
	for i := range chats {
		chats[i], _ = srv.NewPrivateChat(srv.NewUser("u"))
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				a, err := tryCall(t.Context(), srv, "sendMessage", map[string]any{"chat_id": chats[w].ID, "text": "msg " + string(rune('A'+i))})
				if err != nil || !a.OK {
					t.Errorf("send: %v %q", err, a.Description)
				}
				_ = srv.Messages() // snapshots taken while sending
			}
		}()
	}
	wg.Wait()
	msgs := srv.Messages()
	if len(msgs) != workers*each {
		t.Fatalf("ledger has %d messages, want %d", len(msgs), workers*each)
	}
	type key struct{ chat, id int64 }
	seen := map[key]bool{}
	for _, m := range msgs {
		k := key{m.ChatID, m.MessageID}
		if seen[k] {
			t.Errorf("message id %d used twice in chat %d", m.MessageID, m.ChatID)
		}
		seen[k] = true
	}
	if r := srv.Repeats(); len(r) != 0 {
		t.Errorf("Repeats = %+v, want none", r)
	}
	call(t, srv, "sendMessage", map[string]any{"chat_id": chats[0].ID, "text": "msg A"})
	r := srv.Repeats()
	if len(r) != 1 || r[0] != (telegramtest.TextCount{ChatID: chats[0].ID, Text: "msg A", Count: 2}) {
		t.Errorf("Repeats = %+v, want chat %d \"msg A\" twice", r, chats[0].ID)
	}
	if got := srv.MessagesTo(chats[1].ID); len(got) != each {
		t.Errorf("MessagesTo = %d messages", len(got))
	}
}
