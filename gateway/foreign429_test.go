package gateway_test

import (
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestForeign429IsNotJournaledNotDispatched: a proxy in front of Telegram
// passes a fenced call on (the message arrives) and answers the gateway
// with a 429 page of its own, not Telegram's JSON. Nothing in that answer
// says Telegram did not act, so the call must not be journaled as not
// dispatched: the update's next attempt makes the identical call, and it
// must not reach the chat a second time.
func TestForeign429IsNotJournaledNotDispatched(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
	if err != nil {
		t.Fatal(err)
	}
	proxy := deliverThen(t, tg, func(w http.ResponseWriter, _ []byte) {
		// The call arrived; the proxy answers with its own page.
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, "<html><body>429 Too Many Requests</body></html>")
	})

	g := newSQLiteGatewayAt(t, tg.Token, proxy.URL, filepath.Join(t.TempDir(), "gw.db"))
	st, gw, srv := g.st, g.gw, g.srv

	now := time.Now()
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	first := g.claim(t, 1, now, time.Minute)
	r := receive(t, goSend(t.Context(), attemptRoot(srv.URL, first)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
	if r.status != http.StatusTooManyRequests {
		t.Fatalf("first attempt's call = %d %s; want the proxy's 429", r.status, r.body)
	}
	if n := countText(tg, chat.ID, "the reply"); n != 1 {
		t.Fatalf("the chat got the reply %d times after the first call; want once", n)
	}
	if e := <-g.events; e.Telegram429 {
		t.Errorf("the proxy's 429 page was reported as Telegram's own 429: %+v", e)
	}
	if err := gw.Close(t.Context()); err != nil { // the outcome is on disk
		t.Fatal(err)
	}
	es, err := st.Journal(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 1 || es[0].Outcome == intake.CallNotDispatched || es[0].Outcome == intake.CallPending {
		t.Errorf("journal after a foreign 429 = %+v; want one entry that is neither pending nor not dispatched", es)
	}

	// The handler failed; the update's next attempt makes the same call.
	next := retryAttempt(t, st, first)
	r = receive(t, goSend(t.Context(), attemptRoot(srv.URL, next)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
	if n := countText(tg, chat.ID, "the reply"); n != 1 {
		t.Fatalf("the chat got the reply %d times (the next attempt's call answered %d %s); want exactly once: the first may have arrived", n, r.status, r.body)
	}
}
