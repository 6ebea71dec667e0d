package gateway_test

import (
	"context"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// TestAppGoneAfterTheCallLeft: an app that closes its connection once its
// call has left does not stop the call: Telegram's answer is read and
// journaled as answered (so the update's next attempt gets it replayed),
// and the Observer sees the call answered and undelivered. Here the app
// goes as the intent is recorded, and Telegram takes a second to answer.
func TestAppGoneAfterTheCallLeft(t *testing.T) {
	t.Parallel()
	app, leave := context.WithCancel(t.Context())
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.Test.AfterIntent = func(string) { leave() }
	}})
	if err := f.tg.Arm(telegramtest.Fault{Method: "sendMessage", Delay: time.Second}); err != nil {
		t.Fatal(err)
	}
	id := f.claim(t, 34)
	if err := httpPost(app, attemptRoot(f.srv.URL, id)+"/bot"+f.tg.Token+"/sendMessage", f.chat.ID, "left"); err == nil {
		t.Fatal("the app got an answer after it left")
	}
	e := <-f.events
	if e.Outcome != wire.OutcomeAnswered || e.Status != 200 || !e.Undelivered {
		t.Errorf("event %+v; want Telegram's 200, answered, undelivered", e)
	}
	if err := f.gw.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := f.outcomes(t, 34); len(got) != 1 || got[0] != intake.CallAnswered {
		t.Errorf("journal = %v; want the answer journaled", got)
	}
	if n := f.ledger("left"); n != 1 {
		t.Errorf("ledger holds %d messages; want 1", n)
	}
}
