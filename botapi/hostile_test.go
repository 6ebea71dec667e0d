package botapi_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

// rawServer listens on loopback and hands each connection, once its
// request was read whole, to answer, which writes raw bytes.
func rawServer(t *testing.T, answer func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				req.Body.Close()
				answer(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
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
