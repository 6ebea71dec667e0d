package gateway_test

import (
	"bytes"
	"errors"
	"fmt"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// TestStreamTransportProxyRefusalQuotesNoCredentials: a proxy refuses a
// streamed call's CONNECT with a reason phrase (or a malformed status
// line) quoting the Proxy-Authorization it was sent. The not-dispatched
// error, which the gateway puts in the app's answer, its journal and its
// trace, carries the status code only: neither the credentials nor their
// base64 form.
func TestStreamTransportProxyRefusalQuotesNoCredentials(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		frame func(auth string) string
		want  string // in the error
	}{
		"reason phrase": {func(auth string) string {
			return "HTTP/1.1 407 Proxy Auth Required user:proxypass@ " + auth + "\r\nContent-Length: 0\r\n\r\n"
		}, "407 Proxy Authentication Required"},
		"another refusal": {func(auth string) string {
			return "HTTP/1.1 502 upstream user:proxypass unreachable\r\nContent-Length: 0\r\n\r\n"
		}, "502 Bad Gateway"},
		"malformed status code": {func(auth string) string {
			return "HTTP/1.1 " + strings.TrimPrefix(auth, "Basic ") + " x\r\n\r\n"
		}, "bytes are not quoted"},
		"malformed line": {func(auth string) string {
			return strings.ReplaceAll(auth, " ", "") + "\r\n\r\n"
		}, "bytes are not quoted"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			proxy := testkit.RawServer(t, func(c net.Conn, req *http.Request) {
				c.Write([]byte(tc.frame(req.Header.Get("Proxy-Authorization"))))
			})
			pu, err := url.Parse(proxy)
			if err != nil {
				t.Fatal(err)
			}
			pu.User = url.UserPassword("user", "proxypass")
			rt := gateway.NewStreamTransportConfig(gateway.StreamConfig{Proxy: http.ProxyURL(pu)})
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, "https://api.example.invalid/bot1:x/sendDocument", strings.NewReader("part"))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
				t.Fatalf("RoundTrip answered %d through a refusing proxy", resp.StatusCode)
			}
			var nd interface{ NotDispatched() bool }
			if !errors.As(err, &nd) || !nd.NotDispatched() {
				t.Errorf("err = %v, want it marked not dispatched", err)
			}
			if err == nil {
				return
			}
			for _, s := range []string{"proxypass", "dXNlcjpwcm94eXBhc3M"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error leaks the proxy credentials: %v", err)
				}
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestStreamedUploadThroughRefusingProxyAnswersNoCredentials: the same
// refusal met by a streamed upload through the gateway. The app is
// answered not dispatched, with the proxy's status code, and neither its
// answer nor anything it can read quotes the proxy's credentials.
func TestStreamedUploadThroughRefusingProxyAnswersNoCredentials(t *testing.T) {
	t.Parallel()
	proxy := testkit.RawServer(t, func(c net.Conn, req *http.Request) {
		c.Write([]byte("HTTP/1.1 407 Proxy Auth Required user:proxypass@ " + req.Header.Get("Proxy-Authorization") + "\r\nContent-Length: 0\r\n\r\n"))
	})
	pu, err := url.Parse(proxy)
	if err != nil {
		t.Fatal(err)
	}
	pu.User = url.UserPassword("user", "proxypass")
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.MaxBufferedBody = 32 << 10
		c.APIRoot = "https://api.example.invalid"
		c.StreamTransport = gateway.NewStreamTransportConfig(gateway.StreamConfig{Proxy: http.ProxyURL(pu)})
	}})
	id := f.claim(t, 9)
	body := &bytes.Buffer{}
	mw := multipart.NewWriter(body)
	_ = mw.WriteField("chat_id", itoa(f.chat.ID))
	fw, _ := mw.CreateFormFile("document", "big.bin")
	fw.Write(bytes.Repeat([]byte("0123456789"), 100<<10/10))
	mw.Close()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost,
		f.srv.URL+"/a/9/"+itoa(int64(id.Attempt))+"/"+id.ClaimID+"/bot"+f.tg.Token+"/sendDocument", bytes.NewReader(body.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	r := do(t, req)
	if r.status != gateway.StatusNotDispatched {
		t.Errorf("upload answered %d %s; want %d (not dispatched)", r.status, r.body, gateway.StatusNotDispatched)
	}
	for _, s := range []string{"proxypass", "dXNlcjpwcm94eXBhc3M"} {
		if bytes.Contains(r.body, []byte(s)) || strings.Contains(fmt.Sprint(r.header), s) {
			t.Errorf("the app's answer leaks the proxy credentials: %s", r.body)
		}
	}
	if !strings.Contains(r.env.Description, "407 Proxy Authentication Required") {
		t.Errorf("description %q; want the proxy's status code", r.env.Description)
	}
}
