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

// TestQueryIDInvalidIsFinal: a 400 refusal worded "Bad Request:
// QUERY_ID_INVALID" alone (Telegram's error name, without the "query is
// too old…" sentence) says the query is gone, as the sentence does: the
// answer is journaled as final and the query's next answer is not sent.
func TestQueryIDInvalidIsFinal(t *testing.T) {
	t.Parallel()
	tg := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(tg.Close)
	var calls atomic.Int32
	proxy := deliverThen(t, tg, func(w http.ResponseWriter, _ []byte) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"ok":false,"error_code":400,"description":"Bad Request: QUERY_ID_INVALID"}`)
	})
	g := newSQLiteGatewayAt(t, tg.Token, proxy.URL, filepath.Join(t.TempDir(), "gw.db"))
	now := time.Now()
	if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	id := g.claim(t, 1, now, time.Minute)
	answer := func(text string) int {
		b, _ := json.Marshal(map[string]any{"inline_query_id": "q-1", "results": []any{}, "switch_pm_text": text})
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, attemptRoot(g.srv.URL, id)+"/bot"+tg.Token+"/answerInlineQuery", bytes.NewReader(b))
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
	if s := answer("first"); s != http.StatusBadRequest {
		t.Fatalf("the first answer = %d; want Telegram's 400", s)
	}
	second := answer("second")
	if n := calls.Load(); n != 1 {
		t.Errorf("%d answers to one query left the gateway (the second answered %d); want 1: the query is gone", n, second)
	}
}
