package transport_test

import (
	"bufio"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/transport"
)

// TestEchoedRequestLineNeverReachesTheError: a hostile server answers with
// the request line it read (which holds the token, as the Bot API carries
// it in the path) where a status line or a header belongs. net/http's
// parser quotes the malformed line in its error; the transport's error
// must not carry the token on.
func TestEchoedRequestLineNeverReachesTheError(t *testing.T) {
	t.Parallel()
	for name, frame := range map[string]func(line string) string{
		"status code": func(line string) string { return "HTTP/1.1 " + strings.Fields(line)[1] + " x\r\n\r\n" },
		"status line": func(line string) string { return line + "\r\n\r\n" },
		"header line": func(line string) string { return "HTTP/1.1 200 OK\r\n" + line + "\r\n\r\n" },
		"header name": func(line string) string { return "HTTP/1.1 200 OK\r\n" + strings.Fields(line)[1] + ": x\r\n\r\n" },
		"chunk size": func(line string) string {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + strings.Fields(line)[1] + "\r\n"
		},
		"trailer line": func(line string) string {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + line + "\r\n\r\n"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
				br := bufio.NewReader(c)
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				if _, _, err := readRequest(bufio.NewReader(strings.NewReader(line + readRest(br)))); err != nil {
					return
				}
				c.Write([]byte(frame(strings.TrimRight(line, "\r\n"))))
			})
			tr := newTransport(t, transport.Config{})
			_, err := send(t.Context(), tr, srv.url())
			assertUnknown(t, err)
		})
	}
}

// readRest reads the rest of a request after its first line: its headers
// and its Content-Length body.
func readRest(br *bufio.Reader) string {
	var b strings.Builder
	n := 0
	for {
		l, err := br.ReadString('\n')
		b.WriteString(l)
		if err != nil || l == "\r\n" {
			break
		}
		if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Content-Length") {
			for _, r := range strings.TrimSpace(v) {
				n = n*10 + int(r-'0')
			}
		}
	}
	body := make([]byte, n)
	for i := range body {
		body[i], _ = br.ReadByte()
	}
	b.Write(body)
	return b.String()
}

// TestResultMethodNeverHoldsTheToken: a call whose URL path ends in the
// token segment itself ("/bot<token>" or "/bot<token>/", a library called
// with an empty method) must not hand the token to a result func as the
// method.
func TestResultMethodNeverHoldsTheToken(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	tr := newTransport(t, transport.Config{})
	for _, p := range []string{"/bot123456:" + secret, "/bot123456:" + secret + "/"} {
		var got transport.Result
		ctx := transport.WithResultFunc(t.Context(), func(r transport.Result) { got = r })
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.url()+p, strings.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if strings.Contains(got.Method, secret) {
			t.Errorf("path %q: Result.Method = %q holds the token", p, got.Method)
		}
	}
}

// TestProxyEchoingCredentialsNeverReachesTheError: a proxy refuses the
// CONNECT with a reason phrase (or a malformed line) quoting the
// Proxy-Authorization it was sent. The not-dispatched error must carry
// neither the credentials nor their base64 form.
func TestProxyEchoingCredentialsNeverReachesTheError(t *testing.T) {
	t.Parallel()
	for name, frame := range map[string]func(auth string) string{
		"reason phrase": func(auth string) string { return "HTTP/1.1 407 bad " + auth + "\r\nContent-Length: 0\r\n\r\n" },
		"malformed":     func(auth string) string { return "HTTP/1.1 " + auth + "\r\n\r\n" },
		"status code":   func(auth string) string { return "HTTP/1.1 " + strings.Fields(auth)[1] + " x\r\n\r\n" },
		"header line":   func(auth string) string { return "HTTP/1.1 200 OK\r\n" + auth + "\r\n\r\n" },
		// Not a refusal: the tunnel's 200, but with an answer glued on
		// before any request went through it, or a redirect instead.
		"answer before the request": func(string) string { return "HTTP/1.1 200 Connection established\r\n\r\n" + okResponse },
		"redirect": func(string) string {
			return "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/\r\nContent-Length: 0\r\n\r\n"
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				c.Write([]byte(frame(req.Header.Get("Proxy-Authorization"))))
			})
			tr := newTransport(t, transport.Config{Proxy: proxyAt("http://user:proxypass@" + p.addr)})
			_, err := send(t.Context(), tr, "http://api.example.invalid")
			assertNotDispatched(t, err, transport.StageProxy)
			for _, s := range []string{"proxypass", "dXNlcjpwcm94eXBhc3M"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error leaks the proxy credentials: %v", err)
				}
			}
		})
	}
}
