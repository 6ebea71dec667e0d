package transport_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/transport"
)

// secretPath is a Bot API path: the token in it must never reach an error.
const (
	secret     = "SECRETtokenABCDEFghij"
	secretPath = "/bot123456:" + secret + "/sendMessage"
	payload    = `{"chat_id":42,"text":"hello"}`
)

// waitLimit bounds every wait for an asynchronous event in these tests.
const waitLimit = 10 * time.Second

func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

func newTransport(t *testing.T, cfg transport.Config) *transport.Transport {
	t.Helper()
	if cfg.Proxy == nil {
		cfg.Proxy = noProxy
	}
	tr, err := transport.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// send POSTs payload to base+secretPath through rt.
func send(ctx context.Context, rt http.RoundTripper, base string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+secretPath, strings.NewReader(payload))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	return rt.RoundTrip(req)
}

// assertNotDispatched checks err is a *NotDispatchedError at stage, is
// detectable through the NotDispatched method, and holds no secret.
func assertNotDispatched(t *testing.T, err error, stage transport.Stage) {
	t.Helper()
	assertNoSecret(t, err)
	var nd *transport.NotDispatchedError
	if !errors.As(err, &nd) {
		t.Fatalf("err = %v (%T), want *NotDispatchedError", err, err)
	}
	if nd.Stage != stage {
		t.Errorf("stage = %q, want %q (err: %v)", nd.Stage, stage, err)
	}
	var marker interface{ NotDispatched() bool }
	if !errors.As(err, &marker) || !marker.NotDispatched() {
		t.Errorf("err does not report NotDispatched() == true")
	}
}

// assertUnknown checks err is an *OutcomeUnknownError, detectable through
// the OutcomeUnknown method, and not marked not-dispatched.
func assertUnknown(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("err = nil, want an unknown-outcome error")
	}
	assertNoSecret(t, err)
	var marker interface{ NotDispatched() bool }
	if errors.As(err, &marker) {
		t.Fatalf("err = %v is marked not dispatched, but the request was sent", err)
	}
	var unknown interface{ OutcomeUnknown() bool }
	if !errors.As(err, &unknown) || !unknown.OutcomeUnknown() {
		t.Fatalf("err = %v (%T) does not report OutcomeUnknown() == true", err, err)
	}
}

func assertNoSecret(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), secret) {
		t.Errorf("error leaks the token: %q", err)
	}
}

// rawServer is a loopback TCP server that hands each accepted connection to
// serve and counts accepts and open connections.
type rawServer struct {
	ln      net.Listener
	addr    string
	accepts atomic.Int32
	open    atomic.Int32
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   []net.Conn
	closed  bool
}

func newRawServer(t *testing.T, network, address string, serve func(net.Conn)) *rawServer {
	t.Helper()
	ln, err := net.Listen(network, address)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	s := &rawServer{ln: ln, addr: ln.Addr().String()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			s.open.Add(1)
			s.mu.Lock()
			if s.closed {
				s.mu.Unlock()
				c.Close()
				s.open.Add(-1)
				continue
			}
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer s.open.Add(-1)
				defer c.Close()
				serve(c)
			}()
		}
	}()
	t.Cleanup(s.close)
	return s
}

func (s *rawServer) url() string { return "http://" + s.addr }

func (s *rawServer) close() {
	s.ln.Close()
	s.mu.Lock()
	s.closed = true
	for _, c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

// readRequest reads one request and its body from br.
func readRequest(br *bufio.Reader) (*http.Request, []byte, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(req.Body)
	return req, body, err
}

// okResponse is a framed keep-alive answer.
const okResponse = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"

// serveOK answers every request on c with okResponse.
func serveOK(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		if _, _, err := readRequest(br); err != nil {
			return
		}
		if _, err := io.WriteString(c, okResponse); err != nil {
			return
		}
	}
}
