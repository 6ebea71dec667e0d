package gateway_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// TestJournalNeverStoresTheToken: a server in front of Telegram answers a
// fenced call with a page that quotes the request's path, as Apache's
// default 404 page does ("The requested URL /bot<token>/sendMessage was
// not found"), and with a JSON description echoing the token's secret
// half. The journal row that records the call's answer must carry neither
// the token nor its secret half.
func TestJournalNeverStoresTheToken(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]func(path string) (int, string, string){
		"apache 404 page": func(path string) (int, string, string) {
			return http.StatusNotFound, "text/html", "<html><body><p>The requested URL " + path + " was not found on this server.</p></body></html>"
		},
		"json echoing the secret half": func(path string) (int, string, string) {
			half := path[strings.IndexByte(path, ':')+1 : strings.LastIndexByte(path, '/')]
			return http.StatusUnauthorized, "application/json", fmt.Sprintf(`{"ok":false,"error_code":401,"description":"Unauthorized: key %s"}`, half)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			const token = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"
			const half = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq"
			upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				status, ct, body := answer(r.URL.Path)
				w.Header().Set("Content-Type", ct)
				w.WriteHeader(status)
				fmt.Fprint(w, body)
			}))
			t.Cleanup(upstream.Close)
			g := newSQLiteGatewayAt(t, token, upstream.URL, filepath.Join(t.TempDir(), "gw.db"))
			now := time.Now()
			if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
				t.Fatal(err)
			}
			id := g.claim(t, 1, now, time.Minute)
			receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, id)+"/bot"+token+"/sendMessage", 42, "hello"))
			if err := g.gw.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			es, err := g.st.Journal(t.Context(), 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) != 1 {
				t.Fatalf("journal = %+v; want one entry", es)
			}
			if b := string(es[0].Body); strings.Contains(b, half) {
				t.Errorf("the journal row stores the token's secret half: %s", b)
			}
		})
	}
}
