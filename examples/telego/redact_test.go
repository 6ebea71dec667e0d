package main

import (
	"bytes"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// realToken has the shape of a token BotFather gives.
const realToken = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// closedRoot returns a Bot API root on a loopback port nothing listens on.
func closedRoot(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// noToken fails when text shows the token or its secret half.
func noToken(t *testing.T, what, text, token string) {
	t.Helper()
	_, half, _ := strings.Cut(token, ":")
	if strings.Contains(text, token) || strings.Contains(text, half) {
		t.Errorf("%s shows the token: %s", what, text)
	}
}

// telego's own error for a send to a Bot API that is down quotes the
// request URL, and so the token. The bot returns it to the runner as it
// is; the row's stored error and the log carry it with the token masked,
// and still say what happened.
func TestTelegoErrorStoredWithoutToken(t *testing.T) {
	token := realToken
	var logs lockedBuffer
	app, err := New(t.Context(), Config{Token: token, APIRoot: closedRoot(t), DB: filepath.Join(t.TempDir(), "bot.db"),
		Secret: secret, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { app.Close(t.Context()) })
	if err := app.Runner.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"update_id":5,"message":{"message_id":1,"date":1,"chat":{"id":7,"type":"private"},"text":"hi"}}`)
	if _, err := app.Runner.Accept(t.Context(), body); err != nil {
		t.Fatal(err)
	}
	if err := app.Runner.Idle(t.Context()); err != nil {
		t.Fatal(err)
	}
	row, ok, err := app.store.Get(t.Context(), 5)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	t.Logf("stored error: %s", row.Error)
	if row.State != intake.StateFailed || !strings.Contains(row.Error, "telego: sendMessage") ||
		!strings.Contains(row.Error, "/sendMessage") || !strings.Contains(row.Error, "connection refused") {
		t.Errorf("row %s %q: want telego's failed send, its URL and its cause", row.State, row.Error)
	}
	id, _, _ := strings.Cut(token, ":")
	if !strings.Contains(row.Error, "/bot"+id+":[redacted]/sendMessage") {
		t.Errorf("row error %q: want the URL's token masked, its bot id kept", row.Error)
	}
	noToken(t, "the row's stored error", row.Error, token)
	noToken(t, "the log", logs.String(), token)
	if !strings.Contains(logs.String(), "attempt failed") {
		t.Errorf("the log lacks the failed attempt: %s", logs.String())
	}
}

// A send whose answer was lost after Telegram acted on it is given up at
// once: the exhaustion the runner keeps and the row's error carry telego's
// error (it quotes the request URL) with the token masked.
func TestTelegoExhaustionWithoutToken(t *testing.T) {
	tg, app, chat, user := start(t)
	if err := tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect}); err != nil {
		t.Fatal(err)
	}
	u, err := tg.SendText(chat, user, "once")
	if err != nil {
		t.Fatal(err)
	}
	row := settled(t, tg, app, u.ID)
	exh, err := app.store.DueExhaustions(t.Context(), intake.ExhaustionQuery{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(exh) != 1 || exh[0].UpdateID != u.ID {
		t.Fatalf("exhaustions %+v, want update %d", exh, u.ID)
	}
	t.Logf("exhaustion error: %s", exh[0].Error)
	for what, text := range map[string]string{"row error": row.Error, "exhaustion error": exh[0].Error} {
		if !strings.Contains(text, "telego: sendMessage") || !strings.Contains(text, "[redacted]/sendMessage") {
			t.Errorf("%s %q: want telego's error with its URL's token masked", what, text)
		}
		noToken(t, what, text, tg.Token)
	}
}
