package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestServeDeadlineCallbackQuery runs serve with its defaults against the
// fake Bot API: a user's message the app keeps failing holds its chat
// (its retry is an hour away), yet the user's button press in that chat
// is forwarded at once. The app fails that too; no retry can come before
// its 15 s deadline, so it ends expired at once: counted in
// tgrelay_updates_expired_total, not an exhaustion, and shown as expired
// by 'tgrelay updates'.
func TestServeDeadlineCallbackQuery(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	u, chat := serveAnnChat(t, srv)
	buttonMsg := serveSendButton(t, srv, chat, "Go?", "Go", "go")
	msg, err := srv.SendText(chat, u, "hello")
	if err != nil {
		t.Fatal(err)
	}
	ep := newBotEndpoint(t, func(int64, int) (int, string) { return http.StatusInternalServerError, "" })
	db := filepath.Join(t.TempDir(), "relay.db")
	r := startServeProc(t, nil, "--token", srv.Token, "--api-root", srv.URL, "--db", db,
		"--poll", "--poll-timeout", "1s", "--forward", ep.url(), "--admin-listen", "127.0.0.1:0",
		"--backoff-base", "1h", "--sweep-interval", "50ms")
	serveWaitFor(t, "the message to fail", func() bool { return len(ep.hitsOf(msg.ID)) == 1 }, r)
	var press telegramtest.Update
	if press, err = srv.PressButton(chat, u, buttonMsg, "go"); err != nil {
		t.Fatal(err)
	}
	serveWaitFor(t, "the callback query to expire", func() bool {
		return scrapeMetric(t, r.admin, `tgrelay_updates_expired_total{type="callback_query"}`) == 1
	}, r)
	if n := len(ep.hitsOf(press.ID)); n != 1 {
		t.Errorf("callback query forwarded %d times, want once", n)
	}
	if n := len(ep.hitsOf(msg.ID)); n != 1 {
		t.Errorf("message forwarded %d times, want once (its retry is an hour away)", n)
	}
	for series, want := range map[string]float64{
		"tgrelay_exhaustions_total":                                0,
		`tgrelay_updates_expired_total{type="pre_checkout_query"}`: 0,
		`tgrelay_settlements_total{state="failed"}`:                1,
	} {
		if got := scrapeMetric(t, r.admin, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if n := len(r.logLines("relay: update expired: its deadline passed unanswered; not an exhaustion")); n != 1 {
		t.Errorf("%d expiry log lines, want 1; stderr:\n%s", n, r.stderr)
	}
	if n := len(r.logLines("relay: forward failed; the update is given up")); n != 0 {
		t.Errorf("%d 'given up' error lines, want none for an expiry", n)
	}

	out, err := runUpdatesCapture(t, "ls", "--db", db, "--state", "expired")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[1], strconv.FormatInt(press.ID, 10)+" ") || !strings.Contains(lines[1], " expired ") {
		t.Errorf("ls --state expired:\n%s\nwant the callback query alone, expired", out)
	}
	out, err = runUpdatesCapture(t, "show", "--db", db, strconv.FormatInt(press.ID, 10))
	if err != nil || !strings.Contains(out, "expired (its deadline passed before the app answered; not an exhaustion)") {
		t.Errorf("show: %v\n%s", err, out)
	}
	out, err = runUpdatesCapture(t, "ls", "--db", db, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []rowJSON
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatal(err)
	}
	states := map[int64]string{}
	for _, row := range rows {
		states[row.UpdateID] = row.State
	}
	if states[press.ID] != "expired" || states[msg.ID] != "failed" {
		t.Errorf("ls --json states %v, want the callback query expired and the message failed", states)
	}
	if _, err := runUpdatesCapture(t, "requeue", "--db", db, strconv.FormatInt(press.ID, 10)); err == nil || !strings.Contains(err.Error(), "expire again at once") {
		t.Errorf("requeue of an expired update: %v, want a refusal", err)
	}
}

// TestServeHelpDeadlines: help serve documents the deadline flags.
func TestServeHelpDeadlines(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if code := run(t.Context(), []string{"help", "serve"}, &out, &out); code != 0 {
		t.Fatalf("help serve exited %d:\n%s", code, &out)
	}
	for _, want := range []string{"-deadline-callback-query", "-deadline-inline-query", "-deadline-pre-checkout-query",
		"-deadline-shipping-query", "-deadline-concurrency", "tgrelay_updates_expired_total{type}", `ends
"expired"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help serve lacks %q", want)
		}
	}
}

// serveAnnChat is a user, Ann, and her private chat with the bot.
func serveAnnChat(t *testing.T, srv *telegramtest.Server) (telegramtest.User, telegramtest.Chat) {
	t.Helper()
	u := srv.NewUser("Ann")
	chat, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	return u, chat
}

// serveSendButton has the bot send text to chat with one inline button
// (label, callback data) and returns the message's id.
func serveSendButton(t *testing.T, srv *telegramtest.Server, chat telegramtest.Chat, text, label, data string) int64 {
	t.Helper()
	raw, err := serveBotClient(t, srv).Call(t.Context(), "sendMessage", map[string]any{"chat_id": chat.ID, "text": text,
		"reply_markup": map[string]any{"inline_keyboard": [][]map[string]string{{{"text": label, "callback_data": data}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var sent struct {
		MessageID int64 `json:"message_id"`
	}
	if err := json.Unmarshal(raw, &sent); err != nil {
		t.Fatal(err)
	}
	return sent.MessageID
}
