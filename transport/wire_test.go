package transport_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/transport"
)

// TestFraming answers a real request with canned bytes and checks what the
// transport makes of them. Every failure comes after the request was sent,
// so it must be an unknown outcome, never not-dispatched.
func TestFraming(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		answer   string
		wantBody string // when ok
		wantErr  string // substring, when failing
		reused   bool   // the connection may be kept
		lingers  bool   // the server keeps the connection open though its answer closes it
	}{
		{name: "content-length", answer: okResponse, wantBody: `{"ok":true}`, reused: true},
		{name: "chunked", answer: "HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", wantBody: "hello world", reused: true},
		{name: "chunked wins over content-length", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n5\r\nhello\r\n0\r\n\r\n", wantBody: "hello", reused: true},
		{name: "repeated equal content-length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", wantBody: "ok", reused: true},
		{name: "204 has no body", answer: "HTTP/1.1 204 No Content\r\n\r\n", wantBody: "", reused: true},
		{name: "304 has no body", answer: "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", wantBody: "", reused: true},
		{name: "end of connection frames the body", answer: "HTTP/1.1 200 OK\r\n\r\nuntil close", wantBody: "until close"},
		{name: "HTTP/1.0 closes", answer: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", wantBody: "ok", lingers: true},
		{name: "connection close", answer: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", wantBody: "ok", lingers: true},
		{name: "100 continue is skipped", answer: "HTTP/1.1 100 Continue\r\n\r\n" + okResponse, wantBody: `{"ok":true}`, reused: true},
		{name: "103 early hints are skipped", answer: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + okResponse, wantBody: `{"ok":true}`, reused: true},
		{name: "conflicting content-length", answer: "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Length: 12\r\n\r\n{\"ok\":true}", wantErr: "Content-Length"},
		{name: "truncated body", answer: "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\nshort", wantErr: "unexpected EOF"},
		{name: "invalid status line", answer: "HTTP/9 OK\r\n\r\n", wantErr: "malformed HTTP"},
		{name: "invalid chunk size", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", wantErr: "chunk"},
		{name: "truncated chunk", answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhe", wantErr: "EOF"},
		{name: "only an interim answer", answer: "HTTP/1.1 100 Continue\r\n\r\n", wantErr: "EOF"},
		{name: "switching protocols", answer: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", wantErr: "101"},
		{name: "too many interim answers", answer: strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 20) + okResponse, wantErr: "interim"},
		{name: "no answer at all", answer: "", wantErr: "EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
				br := bufio.NewReader(c)
				for {
					if _, _, err := readRequest(br); err != nil {
						return
					}
					io.WriteString(c, tc.answer)
					if tc.wantErr != "" || !tc.reused && !tc.lingers {
						return // close: ends EOF framing, truncates the rest
					}
				}
			})
			tr := newTransport(t, transport.Config{})
			for i := range 2 {
				resp, err := send(t.Context(), tr, srv.url())
				if tc.wantErr != "" {
					assertUnknown(t, err)
					if !strings.Contains(err.Error(), tc.wantErr) {
						t.Errorf("err = %v, want it to mention %q", err, tc.wantErr)
					}
					break
				}
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if string(body) != tc.wantBody {
					t.Errorf("body = %q, want %q", body, tc.wantBody)
				}
				if resp.Header.Get("Transfer-Encoding") != "" || resp.TransferEncoding != nil {
					t.Error("Transfer-Encoding left on the response")
				}
			}
			wantAccepts := int32(2)
			if tc.reused || tc.wantErr != "" {
				wantAccepts = 1
			}
			if n := srv.accepts.Load(); n != wantAccepts {
				t.Errorf("accepts = %d, want %d", n, wantAccepts)
			}
			tr.CloseIdleConnections()
			testkit.WaitFor(t, "no connection left open", func() bool { return srv.open.Load() == 0 })
		})
	}
}

func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		okResponse,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody",
		"HTTP/1.1 200 OK\r\nContent-Length: 11, 12\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n",
		// Framed by the close, exactly 256 bytes (the limit below): not too large.
		"HTTP/1.0 200 OK\r\n\r\n" + strings.Repeat("x", 256-len("HTTP/1.0 200 OK\r\n\r\n")),
	} {
		f.Add([]byte(s))
	}
	const limit = 256
	f.Fuzz(func(t *testing.T, data []byte) {
		resp, err := transport.ReadResponseForTest(data, limit)
		if err != nil {
			if errors.Is(err, transport.ErrResponseTooLarge) && len(data) <= limit {
				t.Fatalf("too large reported for %d bytes", len(data))
			}
			return
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("in-memory body failed: %v", err)
		}
		if len(body) > limit || resp.StatusCode < 200 || resp.StatusCode > 999 {
			t.Fatalf("accepted status %d with %d body bytes under a %d limit", resp.StatusCode, len(body), limit)
		}
		if !bytes.Contains(data, body) {
			// A chunked body is reassembled, so it need not be contiguous; only
			// check unchunked bodies.
			if resp.Header.Get("Content-Length") != "" {
				t.Fatalf("body %q not in the input", body)
			}
		}
	})
}
