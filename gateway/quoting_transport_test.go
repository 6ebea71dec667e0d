package gateway_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// urlQuotingTransport wraps its transport's errors as an http.Client
// does, in a *url.Error that quotes the request's URL, and so the token
// (a retrying RoundTripper built on a Client, say). The cause stays
// reachable: a not-dispatched error still says so.
type urlQuotingTransport struct{ next http.RoundTripper }

func (q urlQuotingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := q.next.RoundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// TestTransportErrorQuotingTheURLKeepsNoToken: the gateway's own answers
// and journal rows quote a failed try's error, masked: an error that
// quotes the request's URL gives neither the app nor the journal the
// token, whether the call never left or its outcome is unknown.
func TestTransportErrorQuotingTheURLKeepsNoToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		closed  bool // Telegram's root refuses connections, else it resets the call
		outcome wire.Outcome
	}{
		{"not dispatched", true, wire.OutcomeNotDispatched},
		{"unknown", false, wire.OutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, err := transport.New(transport.Config{})
			if err != nil {
				t.Fatal(err)
			}
			var closed string
			if tc.closed {
				closed = "http://" + closedport.Addr(t)
			}
			f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
				c.Transport = urlQuotingTransport{base}
				if closed != "" {
					c.APIRoot = closed
				}
			}})
			if err := f.tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultReset}); err != nil {
				t.Fatal(err)
			}
			token := f.tg.Token
			secret := token[strings.IndexByte(token, ':')+1:]
			id := f.claim(t, 26)
			r := f.send(t, &id, "quoted")
			if r.header.Get(wire.HeaderOutcome) != string(tc.outcome) {
				t.Fatalf("answer %d %s (outcome %q); want %s", r.status, r.body, r.header.Get(wire.HeaderOutcome), tc.outcome)
			}
			if !strings.Contains(r.env.Description, "/bot") {
				t.Errorf("the answer %s does not quote the error's URL; the test proves nothing", r.body)
			}
			if strings.Contains(string(r.body), secret) {
				t.Errorf("the answer carries the token: %s", r.body)
			}
			if err := f.gw.Close(t.Context()); err != nil {
				t.Fatal(err)
			}
			es, err := f.store.Journal(t.Context(), 26)
			if err != nil || len(es) == 0 {
				t.Fatalf("Journal(26) = %d entries, %v", len(es), err)
			}
			for _, e := range es {
				if strings.Contains(string(e.Body), secret) {
					t.Errorf("the journal row (%s) carries the token: %s", e.Outcome, e.Body)
				}
			}
		})
	}
}
