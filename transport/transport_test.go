package transport_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/transport"
)

func TestRoundTripFramesTheRequest(t *testing.T) {
	t.Parallel()
	type seen struct {
		req  *http.Request
		raw  string
		body []byte
	}
	got := make(chan seen, 1)
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		var raw bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &raw))
		req, body, err := readRequest(br)
		if err != nil {
			return
		}
		got <- seen{req, raw.String(), body}
		io.WriteString(c, okResponse)
	})
	tr := newTransport(t, transport.Config{})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Length", "999")
	req.Header.Set("Connection", "keep-alive")
	req.Header.Set("X-Trace", "abc")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != `{"ok":true}` {
		t.Errorf("answer = %d %q", resp.StatusCode, body)
	}
	s := <-got
	if s.req.Method != "POST" || s.req.URL.Path != secretPath || string(s.body) != payload {
		t.Errorf("server saw %s %s %q", s.req.Method, s.req.URL.Path, s.body)
	}
	if !strings.HasPrefix(s.raw, "POST "+secretPath+" HTTP/1.1\r\n") {
		t.Errorf("request line: %q", s.raw)
	}
	for _, h := range []string{"Content-Length: ", "Host: "} {
		if n := strings.Count(s.raw, h); n != 1 {
			t.Errorf("%q appears %d times in %q", h, n, s.raw)
		}
	}
	if strings.Contains(s.raw, "999") || strings.Contains(strings.ToLower(s.raw), "connection:") {
		t.Errorf("caller's framing headers were repeated: %q", s.raw)
	}
	if s.req.Header.Get("X-Trace") != "abc" {
		t.Errorf("custom header lost: %q", s.raw)
	}
}

func TestRefusedConnectionIsNotDispatched(t *testing.T) {
	t.Parallel()
	addr := closedport.Addr(t) // connect is refused
	tr := newTransport(t, transport.Config{})
	_, err := send(t.Context(), tr, "http://"+addr)
	assertNotDispatched(t, err, transport.StageConnect)
}

func TestResetAfterRequestIsUnknown(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		requests.Add(1)
		c.(*net.TCPConn).SetLinger(0) // close with RST
	})
	tr := newTransport(t, transport.Config{})
	_, err := send(t.Context(), tr, srv.url())
	assertUnknown(t, err)
	if n := requests.Load(); n != 1 {
		t.Errorf("server received %d requests, want exactly 1 (no hidden retry)", n)
	}
}

func TestLookupFailureIsNotDispatched(t *testing.T) {
	t.Parallel()
	tr := newTransport(t, transport.Config{
		LookupFunc: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		},
	})
	_, err := send(t.Context(), tr, "http://api.telegram.test")
	assertNotDispatched(t, err, transport.StageLookup)
}

// blackHoleDialer dials real sockets, except that dials to hole never
// answer until the attempt is cancelled. It records the dial order.
type blackHoleDialer struct {
	hole  netip.Addr
	mu    sync.Mutex
	order []string
}

func (d *blackHoleDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	ap := netip.MustParseAddrPort(address)
	d.mu.Lock()
	d.order = append(d.order, ap.Addr().String())
	d.mu.Unlock()
	if ap.Addr() == d.hole {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

func TestSilentFirstAddressLosesTheRace(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	_, port, _ := net.SplitHostPort(srv.addr)
	d := &blackHoleDialer{hole: netip.MustParseAddr("127.0.0.2")}
	tr := newTransport(t, transport.Config{
		LookupFunc: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
			if network == "ip6" {
				return nil, nil
			}
			return []netip.Addr{netip.MustParseAddr("127.0.0.2"), netip.MustParseAddr("127.0.0.1")}, nil
		},
		DialFunc: d.dial,
	})
	resp, err := send(t.Context(), tr, "http://telegram.test:"+port)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	resp.Body.Close()
	d.mu.Lock()
	defer d.mu.Unlock()
	if want := []string{"127.0.0.2", "127.0.0.1"}; !slices.Equal(d.order, want) {
		t.Errorf("dial order = %v, want %v", d.order, want)
	}
}

func TestIPv6Loopback(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	ln.Close()
	srv := newRawServer(t, "tcp", "[::1]:0", serveOK)
	tr := newTransport(t, transport.Config{})
	resp, err := send(t.Context(), tr, srv.url())
	if err != nil {
		t.Fatalf("RoundTrip over [::1]: %v", err)
	}
	resp.Body.Close()
}

func TestOversizedAnswerIsUnknown(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 4096)
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4096\r\n\r\n"+big)
	})
	tr := newTransport(t, transport.Config{MaxResponseBytes: 1024})
	_, err := send(t.Context(), tr, srv.url())
	assertUnknown(t, err)
	if !errors.Is(err, transport.ErrResponseTooLarge) {
		t.Errorf("err = %v, want ErrResponseTooLarge", err)
	}
}

func TestAnswerAtTheSizeLimitIsAccepted(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	tr := newTransport(t, transport.Config{MaxResponseBytes: int64(len(okResponse))})
	resp, err := send(t.Context(), tr, srv.url())
	if err != nil {
		t.Fatalf("an answer of exactly MaxResponseBytes failed: %v", err)
	}
	resp.Body.Close()
}

func TestSlowAnswerIsUnknown(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		requests.Add(1)
		io.Copy(io.Discard, c) // never answers; ends when the client closes
	})
	tr := newTransport(t, transport.Config{})
	ctx := transport.WithResponseTimeout(t.Context(), 50*time.Millisecond)
	_, err := send(ctx, tr, srv.url())
	assertUnknown(t, err)
	if !errors.Is(err, transport.ErrResponseTimeout) {
		t.Errorf("err = %v, want ErrResponseTimeout", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("server received %d requests, want 1", n)
	}
	testkit.WaitFor(t, "the timed-out connection to be closed", func() bool { return srv.open.Load() == 0 })
}

func TestInvalidResponseTimeoutIsRejected(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	tr := newTransport(t, transport.Config{})
	_, err := send(transport.WithResponseTimeout(t.Context(), 0), tr, srv.url())
	assertNotDispatched(t, err, transport.StageRequest)
	if srv.accepts.Load() != 0 {
		t.Error("a connection was opened for an invalid request")
	}
}

func TestRequestBodyLimit(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	tr := newTransport(t, transport.Config{MaxRequestBytes: int64(len(payload)) - 1})
	_, err := send(t.Context(), tr, srv.url())
	assertNotDispatched(t, err, transport.StageRequest)
	if !errors.Is(err, transport.ErrRequestTooLarge) {
		t.Errorf("err = %v, want ErrRequestTooLarge", err)
	}
	tr = newTransport(t, transport.Config{MaxRequestBytes: int64(len(payload))})
	resp, err := send(t.Context(), tr, srv.url())
	if err != nil {
		t.Fatalf("a body of exactly MaxRequestBytes failed: %v", err)
	}
	resp.Body.Close()
}

func TestUnsupportedScheme(t *testing.T) {
	t.Parallel()
	tr := newTransport(t, transport.Config{})
	req, _ := http.NewRequest(http.MethodPost, "ftp://127.0.0.1"+secretPath, nil)
	_, err := tr.RoundTrip(req)
	assertNotDispatched(t, err, transport.StageRequest)
	if !errors.Is(err, transport.ErrUnsupportedScheme) {
		t.Errorf("err = %v, want ErrUnsupportedScheme", err)
	}
}

func TestInvalidHeaderIsNotDispatched(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	tr := newTransport(t, transport.Config{})
	req, _ := http.NewRequest(http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
	req.Header["X-Bad"] = []string{"a\r\nInjected: 1"}
	_, err := tr.RoundTrip(req)
	assertNotDispatched(t, err, transport.StageRequest)
	if srv.accepts.Load() != 0 {
		t.Error("a connection was opened for an invalid request")
	}
}

// closeTracker records whether Close was called.
type closeTracker struct {
	io.Reader
	closed atomic.Bool
}

func (c *closeTracker) Close() error { c.closed.Store(true); return nil }

func TestRequestBodyClosedOnError(t *testing.T) {
	t.Parallel()
	tr := newTransport(t, transport.Config{})
	body := &closeTracker{Reader: strings.NewReader(payload)}
	req, _ := http.NewRequest(http.MethodPost, "ftp://127.0.0.1/x", body)
	tr.RoundTrip(req)
	if !body.closed.Load() {
		t.Error("request body not closed after an error")
	}
}

func TestKeepAliveReusesConnections(t *testing.T) {
	t.Parallel()
	var newConns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte(`{"ok":true}`))
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			newConns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	tr := newTransport(t, transport.Config{})
	for i := range 5 {
		resp, err := send(t.Context(), tr, srv.URL)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if n := newConns.Load(); n != 1 {
		t.Errorf("5 sequential requests used %d connections, want 1", n)
	}
}

func TestConcurrentRequests(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	tr := newTransport(t, transport.Config{MaxIdleConnsPerHost: 4})
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 16 {
		wg.Go(func() {
			for range 4 {
				resp, err := send(t.Context(), tr, srv.url())
				if err != nil {
					errs <- err
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tr.CloseIdleConnections()
	testkit.WaitFor(t, "every connection to be closed", func() bool { return srv.open.Load() == 0 })
}

func TestIdleConnectionClosedByServer(t *testing.T) {
	t.Parallel()
	t.Run("a fresh connection carries the next request", func(t *testing.T) {
		t.Parallel()
		closed := make(chan struct{}, 4)
		srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
			if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, okResponse) // keep-alive framing ...
			c.Close()                     // ... then the server drops the idle connection
			closed <- struct{}{}
		})
		tr := newTransport(t, transport.Config{})
		for i := range 2 {
			resp, err := send(t.Context(), tr, srv.url())
			if err != nil {
				t.Fatalf("request %d: %v", i, err)
			}
			resp.Body.Close()
			select {
			case <-closed:
			case <-time.After(waitLimit):
				t.Fatal("server did not close")
			}
			// The FIN reaches our socket asynchronously after Close.
			testkit.WaitFor(t, "the client to see the close", func() bool { return srv.open.Load() == 0 })
		}
		if n := srv.accepts.Load(); n != 2 {
			t.Errorf("accepts = %d, want 2 (the stale connection must not be used)", n)
		}
	})
	t.Run("no server left: not dispatched, never unknown", func(t *testing.T) {
		t.Parallel()
		closed := make(chan struct{}, 1)
		srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
			if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, okResponse)
			c.Close()
			closed <- struct{}{}
		})
		tr := newTransport(t, transport.Config{})
		resp, err := send(t.Context(), tr, srv.url())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		<-closed
		srv.close() // the listener is gone too
		_, err = send(t.Context(), tr, srv.url())
		assertNotDispatched(t, err, transport.StageConnect)
	})
}

func TestIdleConnectionWithUnsolicitedBytesIsNotReused(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			// A framed answer followed by bytes nobody asked for.
			io.WriteString(c, okResponse+"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		}
	})
	tr := newTransport(t, transport.Config{})
	for i := range 2 {
		resp, err := send(t.Context(), tr, srv.url())
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != `{"ok":true}` {
			t.Errorf("request %d got %q: a stray answer was taken as the answer", i, body)
		}
	}
	if n := srv.accepts.Load(); n != 2 {
		t.Errorf("accepts = %d, want 2 (a connection with stray bytes must not be reused)", n)
	}
}

// flakyConn fails its next Write without writing anything once armed, as a
// socket reset by the peer does.
type flakyConn struct {
	net.Conn
	failWrite *atomic.Bool
}

func (c *flakyConn) Write(p []byte) (int, error) {
	if c.failWrite.CompareAndSwap(true, false) {
		return 0, errors.New("connection reset by peer (simulated)")
	}
	return c.Conn.Write(p)
}

func TestReusedConnectionFailingBeforeTheFirstByte(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			requests.Add(1)
			io.WriteString(c, okResponse)
		}
	})
	var failWrite atomic.Bool
	var nd net.Dialer
	tr := newTransport(t, transport.Config{DialFunc: func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &flakyConn{Conn: c, failWrite: &failWrite}, nil
	}})
	resp, err := send(t.Context(), tr, srv.url())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	failWrite.Store(true) // the pooled connection now fails before writing
	resp, err = send(t.Context(), tr, srv.url())
	if err != nil {
		t.Fatalf("request on a stale reused connection: %v (want a fresh connection)", err)
	}
	resp.Body.Close()
	if a, r := srv.accepts.Load(), requests.Load(); a != 2 || r != 2 {
		t.Errorf("accepts = %d, requests = %d; want 2 and 2", a, r)
	}
	// On a fresh connection the same failure is reported, not retried.
	tr2 := newTransport(t, transport.Config{DisableKeepAlives: true, DialFunc: func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		failWrite.Store(true)
		return &flakyConn{Conn: c, failWrite: &failWrite}, nil
	}})
	_, err = send(t.Context(), tr2, srv.url())
	assertNotDispatched(t, err, transport.StageRequest)
	if r := requests.Load(); r != 2 {
		t.Errorf("requests = %d, want still 2", r)
	}
}

func TestIdleTimeoutDropsOldConnections(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	var now atomic.Int64
	now.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	tr := newTransport(t, transport.Config{
		IdleConnTimeout: time.Minute,
		Test:            transport.TestHooks{NowFunc: func() time.Time { return time.Unix(0, now.Load()) }},
	})
	for i, advance := range []time.Duration{0, 59 * time.Second, 61 * time.Second} {
		now.Add(int64(advance))
		resp, err := send(t.Context(), tr, srv.url())
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if n := srv.accepts.Load(); n != 2 {
		t.Errorf("accepts = %d, want 2 (reuse within the idle timeout, a new one after)", n)
	}
}

func TestDisableKeepAlives(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	tr := newTransport(t, transport.Config{DisableKeepAlives: true})
	for range 3 {
		resp, err := send(t.Context(), tr, srv.url())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := srv.accepts.Load(); n != 3 {
		t.Errorf("accepts = %d, want 3", n)
	}
	testkit.WaitFor(t, "connections to be closed", func() bool { return srv.open.Load() == 0 })
}

func TestIdlePoolIsBounded(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var arrived atomic.Int32
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			if arrived.Add(1) <= 4 {
				<-release // hold the first four so they need four connections
			}
			io.WriteString(c, okResponse)
		}
	})
	tr := newTransport(t, transport.Config{MaxIdleConnsPerHost: 2})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if resp, err := send(t.Context(), tr, srv.url()); err == nil {
				resp.Body.Close()
			} else {
				t.Error(err)
			}
		})
	}
	testkit.WaitFor(t, "four requests in flight", func() bool { return arrived.Load() == 4 })
	close(release)
	wg.Wait()
	testkit.WaitFor(t, "the pool to close the connections it cannot keep", func() bool { return srv.open.Load() == 2 })
}

func TestConfigResponseTimeout(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.Copy(io.Discard, c) // never answers
	})
	tr := newTransport(t, transport.Config{ResponseTimeout: 50 * time.Millisecond})
	_, err := send(t.Context(), tr, srv.url())
	assertUnknown(t, err)
	if !errors.Is(err, transport.ErrResponseTimeout) {
		t.Errorf("err = %v, want ErrResponseTimeout", err)
	}
}

func TestRequestCloseSendsConnectionClose(t *testing.T) {
	t.Parallel()
	heads := make(chan string, 2)
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, _, err := readRequest(br)
			if err != nil {
				return
			}
			heads <- req.Header.Get("Connection")
			io.WriteString(c, okResponse)
		}
	})
	tr := newTransport(t, transport.Config{})
	for range 2 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
		req.Close = true
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if h := <-heads; h != "close" {
			t.Errorf("Connection header = %q, want close", h)
		}
	}
	if n := srv.accepts.Load(); n != 2 {
		t.Errorf("accepts = %d, want 2 (Request.Close must not reuse)", n)
	}
}
