package transport_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/transport"
)

// signalBody signals its first Read and then blocks until closed.
type signalBody struct {
	reading chan struct{}
	closed  chan struct{}
	once    atomic.Bool
}

func (b *signalBody) Read(p []byte) (int, error) {
	if b.once.CompareAndSwap(false, true) {
		close(b.reading)
	}
	<-b.closed
	return 0, io.ErrClosedPipe
}

func (b *signalBody) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

// TestAbortAtEveryStage cancels the caller's context while the request is
// at each stage, and checks the error says where it was and whether it left.
func TestAbortAtEveryStage(t *testing.T) {
	t.Parallel()
	type setup struct {
		url     string
		cfg     transport.Config
		body    io.ReadCloser
		reached <-chan struct{} // closed or sent to when the stage is reached
	}
	hold := func(t *testing.T, serve func(c net.Conn, reached chan<- struct{})) (string, <-chan struct{}) {
		reached := make(chan struct{}, 1)
		srv := newRawServer(t, "tcp", "127.0.0.1:0", func(c net.Conn) { serve(c, reached) })
		return srv.addr, reached
	}
	cases := []struct {
		name    string
		stage   transport.Stage // "" = sent, outcome unknown
		prepare func(t *testing.T) setup
	}{
		{"before the call", transport.StageRequest, func(t *testing.T) setup {
			return setup{url: "http://127.0.0.1:1"} // no reached: cancel before RoundTrip
		}},
		{"reading the body", transport.StageRequest, func(t *testing.T) setup {
			b := &signalBody{reading: make(chan struct{}), closed: make(chan struct{})}
			return setup{url: "http://127.0.0.1:1", body: b, reached: b.reading}
		}},
		{"lookup", transport.StageLookup, func(t *testing.T) setup {
			ch := make(chan struct{}, 2)
			return setup{url: "http://telegram.test", reached: ch, cfg: transport.Config{
				LookupFunc: func(ctx context.Context, network, host string) ([]netip.Addr, error) {
					ch <- struct{}{}
					<-ctx.Done()
					return nil, ctx.Err()
				}}}
		}},
		{"connect", transport.StageConnect, func(t *testing.T) setup {
			ch := make(chan struct{}, 1)
			return setup{url: "https://127.0.0.1", reached: ch, cfg: transport.Config{
				DialFunc: func(ctx context.Context, network, address string) (net.Conn, error) {
					if address != "127.0.0.1:443" {
						t.Errorf("dialled %s, want the https default port 443", address)
					}
					ch <- struct{}{}
					<-ctx.Done()
					return nil, ctx.Err()
				}}}
		}},
		{"tls handshake", transport.StageTLS, func(t *testing.T) setup {
			addr, reached := hold(t, func(c net.Conn, reached chan<- struct{}) {
				var b [1]byte
				if _, err := c.Read(b[:]); err == nil { // the ClientHello began
					reached <- struct{}{}
				}
				io.Copy(io.Discard, c)
			})
			return setup{url: "https://" + addr, reached: reached}
		}},
		{"proxy CONNECT", transport.StageProxy, func(t *testing.T) setup {
			addr, reached := hold(t, func(c net.Conn, reached chan<- struct{}) {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					reached <- struct{}{}
				}
				io.Copy(io.Discard, c)
			})
			return setup{url: "https://127.0.0.1:1", reached: reached, cfg: transport.Config{Proxy: proxyAt("http://" + addr)}}
		}},
		// Only the context can end the last two waits: the response
		// timeout is an hour.
		{"writing the request", "", func(t *testing.T) setup {
			addr, reached := hold(t, func(c net.Conn, reached chan<- struct{}) {
				if _, err := c.Read(make([]byte, 1)); err == nil {
					reached <- struct{}{}
				}
				<-t.Context().Done() // reads no more: the large body fills the socket
			})
			return setup{url: "http://" + addr, reached: reached, body: io.NopCloser(bytes.NewReader(make([]byte, 32<<20))),
				cfg: transport.Config{ResponseTimeout: time.Hour}}
		}},
		{"waiting for the answer", "", func(t *testing.T) setup {
			addr, reached := hold(t, func(c net.Conn, reached chan<- struct{}) {
				if _, _, err := readRequest(bufio.NewReader(c)); err == nil {
					reached <- struct{}{}
				}
				io.Copy(io.Discard, c)
			})
			return setup{url: "http://" + addr, reached: reached, cfg: transport.Config{ResponseTimeout: time.Hour}}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := tc.prepare(t)
			tr := newTransport(t, s.cfg)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var body io.Reader = strings.NewReader(payload) // in memory: no wait for the context to end
			if s.body != nil {
				body = s.body
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+secretPath, body)
			if s.reached == nil {
				cancel()
			}
			type result struct{ err error }
			done := make(chan result, 1)
			go func() {
				resp, err := tr.RoundTrip(req)
				if resp != nil {
					resp.Body.Close()
				}
				done <- result{err}
			}()
			if s.reached != nil {
				<-s.reached
				cancel()
			}
			var err error
			select {
			case r := <-done:
				err = r.err
			case <-time.After(waitLimit):
				t.Fatal("RoundTrip did not return after its context ended")
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("err = %v, want it to match context.Canceled", err)
			}
			if tc.stage == "" {
				assertUnknown(t, err)
			} else {
				assertNotDispatched(t, err, tc.stage)
			}
		})
	}
}
