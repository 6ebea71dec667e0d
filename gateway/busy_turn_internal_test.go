package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// takeAtTurn is a throttle transport that, before the first call it
// carries asks for its turn, makes the call's journal entry held by
// another call of the gateway (take): the call's gate then finds it busy
// at its turn.
type takeAtTurn struct {
	*throttle.Transport
	once sync.Once
	take func()
}

func (a *takeAtTurn) RoundTrip(req *http.Request) (*http.Response, error) {
	a.once.Do(a.take)
	return a.Transport.RoundTrip(req)
}

// TestBusyTurnIsNotATry: a turn a call gives back because an identical
// call of the gateway holds its entry sent nothing and is not one of its
// MaxSendTries tries: with a single try allowed, the call waits for the
// other, then sends at its next turn, and is answered Telegram's 200 in
// one try rather than 503 not dispatched.
func TestBusyTurnIsNotATry(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New()
	now := time.Now()
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 5, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := st.Claim(t.Context(), 5, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
	base, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"chat_id": chat.ID, "text": "after the other"})
	key := outcomeKey{id.UpdateID, intake.Call{Method: "sendMessage", ParamsHash: canonicalHash("application/json", queryParams(""), body, true), Occurrence: 1}}

	var g *Gateway
	var leave func()
	var waited atomic.Bool
	rt := &takeAtTurn{Transport: throttle.NewTransport(lim, base), take: func() { leave, _ = g.flight.take(key) }}
	events := make(chan CallEvent, 1)
	g, err = New(Config{Token: tg.Token, APIRoot: tg.URL, Store: st, Transport: rt, MaxSendTries: 1,
		Observer: Observer{CallFunc: func(e CallEvent) { events <- e }},
		// The other call ends as this one starts to wait for it.
		Test: TestHooks{OutcomeWait: func(string) { waited.Store(true); leave() }}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/bot"+tg.Token+"/sendMessage", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	wire.SetIdentity(req.Header, id.UpdateID, id.Attempt, id.ClaimID)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !waited.Load() {
		t.Fatalf("the call = %d (outcome %q), waited for the other %v; want Telegram's 200 after a wait", resp.StatusCode, resp.Header.Get(wire.HeaderOutcome), waited.Load())
	}
	if e := <-events; e.Tries != 1 {
		t.Errorf("the call took %d tries; want 1 (the busy turn is not one)", e.Tries)
	}
	if got := tg.MessagesTo(chat.ID); len(got) != 1 {
		t.Errorf("the chat got %d messages; want 1", len(got))
	}
}
