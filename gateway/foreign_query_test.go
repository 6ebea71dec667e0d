package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
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
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		out, err := http.NewRequestWithContext(r.Context(), r.Method, tg.URL+r.URL.RequestURI(), r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		if resp, err := http.DefaultClient.Do(out); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "<html><body>400 Bad Request</body></html>")
	}))
	t.Cleanup(proxy.Close)

	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "gw.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	base, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	lim, err := throttle.New(throttle.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Token: tg.Token, APIRoot: proxy.URL, Transport: throttle.NewTransport(lim, base), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { _ = gw.Close(context.Background()) })

	now := time.Now()
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := st.Claim(t.Context(), 1, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("Claim = %v, %v", ok, err)
	}
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
