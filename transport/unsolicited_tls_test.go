package transport_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/transport"
)

// TestUnsolicitedAnswerInsideTLSIsNotReused: a server glues an answer
// nobody asked for to its first one and never answers the second request.
// Over TLS the glued bytes sit in the TLS layer's buffer, where the socket
// peek does not see them: the connection was reused and the second request
// read the stale answer as Telegram's answer to it. It must not.
func TestUnsolicitedAnswerInsideTLSIsNotReused(t *testing.T) {
	t.Parallel()
	const stale = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 38\r\n\r\n{\"ok\":true,\"result\":{\"message_id\":99}}"
	certSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	certSrv.StartTLS()
	t.Cleanup(certSrv.Close)
	var accepted atomic.Int32
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		tc := tls.Server(c, &tls.Config{Certificates: certSrv.TLS.Certificates})
		br := bufio.NewReader(tc)
		if _, _, err := readRequest(br); err != nil {
			return
		}
		if accepted.Add(1) > 1 {
			for { // a later connection: never answered
				if _, _, err := readRequest(br); err != nil {
					return
				}
			}
		}
		body := `{"ok":true,"result":"` + strings.Repeat("a", 70000) + `"}`
		io.WriteString(tc, fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s%s", len(body), body, stale))
		for {
			if _, _, err := readRequest(br); err != nil { // never answered
				return
			}
		}
	})
	tr := newTransport(t, transport.Config{ResponseTimeout: 500 * time.Millisecond, ConnectTimeout: 500 * time.Millisecond, TLSConfig: trusting(certSrv)})
	base := "https://" + srv.addr
	resp, err := send(t.Context(), tr, base)
	if err != nil {
		t.Fatalf("first request: %v", err)
	}
	resp.Body.Close()
	resp, err = send(t.Context(), tr, base)
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("second request answered %d %s, but the server never answered it", resp.StatusCode, b)
	}
}

// TestTLSKeepAliveStillReuses: the look through TLS before reuse does not
// cost a clean TLS connection its reuse.
func TestTLSKeepAliveStillReuses(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		io.WriteString(w, `{"ok":true,"result":{}}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	tr := newTransport(t, transport.Config{TLSConfig: trusting(srv)})
	for i := range 5 {
		resp, err := send(t.Context(), tr, srv.URL)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		time.Sleep(10 * time.Millisecond) // let TLS 1.3 session tickets arrive while idle
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("5 requests used %d TLS connections, want 1", n)
	}
}
