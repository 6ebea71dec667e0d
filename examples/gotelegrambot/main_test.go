package main

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-telegram/bot"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

const secret = "webhook-secret"

// start runs the bot against a telegramtest server, by webhook, and returns
// the server, the bot and a private chat with a user.
func start(t *testing.T, unsafeAsync bool) (*telegramtest.Server, *App, telegramtest.Chat, telegramtest.User) {
	t.Helper()
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	app, err := New(t.Context(), Config{Token: tg.Token, APIRoot: tg.URL, DB: filepath.Join(t.TempDir(), "bot.db"), Secret: secret, unsafeAsync: unsafeAsync})
	if err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(app.Webhook)
	t.Cleanup(func() {
		hook.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := app.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	if err := app.Runner.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Bot.SetWebhook(t.Context(), &bot.SetWebhookParams{URL: hook.URL, SecretToken: secret}); err != nil {
		t.Fatal(err)
	}
	user := tg.NewUser("Ada")
	chat, err := tg.NewPrivateChat(user)
	if err != nil {
		t.Fatal(err)
	}
	return tg, app, chat, user
}

func texts(ms []telegramtest.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Text)
	}
	return out
}

// Updates are echoed in order, each once.
func TestEchoInOrder(t *testing.T) {
	tg, _, chat, user := start(t, false)
	for _, text := range []string{"one", "two", "three"} {
		if _, err := tg.SendText(chat, user, text); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := tg.WaitMessages(t.Context(), chat.ID, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(ms), ","); got != "echo: one,echo: two,echo: three" {
		t.Fatalf("chat got %q", got)
	}
}

// A 429 is retried after Telegram's retry_after, and "two" waits for "one".
func TestRateLimitedSendIsRetriedInOrder(t *testing.T) {
	tg, _, chat, user := start(t, false)
	if err := tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 1}); err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"one", "two"} {
		if _, err := tg.SendText(chat, user, text); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := tg.WaitMessages(t.Context(), chat.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(texts(ms), ","); got != "echo: one,echo: two" {
		t.Fatalf("chat got %q, want one before two", got)
	}
}

// A send whose answer was lost after Telegram acted on it is not repeated:
// the user gets one message and the update is a dead letter saying so.
func TestUnknownOutcomeIsNotRepeated(t *testing.T) {
	tg, app, chat, user := start(t, false)
	if err := tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect}); err != nil {
		t.Fatal(err)
	}
	u, err := tg.SendText(chat, user, "once")
	if err != nil {
		t.Fatal(err)
	}
	row := settled(t, tg, app, u.ID)
	if row.State != intake.StateAbandoned || !strings.Contains(row.Error, "outcome unknown") {
		t.Fatalf("update = %q %q, want a dead letter whose reason says the outcome is unknown", row.State, row.Error)
	}
	if n := len(tg.MessagesTo(chat.ID)); n != 1 {
		t.Fatalf("chat got %d messages, want exactly 1", n)
	}
}

// The trap: without WithNotAsyncHandlers the handler runs after the runner
// completed the update, so its failed send is never retried.
func TestAsyncHandlersLoseAFailedSend(t *testing.T) {
	tg, app, chat, user := start(t, true)
	// The 429 answers a second late. The handler returns as soon as
	// go-telegram/bot has started its goroutine, so the runner completes the
	// update long before the send fails: the order the trap describes, made
	// certain. (With no delay the send sometimes fails before the handler
	// returns, its error is reported in time, and the update is retried.)
	trap := telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 1, Delay: time.Second}
	if err := tg.Arm(trap); err != nil {
		t.Fatal(err)
	}
	u, err := tg.SendText(chat, user, "lost")
	if err != nil {
		t.Fatal(err)
	}
	row := settled(t, tg, app, u.ID)
	if err := tg.WaitSettled(t.Context()); err != nil {
		t.Fatal(err)
	}
	if row.State != intake.StateCompleted || row.Attempts != 1 || len(tg.MessagesTo(chat.ID)) != 0 {
		t.Fatalf("update %q after %d attempts, %d messages: want completed at once and the reply lost (the trap)",
			row.State, row.Attempts, len(tg.MessagesTo(chat.ID)))
	}
}

// settled waits until the update was delivered and its handling ran, and
// returns its row.
func settled(t *testing.T, tg *telegramtest.Server, app *App, id int64) intake.Row {
	t.Helper()
	if err := tg.WaitIdle(t.Context()); err != nil { // delivered: recorded by the webhook
		t.Fatal(err)
	}
	if err := app.Runner.Idle(t.Context()); err != nil { // handled
		t.Fatal(err)
	}
	row, ok, err := app.store.Get(t.Context(), id)
	if err != nil || !ok {
		t.Fatalf("update %d: %v, %v", id, ok, err)
	}
	return row
}
