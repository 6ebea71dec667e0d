package gateway_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
)

// TestStreamTransportTLSFailureIsNotDispatched: a streamed upload whose TLS
// handshake failed (an untrusted certificate, a server closing
// mid-handshake) never wrote a byte: it is not dispatched, so the gateway
// may send it again, rather than unknown (answered 502 and never sent).
func TestStreamTransportTLSFailureIsNotDispatched(t *testing.T) {
	t.Parallel()
	untrusted := httptest.NewUnstartedServer(http.NotFoundHandler())
	untrusted.Config.ErrorLog = nil
	untrusted.StartTLS()
	t.Cleanup(untrusted.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b := make([]byte, 10)
			c.Read(b) // part of the ClientHello, then gone
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })

	rt := gateway.NewStreamTransportConfig(gateway.StreamConfig{Proxy: func(*http.Request) (*url.URL, error) { return nil, nil }})
	for name, root := range map[string]string{"untrusted certificate": untrusted.URL, "closed mid-handshake": "https://" + ln.Addr().String()} {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, root+"/bot1:x/sendDocument", strings.NewReader("part"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.RoundTrip(req)
		if resp != nil {
			resp.Body.Close()
		}
		var nd interface{ NotDispatched() bool }
		if !errors.As(err, &nd) || !nd.NotDispatched() {
			t.Errorf("%s: err = %v, want it marked not dispatched", name, err)
		}
	}
}
