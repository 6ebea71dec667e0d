package botapi_test

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/transport"
)

// rawServer listens on loopback and hands each connection, once its
// request was read whole, to answer, which writes raw bytes.
func rawServer(t *testing.T, answer func(c net.Conn)) string {
	t.Helper()
	return testkit.RawServer(t, func(c net.Conn, req *http.Request) {
		req.Body.Close()
		answer(c)
	})
}

// TestRequestErrorIsNeverReadAsTelegramsWord: over a plain http.Client
// (the Client's default), a server that answers a sent call with a broken
// status line or header quoting one of Telegram's phrases makes net/http's
// error message quote it. That message is no answer of Telegram's: the
// call was sent, so Classify must call it unknown, never rate-limited
// (retryable: a second send) or a recipient that is gone.
func TestRequestErrorIsNeverReadAsTelegramsWord(t *testing.T) {
	t.Parallel()
	for name, answer := range map[string]string{
		"status flood":    "HTTP/1.1 flood\r\n\r\n",
		"status retry":    "HTTP/1.1 retry later\r\n\r\n",
		"header chat":     "HTTP/1.1 200 OK\r\nchat not found\r\n\r\n",
		"header too many": "HTTP/1.1 200 OK\r\nToo Many Requests\r\n\r\n",
		"header blocked":  "HTTP/1.1 200 OK\r\nbot was blocked by the user\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			root := rawServer(t, func(c net.Conn) { c.Write([]byte(answer)) })
			c, err := botapi.New(realToken, botapi.Config{APIRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Call(t.Context(), "sendMessage", map[string]any{"chat_id": 1, "text": "x"})
			if err == nil {
				t.Fatal("Call succeeded")
			}
			if strings.Contains(err.Error(), secretOf(realToken)) {
				t.Errorf("error leaks the token: %v", err)
			}
			if f := botapi.Classify(err); f.Reason != botapi.ReasonUnknown || f.Retryable || f.RecipientUnreachable {
				t.Errorf("Classify(%v) = %+v; want unknown: the call was sent and Telegram did not answer", err, f)
			}
		})
	}
}

// TestHostileTelegramAnswers runs calls over tgrelay's transport against a
// server that fails in the ways a network and a proxy can, after reading
// the whole request, and checks each outcome is honest: Telegram's word
// only where its JSON said so, unknown for everything after the first
// byte that is not, never retryable unless Telegram said it did not act.
func TestHostileTelegramAnswers(t *testing.T) {
	t.Parallel()
	hc, err := transport.NewClient(transport.Config{
		Proxy:           func(*http.Request) (*url.URL, error) { return nil, nil },
		ResponseTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(hc.CloseIdleConnections)
	unknown := botapi.Failure{Reason: botapi.ReasonUnknown, Evidence: botapi.EvidenceTransport}
	notJSON := func(status int) botapi.Failure {
		return botapi.Failure{Reason: botapi.ReasonUnknown, Evidence: botapi.EvidenceNone, Status: status}
	}
	limited := func(d time.Duration) botapi.Failure {
		f := botapi.Failure{Reason: botapi.ReasonRateLimited, Status: 429, Retryable: true, RetryAfter: d, Evidence: botapi.EvidenceStatus}
		if d > 0 {
			f.Evidence = botapi.EvidenceParameters
		}
		return f
	}
	jsonAnswer := func(status int, body string) string {
		return fmt.Sprintf("HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", status, len(body), body)
	}
	for _, tc := range []struct {
		name   string
		answer string // "" closes without a byte
		rst    bool   // reset instead of a close after the answer
		ok     string // the result, when the call succeeds
		want   botapi.Failure
	}{
		{name: "close without answer", want: unknown},
		{name: "reset without answer", rst: true, want: unknown},
		{name: "status line then close", answer: "HTTP/1.1 200 OK\r\n", want: unknown},
		{name: "mid headers", answer: "HTTP/1.1 200 OK\r\nContent-Type: appl", want: unknown},
		{name: "mid body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"ok\":true,", want: unknown},
		{name: "mid body reset", rst: true, answer: "HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n{\"ok\":true,", want: unknown},
		{name: "interim then close", answer: "HTTP/1.1 100 Continue\r\n\r\n", want: unknown},
		{name: "html 200", answer: "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n<html>", want: notJSON(0)},
		{name: "truncated json framed", answer: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"ok\":true", want: notJSON(0)},
		{name: "ok false without code", answer: jsonAnswer(200, `{"ok":false}`), want: notJSON(0)},
		{name: "ok true without result", answer: jsonAnswer(200, `{"ok":true}`), ok: "null"},
		{name: "ok true under 500", answer: jsonAnswer(500, `{"ok":true,"result":1}`), ok: "1"},
		{name: "429 retry_after 0", answer: jsonAnswer(429, `{"ok":false,"error_code":429,"parameters":{"retry_after":0}}`), want: limited(0)},
		{name: "429 retry_after negative", answer: jsonAnswer(429, `{"ok":false,"error_code":429,"parameters":{"retry_after":-5}}`), want: limited(0)},
		{name: "429 retry_after huge", answer: jsonAnswer(429, `{"ok":false,"error_code":429,"parameters":{"retry_after":1e300}}`), want: limited(botapi.MaxRetryAfter)},
		{name: "429 retry_after float", answer: jsonAnswer(429, `{"ok":false,"error_code":429,"parameters":{"retry_after":1.5}}`), want: limited(1500 * time.Millisecond)},
		{name: "429 retry_after string", answer: jsonAnswer(429, `{"ok":false,"error_code":429,"parameters":{"retry_after":"5"}}`), want: limited(0)},
		{name: "429 html", answer: "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 6\r\n\r\n<html>", want: notJSON(429)},
		{name: "500 json", answer: jsonAnswer(500, `{"ok":false,"error_code":500,"description":"Internal Server Error"}`),
			want: botapi.Failure{Reason: botapi.ReasonServerError, Status: 500, Retryable: true, Evidence: botapi.EvidenceStatus}},
		{name: "502 html", answer: "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 6\r\n\r\n<html>", want: notJSON(502)},
		{name: "502 ok-less json", answer: jsonAnswer(502, `{"error":"bad gateway"}`), want: notJSON(502)},
		{name: "migrated", answer: jsonAnswer(400, `{"ok":false,"error_code":400,"description":"Bad Request: group chat was upgraded to a supergroup chat","parameters":{"migrate_to_chat_id":-1001234}}`),
			want: botapi.Failure{Reason: botapi.ReasonChatMigrated, Status: 400, MigrateToChatID: -1001234, Evidence: botapi.EvidenceParameters}},
		{name: "401", answer: jsonAnswer(401, `{"ok":false,"error_code":401,"description":"Unauthorized"}`),
			want: botapi.Failure{Reason: botapi.ReasonUnrecognized, Status: 401, Evidence: botapi.EvidenceNone}},
		{name: "redirect", answer: "HTTP/1.1 307 Temporary Redirect\r\nLocation: /elsewhere\r\nContent-Length: 0\r\n\r\n", want: notJSON(0)},
		{name: "gzip", answer: "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00", want: notJSON(0)},
		{name: "content-length shorter than the body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n{\"ok\":true}{\"ok\":false}", ok: "null"},
		{name: "headers that never end", answer: "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-A: b\r\n", 200000), want: unknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int32
			root := rawServer(t, func(c net.Conn) {
				requests.Add(1)
				if tc.answer != "" {
					c.Write([]byte(tc.answer))
				}
				if tc.rst {
					c.(*net.TCPConn).SetLinger(0)
				}
			})
			c, err := botapi.New(realToken, botapi.Config{APIRoot: root, HTTPClient: hc})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := c.Call(t.Context(), "sendMessage", map[string]any{"chat_id": 1, "text": "x"})
			if err != nil && strings.Contains(err.Error(), secretOf(realToken)) {
				t.Errorf("error leaks the token: %v", err)
			}
			if tc.ok != "" {
				if err != nil || string(raw) != tc.ok {
					t.Fatalf("Call = %s, %v; want %s", raw, err, tc.ok)
				}
			} else if err == nil {
				t.Fatalf("Call = %s; want an error", raw)
			} else if f := botapi.Classify(err); f != tc.want {
				t.Errorf("Classify(%v) = %+v; want %+v", err, f, tc.want)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("the server saw %d requests; want exactly 1", n)
			}
		})
	}
}
