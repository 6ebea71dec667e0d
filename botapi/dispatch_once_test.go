package botapi_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
)

// TestCallNeverFollowsRedirects: a 3xx (a proxy's, a misconfigured root's)
// is an answer. Following it wrote the call again (ten times for a loop),
// and a redirect to a dead address turned a delivered call into "not
// dispatched", which every retry policy repeats.
func TestCallNeverFollowsRedirects(t *testing.T) {
	t.Parallel()
	dead := httptest.NewServer(http.NotFoundHandler())
	deadURL := dead.URL
	dead.Close()
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, target := range []string{"loop", "dead"} {
			t.Run(http.StatusText(code)+"/"+target, func(t *testing.T) {
				t.Parallel()
				var n atomic.Int32
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					io.Copy(io.Discard, r.Body)
					n.Add(1)
					loc := r.URL.String()
					if target == "dead" {
						loc = deadURL + r.URL.Path
					}
					http.Redirect(w, r, loc, code)
				}))
				t.Cleanup(srv.Close)
				tc, err := transport.NewClient(transport.Config{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(tc.CloseIdleConnections)
				// tgrelay's client, and a caller's own http.Client.
				for _, hc := range []*http.Client{tc, {}} {
					before := n.Load()
					c, err := botapi.New(realToken, botapi.Config{APIRoot: srv.URL, HTTPClient: hc})
					if err != nil {
						t.Fatal(err)
					}
					_, err = c.Call(t.Context(), "sendMessage", map[string]any{"chat_id": 1, "text": "x"})
					if got := n.Load() - before; got != 1 {
						t.Errorf("the call was written %d times, want 1", got)
					}
					f := botapi.Classify(err)
					if f.Reason != botapi.ReasonUnknown || f.Retryable {
						t.Errorf("Classify = %+v (err %v), want unknown, not retryable", f, err)
					}
				}
			})
		}
	}
}
