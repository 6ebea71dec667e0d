package throttle_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/throttle"
)

// TestForeign429IsNotRetried: only Telegram's 429 ({"ok":false,...}) says
// Telegram did not act. A proxy's or load balancer's 429 page may stand in
// front of a call that arrived: it goes back as it came, sent once.
func TestForeign429IsNotRetried(t *testing.T) {
	for name, body := range map[string]string{
		"html":            `<html><body>429 Too Many Requests</body></html>`,
		"json without ok": `{"error":"rate limited","retry_after":1}`,
		"empty":           ``,
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					io.Copy(io.Discard, r.Body)
					r.Body.Close()
					calls.Add(1)
					return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}},
						Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
				})
				l, err := throttle.New(throttle.Config{MaxWait: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				c := &http.Client{Transport: throttle.NewTransport(l, base)}
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, "http://tg.invalid/bot1:x/sendMessage",
					bytes.NewReader([]byte(`{"chat_id":5,"text":"hi"}`)))
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 429 || string(got) != body {
					t.Errorf("answer %d %q, want the 429 as it came", resp.StatusCode, got)
				}
				if n := calls.Load(); n != 1 {
					t.Errorf("a 429 that is not Telegram's was sent %d times, want 1", n)
				}
			})
		})
	}
}
