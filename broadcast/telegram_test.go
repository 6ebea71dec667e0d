package broadcast

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// fakeTelegram starts a telegramtest server with n private chats and returns
// it, a client for it and the chats' ids.
func fakeTelegram(t *testing.T, cfg telegramtest.Config, n int) (*telegramtest.Server, *botapi.Client, []int64) {
	t.Helper()
	srv := telegramtest.NewServer(cfg)
	t.Cleanup(srv.Close)
	c, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client()})
	must(t, err)
	chats := make([]int64, n)
	for i := range chats {
		ch, err := srv.NewPrivateChat(srv.NewUser("u"))
		must(t, err)
		chats[i] = ch.ID
	}
	return srv, c, chats
}

func textSender(t *testing.T, c *botapi.Client, text string) func(context.Context, Recipient) error {
	t.Helper()
	send, err := Sender(c, Message{Text: text, ParseMode: "HTML"})
	must(t, err)
	return send
}

// A broadcast over real HTTP: blocked and deactivated users are unreachable,
// a migrated group gets the message at its new id, everyone else exactly
// once, as the fake's ledger shows.
func TestBroadcastAgainstFakeTelegram(t *testing.T) {
	t.Parallel()
	srv, c, chats := fakeTelegram(t, telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}}, 10)
	// A private chat's id is its user's id.
	must(t, srv.SetBlocked(telegramtest.User{ID: chats[2]}, true))
	must(t, srv.Deactivate(telegramtest.User{ID: chats[5]}))
	group, err := srv.NewGroup("g", srv.NewUser("m"))
	must(t, err)
	super, err := srv.UpgradeGroup(group)
	must(t, err)

	const text = "<b>hello</b> everyone"
	cfg := Config{
		Name: "e2e", Dir: t.TempDir(), Rate: 500, Concurrency: 4,
		AudienceFunc: func(context.Context) ([]Recipient, error) { return ids(append(chats, group.ID)...), nil },
		SendFunc:     textSender(t, c, text),
	}
	rep := run(t, cfg)
	wantCounts(t, rep, StateFinished, 9, 2, 0, 0, 0)
	if rep.Migrated != 1 {
		t.Fatalf("migrated %d", rep.Migrated)
	}
	if r := srv.Repeats(); len(r) != 0 {
		t.Fatalf("repeats %v", r)
	}
	got := map[int64]int{}
	for _, m := range srv.Messages() {
		got[m.ChatID]++
		if m.Text != text {
			t.Fatalf("text %q", m.Text)
		}
	}
	for i, id := range chats {
		want := 1
		if i == 2 || i == 5 {
			want = 0
		}
		if got[id] != want {
			t.Errorf("chat %d received %d, want %d", id, got[id], want)
		}
	}
	if got[super.ID] != 1 {
		t.Errorf("supergroup received %d", got[super.ID])
	}
}

// A connection dropped after Telegram applied the send is uncertain: the
// run halts, and the resume never resends it, so the chat has it once.
func TestDropAfterEffectIsNotResent(t *testing.T) {
	t.Parallel()
	srv, c, chats := fakeTelegram(t, telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}}, 5)
	must(t, srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect, Nth: 3}))
	cfg := Config{
		Name: "drop", Dir: t.TempDir(), Rate: 500, Concurrency: 1,
		AudienceFunc: func(context.Context) ([]Recipient, error) { return ids(chats...), nil },
		SendFunc:     textSender(t, c, "hi"),
	}
	rep := run(t, cfg)
	wantCounts(t, rep, StateHalted, 2, 0, 0, 1, 2)
	rep = run(t, cfg)
	wantCounts(t, rep, StateFinished, 4, 0, 0, 1, 0)
	for _, id := range chats {
		if n := len(srv.MessagesTo(id)); n != 1 {
			t.Errorf("chat %d received %d", id, n)
		}
	}
}

// The fake's bot-wide limit answers 429 with retry_after; the run pauses
// every sender and still delivers each chat exactly once.
func TestFakeRateLimitPausesAndDelivers(t *testing.T) {
	t.Parallel()
	srv, c, chats := fakeTelegram(t, telegramtest.Config{}, 12)
	cfg := Config{
		Name: "limited", Dir: t.TempDir(), Rate: 1000, Concurrency: 8, MaxAttempts: 10,
		AudienceFunc: func(context.Context) ([]Recipient, error) { return ids(chats...), nil },
		SendFunc:     textSender(t, c, "hi"),
	}
	must(t, srv.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, Nth: 4, RetryAfter: 1}))
	rep := run(t, cfg)
	wantCounts(t, rep, StateFinished, 12, 0, 0, 0, 0)
	for _, id := range chats {
		if n := len(srv.MessagesTo(id)); n != 1 {
			t.Errorf("chat %d received %d", id, n)
		}
	}
}

// Reference 5.3 case 11: the copy sender posts chat_id, from_chat_id and
// message_id.
func TestCopySender(t *testing.T) {
	t.Parallel()
	srv, c, chats := fakeTelegram(t, telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}}, 2)
	src := chats[0]
	send0, err := Sender(c, Message{Text: "prepared"})
	must(t, err)
	must(t, send0(t.Context(), ChatID(src)))
	msgs := srv.MessagesTo(src)
	if len(msgs) != 1 {
		t.Fatalf("prepared message: %v", msgs)
	}
	send, err := Sender(c, Message{FromChatID: src, MessageID: msgs[0].MessageID})
	must(t, err)
	must(t, send(t.Context(), ChatID(chats[1])))
	got := srv.MessagesTo(chats[1])
	if len(got) != 1 || got[0].Method != "copyMessage" || got[0].Text != "prepared" {
		t.Fatalf("copied: %+v", got)
	}
}

func TestSenderValidates(t *testing.T) {
	t.Parallel()
	c, err := botapi.New("123:abc", botapi.Config{APIRoot: "http://127.0.0.1:1"})
	must(t, err)
	bad := []Message{
		{},
		{Text: "a < b", ParseMode: "HTML"},
		{Text: "x", ParseMode: "Markdown"},
		{Text: strings.Repeat("a", 4097)},
		{Text: "<b></b>", ParseMode: "HTML"},
		{Text: "x", MessageID: 1, FromChatID: 1},
		{MessageID: 1},
	}
	for _, m := range bad {
		if _, err := Sender(c, m); !errors.Is(err, ErrInvalidMessage) {
			t.Errorf("Sender(%+v) = %v", m, err)
		}
	}
	if _, err := Sender(c, Message{Text: strings.Repeat("a", 4096)}); err != nil {
		t.Errorf("4096 units refused: %v", err)
	}
}
