package gateway_test

import (
	"bytes"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestSuccessUnderErrorStatusIsNotJournaledNotDispatched: something in
// front of Telegram passes a fenced call on (the message arrives) and
// hands Telegram's success body back under a 5xx or 429 status. The body
// says ok:true: Telegram acted. The call must not be journaled as not
// dispatched, so the update's next attempt must not send it again.
func TestSuccessUnderErrorStatusIsNotJournaledNotDispatched(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusInternalServerError, http.StatusBadGateway, http.StatusTooManyRequests} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			tg := telegramtest.NewServer(telegramtest.Config{})
			t.Cleanup(tg.Close)
			chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
			if err != nil {
				t.Fatal(err)
			}
			proxy := deliverThen(t, tg, func(w http.ResponseWriter, body []byte) {
				if !bytes.Contains(body, []byte(`"ok":true`)) {
					t.Errorf("telegramtest answered %s; want a success", body)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(status)
				w.Write(body)
			})

			g := newSQLiteGatewayAt(t, tg.Token, proxy.URL, filepath.Join(t.TempDir(), "gw.db"))
			st, gw, srv := g.st, g.gw, g.srv
			now := time.Now()
			if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
				t.Fatal(err)
			}
			first := g.claim(t, 1, now, time.Minute)
			receive(t, goSend(t.Context(), attemptRoot(srv.URL, first)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
			if n := countText(tg, chat.ID, "the reply"); n != 1 {
				t.Fatalf("the chat got the reply %d times after the first call; want once", n)
			}
			if err := gw.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			es, err := st.Journal(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != 1 || es[0].Outcome == intake.CallNotDispatched || es[0].Outcome == intake.CallPending {
				t.Errorf("journal after Telegram's success under HTTP %d = %+v; want one entry that is neither pending nor not dispatched", status, es)
			}

			next := retryAttempt(t, st, first)
			r := receive(t, goSend(t.Context(), attemptRoot(srv.URL, next)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
			if n := countText(tg, chat.ID, "the reply"); n != 1 {
				t.Fatalf("the chat got the reply %d times (the next attempt's call answered %d %s); want exactly once", n, r.status, r.body)
			}
		})
	}
}
