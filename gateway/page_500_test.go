package gateway_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// TestNonTelegram500IsUnknown: a 500 that is not Telegram's JSON (a
// proxy's page in front of a call that arrived) is answered unknown, 502,
// as every 5xx page is, and the next attempt's identical call is answered
// unknown from the journal: the page is not passed on as Telegram's answer.
func TestNonTelegram500IsUnknown(t *testing.T) {
	t.Parallel()
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	page := func([]byte) []byte {
		body := "<html>internal error</html>"
		return fmt.Appendf(nil, "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	g := newSQLiteGatewayAt(t, tg.Token, deliveringProxy(t, tg, page, false), filepath.Join(t.TempDir(), "gw.db"))
	now := time.Now()
	if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	first := g.claim(t, 1, now, time.Minute)
	r := receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, first)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
	if r.status != gateway.StatusUnknown || r.header.Get(wire.HeaderOutcome) != string(wire.OutcomeUnknown) {
		t.Errorf("a 500 page = %d %s (outcome %q); want 502 unknown", r.status, r.body, r.header.Get(wire.HeaderOutcome))
	}
	next := retryAttempt(t, g.st, first)
	r = receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, next)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
	if r.status != gateway.StatusUnknown || r.header.Get(gateway.HeaderReplayed) != "true" {
		t.Errorf("the next attempt's call = %d %s (replayed %q); want unknown, replayed", r.status, r.body, r.header.Get(gateway.HeaderReplayed))
	}
	if n := countText(tg, chat.ID, "the reply"); n != 1 {
		t.Errorf("the chat got the reply %d times; want once", n)
	}
}
