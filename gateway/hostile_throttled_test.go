package gateway_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestUpstreamThrottledClaimNeedsTelegramsRefusal: an upstream's
// Tgrelay-Outcome: throttled is believed only on a 429 whose body is
// Telegram's refusal ({"ok":false,…}), which says the call was not acted
// on. On a 429 that is a proxy's page, or JSON without "ok", the call may
// have arrived: the first attempt's call is delivered and answered so, and
// the next attempt's identical call must not send the message again.
func TestUpstreamThrottledClaimNeedsTelegramsRefusal(t *testing.T) {
	t.Parallel()
	throttled429 := func(ct, body string) func([]byte) []byte {
		return func([]byte) []byte {
			return fmt.Appendf(nil, "HTTP/1.1 429 Too Many Requests\r\nTgrelay-Outcome: throttled\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", ct, len(body), body)
		}
	}
	for _, tc := range []struct {
		name   string
		answer func([]byte) []byte
	}{
		{"429 page claiming throttled", throttled429("text/html", "<html>slow down</html>")},
		{"429 ok-less json claiming throttled", throttled429("application/json", `{"error":"rate limited"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg := telegramtest.NewServer(telegramtest.Config{})
			t.Cleanup(tg.Close)
			chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
			if err != nil {
				t.Fatal(err)
			}
			g := newSQLiteGatewayAt(t, tg.Token, deliveringProxy(t, tg, tc.answer, false), filepath.Join(t.TempDir(), "gw.db"))
			now := time.Now()
			if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
				t.Fatal(err)
			}
			first := g.claim(t, 1, now, time.Minute)
			r := receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, first)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
			if n := countText(tg, chat.ID, "the reply"); n != 1 {
				t.Fatalf("the chat got the reply %d times after the first call (answered %d %s); want once", n, r.status, r.body)
			}
			next := retryAttempt(t, g.st, first)
			r = receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, next)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
			if n := countText(tg, chat.ID, "the reply"); n != 1 {
				t.Fatalf("the chat got the reply %d times (the next attempt's call answered %d %s); want exactly once", n, r.status, r.body)
			}
		})
	}
}
