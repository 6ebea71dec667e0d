package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
)

// TestThrottledClient: go-telegram/bot with throttle's transport as its
// http.Client keeps Telegram's limits. The limiter's default burst (3 per
// 3 s) meets a server that allows none (telegramtest's 1/s per chat), so
// Telegram answers 429 (the server is held to one send per second per chat,
// no burst); go-telegram/bot sends multipart bodies from a
// bytes.Buffer, which the transport can replay, so each 429 is retried
// after its retry_after and the library never sees one. Order is kept.
func TestThrottledClient(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Chat: telegramtest.Limit{Count: 1, Per: time.Second}}})
	defer tg.Close()
	chat, err := tg.NewPrivateChat(tg.NewUser("Ada"))
	if err != nil {
		t.Fatal(err)
	}
	var limited int
	l, err := throttle.New(throttle.Config{Observer: throttle.Observer{EventFunc: func(e throttle.Event) {
		if e.Kind == throttle.EventTooManyRequests {
			limited++ // one sender goroutine: no race
		}
	}}})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: throttle.NewTransport(l, nil), Timeout: time.Minute}
	b, err := bot.New(tg.Token, bot.WithServerURL(tg.URL), bot.WithHTTPClient(time.Minute, client), bot.WithSkipGetMe())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: chat.ID, Text: fmt.Sprint(i)}); err != nil {
			t.Fatalf("send %d: %v (a 429 reached the library)", i, err)
		}
	}
	if limited == 0 {
		t.Error("the server never answered 429: the retry path was not exercised")
	}
	msgs := tg.MessagesTo(chat.ID)
	if len(msgs) != 3 {
		t.Fatalf("chat received %d messages, want 3", len(msgs))
	}
	for i, m := range msgs {
		if m.Text != fmt.Sprint(i) {
			t.Fatalf("message %d is %q: order not kept", i, m.Text)
		}
	}
}
