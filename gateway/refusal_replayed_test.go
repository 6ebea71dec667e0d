package gateway_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
)

// TestTelegram400IsReplayed: Telegram's 400 to a call that does not
// answer a query is an answer like any other: the journal keeps it, and
// a later attempt's identical call gets it replayed; Telegram is not
// asked again. (Only a query's answer refused with the query still open
// frees the call: see TestRefusedAnswerLeavesQueryOpen.)
func TestTelegram400IsReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	params := map[string]any{"chat_id": 424242, "text": "nobody"} // no such chat
	first := f.claim(t, 22)
	r1 := f.post(t, "/bot"+f.tg.Token+"/sendMessage", &first, params)
	if r1.status != http.StatusBadRequest || r1.env.OK {
		t.Fatalf("attempt 1 = %d %s; want Telegram's 400", r1.status, r1.body)
	}
	if err := f.gw.Close(t.Context()); err != nil { // the outcomes written after their answers
		t.Fatal(err)
	}
	es, err := f.store.Journal(t.Context(), 22)
	if err != nil || len(es) != 1 || es[0].Outcome != intake.CallAnswered || es[0].Status != http.StatusBadRequest {
		for _, e := range es {
			t.Logf("entry: occurrence %d, %s %d", e.Occurrence, e.Outcome, e.Status)
		}
		t.Fatalf("Journal(22) = %d entries, %v; want the 400 journaled as answered", len(es), err)
	}
	f.fail(t, first)
	second := f.reclaim(t, 22)
	r2 := f.post(t, "/bot"+f.tg.Token+"/sendMessage", &second, params)
	if r2.status != http.StatusBadRequest || r2.header.Get(gateway.HeaderReplayed) != "true" || !bytes.Equal(r2.body, r1.body) {
		t.Errorf("attempt 2 = %d %s (replayed %q); want attempt 1's 400 replayed", r2.status, r2.body, r2.header.Get(gateway.HeaderReplayed))
	}
	if n := f.tg.Calls()["sendMessage"]; n != 1 {
		t.Errorf("Telegram got sendMessage %d times; want once", n)
	}
}
