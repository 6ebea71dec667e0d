package gateway_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestForeign400DoesNotReopenQuery: an answer to a callback query passes a
// proxy, which forwards it and answers the gateway with a 400 page of its
// own, not Telegram's JSON. That is not Telegram refusing the answer with
// the query still open: the query's next answer must not be sent, or
// Telegram may see two answers to one query (a decline and the app's own,
// say).
func TestForeign400DoesNotReopenQuery(t *testing.T) {
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	var calls atomic.Int32
	proxy := deliverThen(t, tg, func(w http.ResponseWriter, _ []byte) {
		calls.Add(1)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "<html><body>400 Bad Request</body></html>")
	})

	g := newSQLiteGatewayAt(t, tg.Token, proxy.URL, filepath.Join(t.TempDir(), "gw.db"))
	st, srv := g.st, g.srv

	now := time.Now()
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id := g.claim(t, 1, now, time.Minute)
	answer := func(text string) int {
		b, _ := json.Marshal(map[string]any{"callback_query_id": "q-1", "text": text})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, attemptRoot(srv.URL, id)+"/bot"+tg.Token+"/answerCallbackQuery", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	answer("first")
	second := answer("second")
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d answers to one query left the gateway (the second answered %d); want 1: the first may have arrived", n, second)
	}
}
