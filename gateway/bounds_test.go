package gateway_test

import (
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/throttle"
)

// TestBounds: the bounds come from the limiter's MaxWait and the response
// timeout, and the server's write timeout is derived from them, never
// shorter than the wait plus the answer.
func TestBounds(t *testing.T) {
	lim, err := throttle.New(throttle.Config{MaxWait: 40 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  gateway.Config
		want gateway.Bounds
	}{
		{"throttled", gateway.Config{Transport: throttle.NewTransport(lim, nil), ResponseTimeout: 5 * time.Second},
			gateway.Bounds{MaxWait: 40 * time.Second, ResponseTimeout: 5 * time.Second, Answer: 55 * time.Second, WriteTimeout: 60 * time.Second}},
		{"defaults", gateway.Config{Transport: throttle.NewTransport(mustLimiter(t, throttle.Config{}), nil)},
			gateway.Bounds{MaxWait: throttle.DefaultMaxWait, ResponseTimeout: gateway.DefaultResponseTimeout, Answer: 100 * time.Second, WriteTimeout: 105 * time.Second}},
		{"no limiter", gateway.Config{Transport: http.DefaultTransport},
			gateway.Bounds{ResponseTimeout: gateway.DefaultResponseTimeout, Answer: 40 * time.Second, WriteTimeout: 45 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Token = "1:x"
			g, err := gateway.New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := g.Bounds()
			if b != tc.want {
				t.Fatalf("Bounds() = %+v, want %+v", b, tc.want)
			}
			if b.WriteTimeout < b.MaxWait+b.ResponseTimeout+gateway.OutcomeTimeout {
				t.Fatalf("WriteTimeout %v is below the wait plus the answer", b.WriteTimeout)
			}
		})
	}
}

func mustLimiter(t *testing.T, c throttle.Config) *throttle.Limiter {
	t.Helper()
	l, err := throttle.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestServerTimeoutsDoNotCutAWaitingCall: behind a server whose read
// timeout (200 ms here) is far below the call's wait for its turn, the
// call is still sent and answered (the read timeout bounds reading the
// request, not the wait: the relay's gateway server keeps its 30 s read
// timeout under a minute's wait). Nor does a write timeout shorter than
// the gateway's bound (300 ms here) cut the answer: the handler sets its
// connection's write deadline to its own bound, which the answer states in
// Tgrelay-Call-Timeout.
func TestServerTimeoutsDoNotCutAWaitingCall(t *testing.T) {
	f := newFixture(t, fixtureOpts{maxWait: 5 * time.Second})
	srv := &http.Server{Handler: f.gw, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 300 * time.Millisecond}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	f.srv.URL = "http://" + ln.Addr().String()
	for i := range throttle.DefaultChatCount { // the chat's window: 5 per 5 s
		if r := f.send(t, nil, "filler "+strconv.Itoa(i)); r.status != 200 {
			t.Fatalf("filler %d: %d %s", i, r.status, r.body)
		}
	}
	r := f.send(t, nil, "waited") // waits about 5 s for its turn
	if r.status != 200 {
		t.Fatalf("the waiting call: %d %s; want it sent", r.status, r.body)
	}
	if got, want := r.header.Get(gateway.HeaderCallTimeout), strconv.Itoa(int(f.gw.Bounds().Answer/time.Second)); got != want {
		t.Errorf("%s = %q, want %q", gateway.HeaderCallTimeout, got, want)
	}
	if n := f.ledger("waited"); n != 1 {
		t.Fatalf("the chat got it %d times", n)
	}
}
