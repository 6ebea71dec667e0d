package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// deliveringProxy is a raw loopback server in front of tg: it reads each
// request whole, delivers it to tg (so the message arrives), then answers
// the gateway with answer's bytes instead of tg's, and closes (resets when
// rst).
func deliveringProxy(t *testing.T, tg *telegramtest.Server, answer func(tgAnswer []byte) []byte, rst bool) string {
	t.Helper()
	return testkit.RawServer(t, func(c net.Conn, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		out, err := http.NewRequest(req.Method, tg.URL+req.URL.RequestURI(), bytes.NewReader(body))
		if err != nil {
			return
		}
		out.Header.Set("Content-Type", req.Header.Get("Content-Type"))
		resp, err := http.DefaultClient.Do(out)
		if err != nil {
			return
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		c.Write(answer(got))
		if rst {
			c.(*net.TCPConn).SetLinger(0)
		}
	})
}

// TestHostileUpstreamNeverSendsTwice: every way an answer can go wrong
// after the call reached Telegram. The first attempt's call arrives and is
// answered badly; the update's next attempt makes the identical call. The
// chat must get the message once: none of these answers is Telegram saying
// it did not act, so none may be journaled not dispatched.
func TestHostileUpstreamNeverSendsTwice(t *testing.T) {
	t.Parallel()
	framed := func(status int, ct, body string) func([]byte) []byte {
		return func([]byte) []byte {
			return fmt.Appendf(nil, "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", status, ct, len(body), body)
		}
	}
	for _, tc := range []struct {
		name   string
		answer func([]byte) []byte
		rst    bool
	}{
		{name: "close without answer", answer: func([]byte) []byte { return nil }},
		{name: "reset without answer", answer: func([]byte) []byte { return nil }, rst: true},
		{name: "status line only", answer: func([]byte) []byte { return []byte("HTTP/1.1 200 OK\r\n") }},
		{name: "cut mid body", answer: func(b []byte) []byte {
			return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b[:len(b)/2])
		}},
		{name: "interim then close", answer: func([]byte) []byte { return []byte("HTTP/1.1 100 Continue\r\n\r\n") }},
		{name: "html 200", answer: framed(200, "text/html", "<html>ok</html>")},
		{name: "ok false without code", answer: framed(200, "application/json", `{"ok":false}`)},
		{name: "429 page", answer: framed(429, "text/html", "<html>slow down</html>")},
		{name: "429 ok-less json", answer: framed(429, "application/json", `{"error":"rate limited"}`)},
		{name: "502 page", answer: framed(502, "text/html", "<html>bad gateway</html>")},
		{name: "503 ok-less json", answer: framed(503, "application/json", `{"message":"unavailable"}`)},
		{name: "success under 500", answer: func(b []byte) []byte {
			return fmt.Appendf(nil, "HTTP/1.1 500 X\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}},
		{name: "success claiming throttled", answer: func(b []byte) []byte {
			return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nTgrelay-Outcome: throttled\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}},
		{name: "success claiming not dispatched", answer: func(b []byte) []byte {
			return fmt.Appendf(nil, "HTTP/1.1 200 OK\r\nTgrelay-Outcome: not-dispatched\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
		}},
		{name: "tgrelay unknown upstream", answer: func([]byte) []byte {
			body := `{"ok":false,"error_code":502,"description":"Bad Gateway: tgrelay: the call may have reached Telegram, but no answer came back (reset); it is not sent again"}`
			return fmt.Appendf(nil, "HTTP/1.1 502 Bad Gateway\r\nTgrelay-Outcome: unknown\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}},
		{name: "redirect", answer: func([]byte) []byte {
			return []byte("HTTP/1.1 307 Temporary Redirect\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n")
		}},
		{name: "gzip", answer: func([]byte) []byte {
			return []byte("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tg := telegramtest.NewServer(telegramtest.Config{})
			t.Cleanup(tg.Close)
			chat, err := tg.NewPrivateChat(tg.NewUser("Ann"))
			if err != nil {
				t.Fatal(err)
			}
			g := newSQLiteGatewayAt(t, tg.Token, deliveringProxy(t, tg, tc.answer, tc.rst), filepath.Join(t.TempDir(), "gw.db"))
			now := time.Now()
			if _, err := g.st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: now}); err != nil {
				t.Fatal(err)
			}
			first := g.claim(t, 1, now, time.Minute)
			r := receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, first)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
			if n := countText(tg, chat.ID, "the reply"); n != 1 {
				t.Fatalf("the chat got the reply %d times after the first call (answered %d %s); want once", n, r.status, r.body)
			}
			next := retryAttempt(t, g.st, first)
			r = receive(t, goSend(t.Context(), attemptRoot(g.srv.URL, next)+"/bot"+tg.Token+"/sendMessage", chat.ID, "the reply"))
			if n := countText(tg, chat.ID, "the reply"); n != 1 {
				t.Fatalf("the chat got the reply %d times (the next attempt's call answered %d %s); want exactly once", n, r.status, r.body)
			}
		})
	}
}
