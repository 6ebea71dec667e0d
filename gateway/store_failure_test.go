package gateway_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// TestStoreFailureSendsNothing: when the store cannot check an attempt's
// lease (here its database is closed under the gateway), a fenced call is
// answered 503 not dispatched and nothing is sent: a read-only call, whose
// lease is only checked, as a journaled one, whose intent cannot be
// recorded. A failing store is not a lost lease (409), nor a reason to
// send unfenced.
func TestStoreFailureSendsNothing(t *testing.T) {
	t.Parallel()
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	g := newSQLiteGatewayAt(t, tg.Token, tg.URL, filepath.Join(t.TempDir(), "gw.db"))
	now := time.Now()
	if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id := g.claim(t, 1, now, time.Minute)
	if err := g.st.Close(); err != nil {
		t.Fatal(err)
	}
	root := attemptRoot(g.srv.URL, id) + "/bot" + tg.Token
	for _, method := range []string{"getChat", "sendMessage"} {
		r := receive(t, goSend(t.Context(), root+"/"+method, chat.ID, "fenced"))
		if r.status != gateway.StatusNotDispatched || r.header.Get(wire.HeaderOutcome) != string(wire.OutcomeNotDispatched) {
			t.Errorf("%s with the store down = %d %s (outcome %q); want 503 not dispatched", method, r.status, r.body, r.header.Get(wire.HeaderOutcome))
		}
	}
	if calls := tg.Calls(); calls["getChat"]+calls["sendMessage"] != 0 {
		t.Errorf("Telegram got %v with the store down; want nothing", calls)
	}
}
