package gateway_test

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// TestStopBetweenIntentAndSend: a gateway stops for good after recording
// an intent and before sending (a process killed there). Another gateway on
// the same SQLite file serves the update's next attempt: its identical call
// is answered unknown, never sent, and the chat has at most one message
// (here none: the first never left). (The real-binary kill -9 of serve is
// not part of this test.)
func TestStopBetweenIntentAndSend(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, _ := tg.NewPrivateChat(tg.NewUser("Ann"))
	path := filepath.Join(t.TempDir(), "gw.db")
	open := func() *sqlitestore.Store {
		st, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	newGateway := func(st *sqlitestore.Store, hook func(string)) *httptest.Server {
		tr, err := transport.New(transport.Config{})
		if err != nil {
			t.Fatal(err)
		}
		gw, err := gateway.New(gateway.Config{Token: tg.Token, APIRoot: tg.URL, Transport: tr, Store: st,
			Test: gateway.TestHooks{AfterIntent: hook}})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(gw)
		t.Cleanup(srv.Close)
		return srv
	}

	first := open()
	now := time.Now()
	first.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now})
	id, ok, err := first.Claim(t.Context(), 1, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(200 * time.Millisecond), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	stopped := make(chan struct{})
	dead := make(chan struct{})
	srvA := newGateway(first, func(string) { close(stopped); <-dead })
	f := &fixture{tg: tg, chat: chat, srv: srvA}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = httpPost(ctx, attemptRoot(srvA.URL, id)+"/bot"+tg.Token+"/sendMessage", chat.ID, "once")
	}()
	<-stopped // the intent is durable; the process "dies" here
	cancel()

	second := open()
	later := time.Now().Add(time.Second) // after the first lease
	next, ok, err := second.Claim(t.Context(), 1, intake.ClaimOpts{Now: later, LeaseUntil: later.Add(time.Hour), MaxAttempts: 3})
	if err != nil || !ok || next.Attempt != 2 {
		t.Fatalf("reclaim: %+v %v %v", next, ok, err)
	}
	srvB := newGateway(second, nil)
	f.srv = srvB
	r := f.post(t, attemptRoot("", next)+"/bot"+tg.Token+"/sendMessage", nil, map[string]any{"chat_id": chat.ID, "text": "once"})
	if r.status != gateway.StatusUnknown || r.header.Get(wire.HeaderOutcome) != "unknown" || r.header.Get(gateway.HeaderReplayed) != "true" {
		t.Errorf("the next attempt's identical call = %d %s (outcome %q, replayed %q); want unknown, replayed",
			r.status, r.body, r.header.Get(wire.HeaderOutcome), r.header.Get(gateway.HeaderReplayed))
	}
	if n := f.ledger("once"); n > 1 {
		t.Errorf("the chat got %d messages; want at most one", n)
	}
	if n := f.ledger("once"); n != 0 {
		t.Errorf("the chat got %d messages; the first never left and the second must not be sent", n)
	}
	close(dead)
	<-done
}
