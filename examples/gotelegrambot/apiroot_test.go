package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-telegram/bot"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// TestAnnouncedRootAsServerURL: go-telegram/bot given the Tgrelay-Api-Root
// header exactly as a forward delivers it (bot.WithServerURL) makes its
// calls as that attempt's, through tgrelay's gateway: the message is sent,
// journaled under the attempt, and the same bot's call once the update was
// claimed again is refused as stale.
func TestAnnouncedRootAsServerURL(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ada"))
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	tr, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Token: tg.Token, APIRoot: tg.URL, Transport: tr, Store: store, OwnsIntake: true})
	if err != nil {
		t.Fatal(err)
	}
	gwSrv := httptest.NewServer(gw)
	t.Cleanup(gwSrv.Close)

	now := time.Now()
	if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: 7, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := store.Claim(t.Context(), 7, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	roots := make(chan string, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		roots <- r.Header.Get(wire.HeaderAPIRoot)
	}))
	t.Cleanup(app.Close)
	fw, err := forward.New(forward.Config{URL: app.URL, APIRoot: gwSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Handle(t.Context(), intake.Update{ID: 7, Body: []byte(`{"update_id":7}`)}, intake.Attempt{Identity: id}); err != nil {
		t.Fatal(err)
	}
	root := <-roots

	b, err := bot.New(tg.Token, bot.WithServerURL(root), bot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: chat.ID, Text: "through the root"}); err != nil {
		t.Fatalf("SendMessage under %s: %v", root, err)
	}
	if got := texts(tg.MessagesTo(chat.ID)); fmt.Sprint(got) != "[through the root]" {
		t.Errorf("the chat holds %q", got)
	}
	journal, err := store.Journal(t.Context(), 7)
	if err != nil || len(journal) != 1 || journal[0].Method != "sendMessage" || journal[0].ClaimID != id.ClaimID {
		t.Errorf("journal = %+v, %v; want the sendMessage of attempt %+v", journal, err, id)
	}

	ok, err = store.Settle(t.Context(), id, intake.Settlement{State: intake.StateFailed, At: now, RetryAt: now, Error: "retry"})
	if err != nil || !ok {
		t.Fatalf("settle: %v %v", ok, err)
	}
	if _, ok, err := store.Claim(t.Context(), 7, intake.ClaimOpts{Now: time.Now(), LeaseUntil: time.Now().Add(time.Minute), MaxAttempts: 5}); err != nil || !ok {
		t.Fatalf("claim again: %v %v", ok, err)
	}
	if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: chat.ID, Text: "stale"}); err == nil {
		t.Error("the stale attempt's call succeeded; want a refusal")
	}
	if n := len(tg.MessagesTo(chat.ID)); n != 1 {
		t.Errorf("the stale call reached the chat")
	}
}
