package transport_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/transport"
)

func trusting(srv *httptest.Server) *tls.Config {
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return &tls.Config{RootCAs: pool}
}

func newTLSServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"ok":true,"result":{}}`))
	}))
	// The untrusted-certificate tests make the server log handshake errors.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.EnableHTTP2 = true // offered: the transport must still speak HTTP/1.1
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, &requests
}

func TestTLS(t *testing.T) {
	t.Parallel()
	srv, requests := newTLSServer(t)
	t.Run("trusted", func(t *testing.T) {
		tr := newTransport(t, transport.Config{TLSConfig: trusting(srv)})
		resp, err := send(t.Context(), tr, srv.URL)
		if err != nil {
			t.Fatalf("RoundTrip over TLS: %v", err)
		}
		resp.Body.Close()
	})
	t.Run("caller's TLS config offers h2", func(t *testing.T) {
		cfg := trusting(srv)
		cfg.NextProtos = []string{"h2", "http/1.1"}
		tr := newTransport(t, transport.Config{TLSConfig: cfg})
		resp, err := send(t.Context(), tr, srv.URL)
		if err != nil {
			t.Fatalf("RoundTrip with h2 offered: %v", err)
		}
		resp.Body.Close()
		if resp.ProtoMajor != 1 {
			t.Errorf("answer over %s, want HTTP/1.1", resp.Proto)
		}
		if !slices.Equal(cfg.NextProtos, []string{"h2", "http/1.1"}) {
			t.Errorf("the caller's TLS config was changed: NextProtos = %q", cfg.NextProtos)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		before := requests.Load()
		tr := newTransport(t, transport.Config{})
		_, err := send(t.Context(), tr, srv.URL)
		assertNotDispatched(t, err, transport.StageTLS)
		if requests.Load() != before {
			t.Error("the server received a request over an untrusted connection")
		}
	})
	t.Run("an address refused after the TLS failure", func(t *testing.T) {
		// The error is the failure that got furthest, not the last one.
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
		var nd net.Dialer
		tr := newTransport(t, transport.Config{
			AttemptDelay: transport.MaxAttemptDelay,
			LookupFunc: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
				if network == "ip6" {
					return nil, nil
				}
				return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")}, nil
			},
			DialFunc: func(ctx context.Context, network, address string) (net.Conn, error) {
				if strings.HasPrefix(address, "127.0.0.2:") {
					return nil, errors.New("connection refused (simulated)")
				}
				return nd.DialContext(ctx, network, address)
			},
		})
		_, err := send(t.Context(), tr, "https://telegram.test:"+port)
		assertNotDispatched(t, err, transport.StageTLS)
	})
}

// connectProxy is a loopback HTTP CONNECT proxy. With refuse set it answers
// every CONNECT with 502; otherwise it tunnels to the requested address.
type connectProxy struct {
	*rawServer
	targets chan string
	auth    chan string
}

func newConnectProxy(t *testing.T, refuse bool) *connectProxy {
	t.Helper()
	p := &connectProxy{targets: make(chan string, 16), auth: make(chan string, 16)}
	p.rawServer = newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil || req.Method != http.MethodConnect {
			return
		}
		p.targets <- req.Host
		p.auth <- req.Header.Get("Proxy-Authorization")
		if refuse {
			io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			return
		}
		up, err := net.Dial("tcp", req.Host)
		if err != nil {
			io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
			return
		}
		defer up.Close()
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		done := make(chan struct{})
		go func() {
			io.Copy(up, br)
			up.(*net.TCPConn).CloseWrite()
			close(done)
		}()
		io.Copy(c, up)
		c.Close()
		<-done
	})
	return p
}

func proxyAt(raw string) func(*http.Request) (*url.URL, error) {
	u, _ := url.Parse(raw)
	return func(*http.Request) (*url.URL, error) { return u, nil }
}

func TestProxyRefusingConnectIsNotDispatched(t *testing.T) {
	t.Parallel()
	srv, requests := newTLSServer(t)
	p := newConnectProxy(t, true)
	tr := newTransport(t, transport.Config{TLSConfig: trusting(srv), Proxy: proxyAt("http://user:proxypass@" + p.addr)})
	_, err := send(t.Context(), tr, srv.URL)
	assertNotDispatched(t, err, transport.StageProxy)
	if strings.Contains(err.Error(), "proxypass") {
		t.Errorf("error leaks the proxy password: %v", err)
	}
	if !strings.Contains(err.Error(), "502") {
		t.Errorf("error %q does not say what the proxy answered", err)
	}
	if requests.Load() != 0 {
		t.Error("the server received a request")
	}
}

func TestProxyTunnelCarriesTheRequest(t *testing.T) {
	t.Parallel()
	srv, requests := newTLSServer(t)
	p := newConnectProxy(t, false)
	var proxy atomic.Pointer[url.URL]
	proxy.Store(&url.URL{Scheme: "http", User: url.UserPassword("user", "proxypass"), Host: p.addr})
	tr := newTransport(t, transport.Config{TLSConfig: trusting(srv), Proxy: func(*http.Request) (*url.URL, error) { return proxy.Load(), nil }})
	for range 2 {
		resp, err := send(t.Context(), tr, srv.URL)
		if err != nil {
			t.Fatalf("RoundTrip through the proxy: %v", err)
		}
		resp.Body.Close()
	}
	target := strings.TrimPrefix(srv.URL, "https://")
	if got := <-p.targets; got != target {
		t.Errorf("CONNECT target = %q, want %q", got, target)
	}
	if got := <-p.auth; got != "Basic dXNlcjpwcm94eXBhc3M=" {
		t.Errorf("Proxy-Authorization = %q", got)
	}
	if requests.Load() != 2 || p.accepts.Load() != 1 {
		t.Errorf("requests = %d, proxy accepts = %d; want 2 requests over 1 tunnel", requests.Load(), p.accepts.Load())
	}
	// The idle tunnel leads through that proxy only: a request for which
	// the Proxy func picks another (one refusing CONNECT) does not use it.
	proxy.Store(&url.URL{Scheme: "http", Host: newConnectProxy(t, true).addr})
	_, err := send(t.Context(), tr, srv.URL)
	assertNotDispatched(t, err, transport.StageProxy)
}

func TestProxyUnsupportedScheme(t *testing.T) {
	t.Parallel()
	srv, _ := newTLSServer(t)
	tr := newTransport(t, transport.Config{Proxy: proxyAt("socks5://127.0.0.1:1")})
	_, err := send(t.Context(), tr, srv.URL)
	assertNotDispatched(t, err, transport.StageProxy)
}

func TestProxyFunctionErrorHidesItsText(t *testing.T) {
	t.Parallel()
	tr := newTransport(t, transport.Config{Proxy: func(*http.Request) (*url.URL, error) {
		return nil, &url.Error{Op: "parse", URL: "http://u:proxypass@bad", Err: io.EOF}
	}})
	_, err := send(context.Background(), tr, "https://127.0.0.1:1")
	assertNotDispatched(t, err, transport.StageProxy)
	if strings.Contains(err.Error(), "proxypass") {
		t.Errorf("error leaks the proxy password: %v", err)
	}
}

func TestHTTPSProxy(t *testing.T) {
	t.Parallel()
	srv, requests := newTLSServer(t)
	p := newConnectProxy(t, false)
	// Put TLS in front of the proxy with the server's own certificate,
	// which the client trusts and which is valid for 127.0.0.1.
	front := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		tc := tls.Server(c, srv.TLS)
		defer tc.Close()
		up, err := net.Dial("tcp", p.addr)
		if err != nil {
			return
		}
		defer up.Close()
		done := make(chan struct{})
		go func() {
			io.Copy(up, tc)
			up.(*net.TCPConn).CloseWrite()
			close(done)
		}()
		io.Copy(tc, up)
		tc.Close()
		<-done
	})
	tr := newTransport(t, transport.Config{TLSConfig: trusting(srv), Proxy: proxyAt("https://" + front.addr)})
	resp, err := send(t.Context(), tr, srv.URL)
	if err != nil {
		t.Fatalf("RoundTrip through an https proxy: %v", err)
	}
	resp.Body.Close()
	if requests.Load() != 1 {
		t.Errorf("requests = %d, want 1", requests.Load())
	}
	// An untrusted https proxy fails at stage proxy.
	tr = newTransport(t, transport.Config{Proxy: proxyAt("https://" + front.addr)})
	_, err = send(t.Context(), tr, srv.URL)
	assertNotDispatched(t, err, transport.StageProxy)
}
