package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// TestCallCancelledWhileWaitingItsTurnIsNotDispatched: a fenced call whose
// context ends while it waits for its chat's turn never left: it is
// answered not dispatched, nothing is journaled (its intent would be
// recorded only at its turn), and the next attempt's identical call sends
// it (it is not answered unknown and lost).
func TestCallCancelledWhileWaitingItsTurnIsNotDispatched(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for i := range throttle.DefaultChatCount { // the chat's window: Telegram's 5 per 5 s
		if r := f.send(t, nil, fmt.Sprint("filler ", i)); r.status != 200 {
			t.Fatalf("filler %d answered %d", i, r.status)
		}
	}
	id := f.claim(t, 42)
	params := fmt.Appendf(nil, `{"chat_id":%d,"text":"the reply"}`, f.chat.ID)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	status, outcome, _ := f.gw.Reply(ctx, id, "sendMessage", params)
	if status != gateway.StatusNotDispatched || outcome != string(wire.OutcomeNotDispatched) {
		t.Fatalf("cancelled while waiting: %d %s; want %d %s", status, outcome, gateway.StatusNotDispatched, wire.OutcomeNotDispatched)
	}
	es, err := f.store.Journal(t.Context(), 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 0 {
		t.Fatalf("journal %+v; want nothing journaled for a call that never had its turn", es)
	}
	f.fail(t, id)
	next := f.reclaim(t, 42)
	status, outcome, replayed := f.gw.Reply(t.Context(), next, "sendMessage", params)
	if status != 200 || replayed {
		t.Fatalf("the next attempt's call: %d %s replayed=%v; want it sent", status, outcome, replayed)
	}
	if n := f.ledger("the reply"); n != 1 {
		t.Fatalf("the chat got the reply %d times; want 1", n)
	}
}

// TestAppGoneWhileWaitingOverHTTP: an app whose HTTP client gives up while
// its fenced call waits for its turn stops the call: nothing is sent or
// journaled, the answer is reported undelivered, and the next attempt's
// identical call is sent (not answered unknown).
func TestAppGoneWhileWaitingOverHTTP(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for i := range throttle.DefaultChatCount { // the chat's window: Telegram's 5 per 5 s
		if r := f.send(t, nil, fmt.Sprint("filler ", i)); r.status != 200 {
			t.Fatalf("filler %d answered %d", i, r.status)
		}
	}
	for range throttle.DefaultChatCount {
		<-f.events
	}
	id := f.claim(t, 43)
	b := fmt.Appendf(nil, `{"chat_id":%d,"text":"the reply"}`, f.chat.ID)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, attemptRoot(f.srv.URL, id)+"/bot"+f.tg.Token+"/sendMessage", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if _, err := (&http.Client{Timeout: 200 * time.Millisecond}).Do(req); err == nil {
		t.Fatal("the impatient client got an answer; want it to give up while the call waits")
	}
	e := <-f.events
	if e.Outcome != wire.OutcomeNotDispatched || !e.Undelivered || !e.Fenced {
		t.Fatalf("event %+v; want a fenced call not dispatched, its answer undelivered", e)
	}
	if es, err := f.store.Journal(t.Context(), 43); err != nil || len(es) != 0 {
		t.Fatalf("journal %+v, %v; want nothing journaled", es, err)
	}
	if n := f.ledger("the reply"); n != 0 {
		t.Fatalf("the chat got the reply %d times; want none", n)
	}
	f.fail(t, id)
	next := f.reclaim(t, 43)
	if r := f.send(t, &next, "the reply"); r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Fatalf("the next attempt's call: %d %s; want it sent", r.status, r.body)
	}
	if n := f.ledger("the reply"); n != 1 {
		t.Fatalf("the chat got the reply %d times; want 1", n)
	}
}
