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

type rtFunc func(*http.Request) (*http.Response, error)

func (f rtFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestTelegram429RetryAfterBounds: Telegram's 429 is retried at most once a
// DefaultRetryAfter within MaxWait whatever its retry_after says (0,
// negative, a fraction, a Retry-After of 0: never a tight loop), and a
// retry_after beyond the wait is honoured, not replaced by the default.
func TestTelegram429RetryAfterBounds(t *testing.T) {
	const maxWait = 3 * time.Second
	cases := []struct {
		name     string
		body     string
		header   string
		maxCalls int32
	}{
		{"retry_after 0", `{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":0}}`, "", 4},
		{"retry_after negative", `{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":-3}}`, "", 4},
		{"retry_after fraction", `{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":0.001}}`, "", 4},
		{"Retry-After 0", `{"ok":false,"error_code":429,"description":"Too Many Requests"}`, "0", 4},
		{"retry_after beyond MaxWait", `{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":100000}}`, "", 1},
		{"retry_after huge", `{"ok":false,"error_code":429,"description":"Too Many Requests","parameters":{"retry_after":1e300}}`, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				base := rtFunc(func(r *http.Request) (*http.Response, error) {
					io.Copy(io.Discard, r.Body)
					r.Body.Close()
					h := http.Header{"Content-Type": {"application/json"}}
					if tc.header != "" {
						h.Set("Retry-After", tc.header)
					}
					status, body := 429, tc.body
					if calls.Add(1) >= 100 { // end a tight loop so the test can fail
						status, body = 200, `{"ok":true,"result":{"message_id":1}}`
					}
					return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
				})
				l, err := throttle.New(throttle.Config{MaxWait: maxWait})
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
				resp.Body.Close()
				if n := calls.Load(); n > tc.maxCalls {
					t.Errorf("Telegram's 429 was sent %d times within MaxWait %v, want at most %d", n, maxWait, tc.maxCalls)
				}
			})
		})
	}
}
