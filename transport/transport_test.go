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

// seenRequest is a request as a server read it.
type seenRequest struct {
	req  *http.Request
	raw  string
	body []byte
}

func TestRoundTripFramesTheRequest(t *testing.T) {
	t.Parallel()
	got := make(chan seenRequest, 1)
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		var raw bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &raw))
		for {
			req, body, err := readRequest(br)
			if err != nil {
				return
			}
			got <- seenRequest{req, raw.String(), body}
			raw.Reset()
			io.WriteString(c, okResponse)
		}
	})
	tr := newTransport(t, transport.Config{})
	// A GET with a body is framed too: without its Content-Length the body
	// would be read as the next request.
	for _, method := range []string{http.MethodPost, http.MethodGet} {
		framesTheRequest(t, tr, srv.url(), method, got)
	}
}

func framesTheRequest(t *testing.T, tr *transport.Transport, base, method string, got <-chan seenRequest) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), method, base+secretPath, strings.NewReader(payload))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Content-Length", "999")
	req.Header.Set("Connection", "keep-alive")
	req.Header.Set("X-Trace", "abc")
	req.Header.Set("Transfer-Encoding", "chunked")
	req.Header.Set("Host", "other.example")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != `{"ok":true}` {
		t.Errorf("answer = %d %q", resp.StatusCode, body)
	}
	s := <-got
	if s.req.Method != method || s.req.URL.Path != secretPath || string(s.body) != payload {
		t.Errorf("server saw %s %s %q", s.req.Method, s.req.URL.Path, s.body)
	}
	if !strings.HasPrefix(s.raw, method+" "+secretPath+" HTTP/1.1\r\n") {
		t.Errorf("request line: %q", s.raw)
	}
	for _, h := range []string{"Content-Length: ", "Host: "} {
		if n := strings.Count(s.raw, h); n != 1 {
			t.Errorf("%q appears %d times in %q", h, n, s.raw)
		}
	}
	if strings.Contains(s.raw, "999") || strings.Contains(strings.ToLower(s.raw), "connection:") ||
		strings.Contains(strings.ToLower(s.raw), "transfer-encoding") || strings.Contains(s.raw, "other.example") {
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
// answer until the attempt is cancelled, or, when late is set, ignore the
// cancellation and connect to 127.0.0.1 once late is closed. It records the
// dial order.
type blackHoleDialer struct {
	hole     netip.Addr
	late     chan struct{}
	mu       sync.Mutex
	order    []string
	lateConn net.Conn
}

func (d *blackHoleDialer) dial(ctx context.Context, network, address string) (net.Conn, error) {
	ap := netip.MustParseAddrPort(address)
	d.mu.Lock()
	d.order = append(d.order, ap.Addr().String())
	d.mu.Unlock()
	if ap.Addr() == d.hole {
		if d.late == nil {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		<-d.late
		var nd net.Dialer
		c, err := nd.DialContext(context.Background(), network, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), ap.Port()).String())
		d.mu.Lock()
		d.lateConn = c // kept reachable: only a Close, not the GC, closes it
		d.mu.Unlock()
		return c, err
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, address)
}

// TestSilentFirstAddressLosesTheRace: an address that does not answer
// loses to the next one; if it connects after all once the race is won, that
// connection is closed.
func TestSilentFirstAddressLosesTheRace(t *testing.T) {
	t.Parallel()
	for _, late := range []bool{false, true} {
		silentFirstAddressLoses(t, late)
	}
}

func silentFirstAddressLoses(t *testing.T, late bool) {
	closed := make(chan struct{}, 2)
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		serveOK(c)
		closed <- struct{}{}
	})
	_, port, _ := net.SplitHostPort(srv.addr)
	d := &blackHoleDialer{hole: netip.MustParseAddr("127.0.0.2")}
	if late {
		d.late = make(chan struct{})
	}
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
	if want := []string{"127.0.0.2", "127.0.0.1"}; !slices.Equal(d.order, want) {
		t.Errorf("dial order = %v, want %v", d.order, want)
	}
	d.mu.Unlock()
	if late {
		close(d.late)
		select {
		case <-closed: // the late connection; the winner is idle in the pool
		case <-time.After(waitLimit):
			t.Fatal("the connection of the attempt that lost the race was not closed")
		}
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

// TestAnswerAtTheSizeLimitIsAccepted: an answer of exactly
// MaxResponseBytes is accepted, one byte more is too large, and each answer
// on a kept connection has the whole limit, no more, whatever the earlier
// ones left unused.
func TestAnswerAtTheSizeLimitIsAccepted(t *testing.T) {
	t.Parallel()
	overByOne := strings.Replace(okResponse, "11\r\n\r\n{\"ok\":true}", "12\r\n\r\n{\"ok\":true} ", 1)
	answers := []string{okResponse, "HTTP/1.1 204 No Content\r\n\r\n", overByOne}
	srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) {
		br := bufio.NewReader(c)
		for _, a := range answers {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			io.WriteString(c, a)
		}
	})
	tr := newTransport(t, transport.Config{MaxResponseBytes: int64(len(okResponse))})
	for i := range 2 {
		resp, err := send(t.Context(), tr, srv.url())
		if err != nil {
			t.Fatalf("answer %d, within MaxResponseBytes, failed: %v", i, err)
		}
		resp.Body.Close()
	}
	_, err := send(t.Context(), tr, srv.url())
	assertUnknown(t, err)
	if !errors.Is(err, transport.ErrResponseTooLarge) {
		t.Errorf("an answer of MaxResponseBytes+1 on a kept connection: err = %v, want ErrResponseTooLarge", err)
	}
	if n := srv.accepts.Load(); n != 1 {
		t.Errorf("accepts = %d, want 1", n)
	}
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
	// An in-memory body whose ContentLength understates it is too large
	// too, never cut to the limit and sent.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
	req.ContentLength = 1
	_, err = tr.RoundTrip(req)
	if !errors.Is(err, transport.ErrRequestTooLarge) {
		t.Errorf("understated in-memory body: err = %v, want ErrRequestTooLarge", err)
	}
	if n := srv.accepts.Load(); n != 0 {
		t.Errorf("accepts = %d: a too large body was sent", n)
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
	for name, spoil := range map[string]func(*http.Request){
		"header value": func(r *http.Request) { r.Header["X-Bad"] = []string{"a\r\nInjected: 1"} },
		"method":       func(r *http.Request) { r.Method = "POST /x HTTP/1.1\r\nX:" },
		"path":         func(r *http.Request) { r.URL.Opaque = "/bot1:" + secret + " /sendMessage" },
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
		spoil(req)
		_, err := tr.RoundTrip(req)
		assertNotDispatched(t, err, transport.StageRequest)
		if srv.accepts.Load() != 0 {
			t.Errorf("%s: a connection was opened for an invalid request", name)
		}
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
	for name, spoil := range map[string]func(*http.Request){
		"unsupported scheme": func(r *http.Request) { r.URL.Scheme = "ftp" },
		"redirect":           func(r *http.Request) { r.Response = &http.Response{StatusCode: http.StatusFound} },
	} {
		body := &closeTracker{Reader: strings.NewReader(payload)}
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:1/x", body)
		spoil(req)
		if _, err := tr.RoundTrip(req); err == nil {
			t.Fatalf("%s: no error", name)
		}
		if !body.closed.Load() {
			t.Errorf("%s: request body not closed after an error", name)
		}
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

// flakyConn fails its next Write once armed, as a socket reset by the peer
// does: after writing the first *partial bytes (none unless set).
type flakyConn struct {
	net.Conn
	failWrite *atomic.Bool
	partial   *atomic.Int32
}

func (c *flakyConn) Write(p []byte) (int, error) {
	if c.failWrite.CompareAndSwap(true, false) {
		n := 0
		if c.partial != nil {
			n, _ = c.Conn.Write(p[:min(len(p), int(c.partial.Load()))])
		}
		return n, errors.New("connection reset by peer (simulated)")
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
	var partial atomic.Int32
	var nd net.Dialer
	tr := newTransport(t, transport.Config{DialFunc: func(ctx context.Context, network, address string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, address)
		if err != nil {
			return nil, err
		}
		return &flakyConn{Conn: c, failWrite: &failWrite, partial: &partial}, nil
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
		return &flakyConn{Conn: c, failWrite: &failWrite, partial: &partial}, nil
	}})
	_, err = send(t.Context(), tr2, srv.url())
	assertNotDispatched(t, err, transport.StageRequest)
	if r := requests.Load(); r != 2 {
		t.Errorf("requests = %d, want still 2", r)
	}
	// A write that fails after some bytes left is unknown, on a reused
	// connection as on a fresh one, and never written again.
	partial.Store(5)
	failWrite.Store(true) // tr's pooled connection
	_, err = send(t.Context(), tr, srv.url())
	assertUnknown(t, err)
	_, err = send(t.Context(), tr2, srv.url())
	assertUnknown(t, err)
	if r := requests.Load(); r != 2 {
		t.Errorf("requests = %d, want still 2 (a partly written request is not repeated)", r)
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
	for i, advance := range []time.Duration{0, 59 * time.Second, time.Minute} {
		now.Add(int64(advance))
		resp, err := send(t.Context(), tr, srv.url())
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}
	if n := srv.accepts.Load(); n != 2 {
		t.Errorf("accepts = %d, want 2 (reuse within the idle timeout, a new one once it has passed)", n)
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

// TestConfigResponseTimeout: Config.ResponseTimeout bounds the wait for the
// answer, and the write too, from the first request byte on: a server that
// stops reading a large request leaves the write blocked.
func TestConfigResponseTimeout(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		body  []byte
		serve func(t *testing.T, c net.Conn)
	}{
		"never answers": {[]byte(payload), func(t *testing.T, c net.Conn) {
			if _, _, err := readRequest(bufio.NewReader(c)); err != nil {
				return
			}
			io.Copy(io.Discard, c) // never answers
		}},
		"stops reading the request": {make([]byte, 32<<20), func(t *testing.T, c net.Conn) {
			c.Read(make([]byte, 1))
			<-t.Context().Done()
		}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) { tc.serve(t, c) })
			tr := newTransport(t, transport.Config{ResponseTimeout: 50 * time.Millisecond})
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url()+secretPath, bytes.NewReader(tc.body))
			_, err := tr.RoundTrip(req)
			assertUnknown(t, err)
			if !errors.Is(err, transport.ErrResponseTimeout) {
				t.Errorf("err = %v, want ErrResponseTimeout", err)
			}
		})
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
	// Request.Close on every request, then Config.DisableKeepAlives.
	for i, tr := range []*transport.Transport{newTransport(t, transport.Config{}), newTransport(t, transport.Config{DisableKeepAlives: true})} {
		for range 2 {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.url()+secretPath, strings.NewReader(payload))
			req.Close = i == 0
			resp, err := tr.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if h := <-heads; h != "close" {
				t.Errorf("transport %d: Connection header = %q, want close", i, h)
			}
		}
	}
	if n := srv.accepts.Load(); n != 4 {
		t.Errorf("accepts = %d, want 4 (Request.Close and DisableKeepAlives must not reuse)", n)
	}
}
