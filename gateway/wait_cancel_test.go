package gateway_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
)

// TestCallCancelledWhileWaitingItsTurnIsNotDispatched: a fenced call whose
// context ends while it waits for its chat's turn never left: it is
// answered not dispatched, nothing is journaled (its intent would be
// recorded only at its turn), and the next attempt's identical call sends
// it (it is not answered unknown and lost).
func TestCallCancelledWhileWaitingItsTurnIsNotDispatched(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for i := range 3 { // the chat's window: Telegram's 3 per 3 s
		if r := f.send(t, nil, fmt.Sprint("filler ", i)); r.status != 200 {
			t.Fatalf("filler %d answered %d", i, r.status)
		}
	}
	id := f.claim(t, 42)
	params := fmt.Appendf(nil, `{"chat_id":%d,"text":"the reply"}`, f.chat.ID)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	status, outcome, _ := f.gw.Reply(ctx, id, "sendMessage", params)
	if status != gateway.StatusNotDispatched || outcome != string(gateway.OutcomeNotDispatched) {
		t.Fatalf("cancelled while waiting: %d %s; want %d %s", status, outcome, gateway.StatusNotDispatched, gateway.OutcomeNotDispatched)
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
