package gateway_test

import (
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestRepeatAfterTelegram5xxKeepsItsNumber: Telegram's own 5xx frees the
// call (it did not act), and gives its occurrence number back before the
// app gets the 5xx. An app that repeats the call at once, in the same
// attempt, makes the same call again, not a second one: the retry of the
// update replays the message that went out rather than sending it a second
// time from the journal entry the 5xx left not dispatched.
func TestRepeatAfterTelegram5xxKeepsItsNumber(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	if err := f.tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultServerError}); err != nil {
		t.Fatal(err)
	}
	first := f.claim(t, 21)
	if r := f.send(t, &first, "again"); r.status != http.StatusInternalServerError {
		t.Fatalf("attempt 1, call 1 = %d %s; want Telegram's 500", r.status, r.body)
	}
	sent := f.send(t, &first, "again") // the app's own retry of the call
	if sent.status != http.StatusOK {
		t.Fatalf("attempt 1, call 2 = %d %s; want Telegram's 200", sent.status, sent.body)
	}
	if err := f.gw.Close(t.Context()); err != nil { // the outcomes written after their answers
		t.Fatal(err)
	}
	es, err := f.store.Journal(t.Context(), 21)
	if err != nil || len(es) != 1 || es[0].Occurrence != 1 || es[0].Outcome != intake.CallAnswered {
		for _, e := range es {
			t.Logf("entry: occurrence %d, %s", e.Occurrence, e.Outcome)
		}
		t.Fatalf("Journal(21) = %d entries, %v; want one, occurrence 1 answered (the 500 gave its number back)", len(es), err)
	}
	f.fail(t, first)
	second := f.reclaim(t, 21)
	if r := f.send(t, &second, "again"); r.status != http.StatusOK || r.header.Get(gateway.HeaderReplayed) != "true" || string(r.body) != string(sent.body) {
		t.Errorf("attempt 2 = %d %s (replayed %q); want attempt 1's 200 replayed", r.status, r.body, r.header.Get(gateway.HeaderReplayed))
	}
	if n := f.ledger("again"); n != 1 {
		t.Errorf("ledger holds %d messages; want 1", n)
	}
}
