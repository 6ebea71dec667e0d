package transport_test

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/transport"
)

// TestRedirectsAreNeverFollowed: a 3xx answer (a proxy's, a misconfigured
// root's) is an answer. NewClient's client returns it; an http.Client of
// the caller's own that follows it gets an unknown outcome, and nothing is
// written again: following it sent the call up to ten times, and a redirect
// to a dead address made a delivered call read "not dispatched".
func TestRedirectsAreNeverFollowed(t *testing.T) {
	t.Parallel()
	for _, code := range []int{301, 302, 303, 307, 308} {
		for _, loc := range []string{"loop", "dead"} {
			var requests atomic.Int32
			srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
				br := bufio.NewReader(c)
				for {
					req, _, err := readRequest(br)
					if err != nil {
						return
					}
					requests.Add(1)
					target := req.URL.Path
					if loc == "dead" {
						target = "http://127.0.0.1:1" + req.URL.Path
					}
					if _, err := c.Write([]byte("HTTP/1.1 " + strconv.Itoa(code) + " Redirect\r\nLocation: " + target + "\r\nContent-Length: 0\r\n\r\n")); err != nil {
						return
					}
				}
			})
			tr := newTransport(t, transport.Config{})
			own := &http.Client{Transport: tr} // follows redirects
			nc, err := transport.NewClient(transport.Config{Proxy: noProxy})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.CloseIdleConnections)
			for name, c := range map[string]*http.Client{"NewClient": nc, "own client": own} {
				before := requests.Load()
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
				resp, err := c.Do(req)
				if got := requests.Load() - before; got != 1 {
					t.Errorf("%d %s, %s: the request was written %d times, want 1", code, loc, name, got)
				}
				switch name {
				case "NewClient":
					if err != nil || resp.StatusCode != code {
						t.Errorf("%d %s, NewClient: %v, %v; want the %d answer", code, loc, resp, err, code)
					}
				default:
					var ue *url.Error // http.Client's, quoting the URL
					if !errors.As(err, &ue) {
						t.Fatalf("%d %s, own client: err = %v, want a *url.Error", code, loc, err)
					}
					assertUnknown(t, ue.Err)
				}
				if resp != nil {
					resp.Body.Close()
				}
			}
		}
	}
}
