package gateway_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// deliveredThenJoined delivers each call through next and then reports the
// error of a transport that tried twice: the first try never left, the
// second reached Telegram and lost its answer, joined.
type deliveredThenJoined struct{ next http.RoundTripper }

func (d deliveredThenJoined) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := d.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return nil, errors.Join(&transport.NotDispatchedError{Stage: transport.StageConnect},
		&transport.OutcomeUnknownError{Err: errors.New("connection reset")})
}

// TestJoinedNotDispatchedAndUnknownIsUnknown: an error tree that holds a
// not-dispatched try beside one of unknown outcome may have reached
// Telegram: the call is answered unknown and never sent again, by this
// attempt or the next, as botapi.Classify says for every sender.
func TestJoinedNotDispatchedAndUnknownIsUnknown(t *testing.T) {
	t.Parallel()
	checkUnknownSentOnce(t, func(base http.RoundTripper) http.RoundTripper { return deliveredThenJoined{base} }, 31, "joined")
}

// checkUnknownSentOnce sends text for update through a gateway whose
// transport is wrap(a real transport): the call reaches Telegram, and the
// transport's error must make it unknown (502), replayed as unknown to the
// update's next attempt, with one message in the ledger.
func checkUnknownSentOnce(t *testing.T, wrap func(http.RoundTripper) http.RoundTripper, update int64, text string) {
	t.Helper()
	base, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.Transport = wrap(base) }})
	first := f.claim(t, update)
	if r := f.send(t, &first, text); r.status != gateway.StatusUnknown || r.header.Get(wire.HeaderOutcome) != string(wire.OutcomeUnknown) {
		t.Fatalf("attempt 1 = %d %s (outcome %q); want 502 unknown", r.status, r.body, r.header.Get(wire.HeaderOutcome))
	}
	second := retryAttempt(t, f.store, first)
	if r := f.send(t, &second, text); r.status != gateway.StatusUnknown || r.header.Get(gateway.HeaderReplayed) != "true" {
		t.Errorf("attempt 2 = %d %s (replayed %q); want unknown, replayed", r.status, r.body, r.header.Get(gateway.HeaderReplayed))
	}
	if n := f.ledger(text); n != 1 {
		t.Errorf("ledger holds %d messages; want 1", n)
	}
}
