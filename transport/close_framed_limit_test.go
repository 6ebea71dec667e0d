package transport_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/tgrelay/tgrelay/transport"
)

// An answer framed by its connection's close is as long as it is: one of
// exactly MaxResponseBytes is accepted whole, as the same answer with a
// Content-Length is, and one byte longer is too large.
func TestCloseFramedAnswerAtTheSizeLimit(t *testing.T) {
	t.Parallel()
	const head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
	const body = `{"ok":true}`
	for _, tc := range []struct {
		name     string
		extra    string
		tooLarge bool
	}{
		{"exactly the limit", "", false},
		{"one byte more", " ", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
				if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, head+body+tc.extra) // then the connection closes
			})
			tr := newTransport(t, transport.Config{MaxResponseBytes: int64(len(head + body))})
			resp, err := send(t.Context(), tr, srv.url())
			var got []byte
			if err == nil {
				got, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			switch {
			case tc.tooLarge && !errors.Is(err, transport.ErrResponseTooLarge):
				t.Fatalf("an answer of MaxResponseBytes+1 framed by close: err = %v, want ErrResponseTooLarge", err)
			case !tc.tooLarge && (err != nil || string(got) != body):
				t.Fatalf("an answer of exactly MaxResponseBytes framed by close: body %q, err = %v; want %q, no error", got, err, body)
			}
		})
	}
}
