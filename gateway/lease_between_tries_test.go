package gateway_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// firstTryNeverLeaves sends its first request to a closed port, so that
// the dispatch-aware transport reports it not dispatched, after running
// before; every later request goes where it was meant to.
type firstTryNeverLeaves struct {
	next   http.RoundTripper
	closed string // host:port that refuses connections
	before func()
	once   sync.Once
}

func (f *firstTryNeverLeaves) RoundTrip(req *http.Request) (*http.Response, error) {
	first := false
	f.once.Do(func() { first = true })
	if !first {
		return f.next.RoundTrip(req)
	}
	f.before()
	out := req.Clone(req.Context())
	out.URL.Host, out.Host = f.closed, f.closed
	return f.next.RoundTrip(out)
}

// TestLeaseCheckedAgainAfterATryThatNeverLeft: a fenced call whose try
// never left is tried again only if its attempt still holds its lease at
// the next try; the lease checked before the first try does not carry
// over. Here the attempt loses its lease while its first try fails to
// connect: the second try is refused stale and nothing reaches Telegram,
// for a journaled call (its intent is recorded again, and refused) as for
// a read-only one (its lease is checked again).
func TestLeaseCheckedAgainAfterATryThatNeverLeft(t *testing.T) {
	for _, tc := range []struct {
		name, method string
		params       map[string]any
	}{
		{"journaled", "sendMessage", map[string]any{"text": "stale by now"}},
		{"read-only", "getChat", map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, err := transport.New(transport.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var lose func()
			rt := &firstTryNeverLeaves{next: base, closed: closedport.Addr(t), before: func() { lose() }}
			f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.Transport = rt; c.MaxSendTries = 2 }})
			id := f.claim(t, 23)
			lose = func() { // the attempt ends while its try is on its way
				now := time.Now()
				if ok, err := f.store.Settle(context.Background(), id, intake.Settlement{State: intake.StateFailed, At: now, RetryAt: now.Add(time.Hour), Error: "handler failed"}); err != nil || !ok {
					t.Errorf("Settle = %v, %v", ok, err) // not Fatal: this runs on the gateway's goroutine
				}
			}
			tc.params["chat_id"] = f.chat.ID
			r := f.post(t, "/bot"+f.tg.Token+"/"+tc.method, &id, tc.params)
			if r.status != gateway.StatusStale || r.header.Get(wire.HeaderOutcome) != string(wire.OutcomeStale) {
				t.Errorf("%s = %d %s (outcome %q); want 409 stale at the second try", tc.method, r.status, r.body, r.header.Get(wire.HeaderOutcome))
			}
			if n := f.tg.Calls()[tc.method]; n != 0 {
				t.Errorf("Telegram got %s %d times from an attempt that had lost its lease", tc.method, n)
			}
			if err := f.gw.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			if es, _ := f.store.Journal(t.Context(), 23); len(es) > 1 || len(es) == 1 && es[0].Outcome != intake.CallNotDispatched {
				for _, e := range es {
					t.Logf("entry: occurrence %d, %s, attempt %d", e.Occurrence, e.Outcome, e.Attempt)
				}
				t.Errorf("the journal holds %d entries; want at most the first try's, not dispatched", len(es))
			}
		})
	}
}
