package gateway_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// TestUpstreamOutcomeClaimIsNotPassedOn: an upstream's Tgrelay-Outcome on
// Telegram's success (a proxy, a hostile server, another gateway in front
// of Telegram) does not reach the app: an app that read "not-dispatched"
// or "throttled" would send again a message that went out.
func TestUpstreamOutcomeClaimIsNotPassedOn(t *testing.T) {
	t.Parallel()
	for _, claim := range []wire.Outcome{wire.OutcomeNotDispatched, wire.OutcomeThrottled, wire.OutcomeStale, wire.OutcomeRefused} {
		t.Run(string(claim), func(t *testing.T) {
			t.Parallel()
			tg := telegramtest.NewServer(telegramtest.Config{})
			t.Cleanup(tg.Close)
			chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
			if err != nil {
				t.Fatal(err)
			}
			answer := func(b []byte) []byte {
				return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nTgrelay-Outcome: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", claim, len(b), b)
			}
			g := newSQLiteGatewayAt(t, tg.Token, deliveringProxy(t, tg, answer, false), filepath.Join(t.TempDir(), "gw.db"))
			now := time.Now()
			if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
				t.Fatal(err)
			}
			id := g.claim(t, 1, now, time.Minute)
			r := receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, id)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
			if r.status != 200 || r.header.Get(wire.HeaderOutcome) != "" {
				t.Errorf("answer %d %s with outcome %q; want Telegram's 200 with no outcome of the gateway's", r.status, r.body, r.header.Get(wire.HeaderOutcome))
			}
		})
	}
}
