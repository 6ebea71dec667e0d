package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/wire"
)

// TestFlightWaitCountsAgainstMaxWait: a wait for an identical call in
// flight counts against the call's MaxWait from its arrival: a later
// attempt's call that waited longer than MaxWait (500 ms here) for the
// earlier attempt's outcome is answered the limiter's 429 at once when it
// then asks for its turn, rather than waiting a MaxWait more.
func TestFlightWaitCountsAgainstMaxWait(t *testing.T) {
	t.Parallel()
	g := newGate(t, 1)
	waiting := make(chan struct{}, 1)
	f := newFixture(t, fixtureOpts{maxWait: 500 * time.Millisecond, cfg: func(c *gateway.Config) {
		c.Test.BeforeOutcome = g.hook
		c.Test.OutcomeWait = func(string) { waiting <- struct{}{} }
	}})
	first := f.claim(t, 32)
	if a1 := f.send(t, &first, "reply"); a1.status != 200 {
		t.Fatalf("attempt 1 = %d %s", a1.status, a1.body)
	}
	<-g.entered // attempt 1's outcome is held back
	f.fail(t, first)
	second := f.reclaim(t, 32)
	got := make(chan reply, 1)
	go func() { got <- f.send(t, &second, "reply") }()
	<-waiting                                            // attempt 2's call waits for the outcome
	stop := time.AfterFunc(700*time.Millisecond, g.open) // past attempt 2's MaxWait
	t.Cleanup(func() { stop.Stop() })
	r := <-got
	if r.status != http.StatusTooManyRequests || r.header.Get(wire.HeaderOutcome) != string(wire.OutcomeThrottled) {
		t.Errorf("attempt 2's call = %d %s (outcome %q, replayed %q); want the limiter's 429: its MaxWait was spent waiting",
			r.status, r.body, r.header.Get(wire.HeaderOutcome), r.header.Get(gateway.HeaderReplayed))
	}
	if n := f.ledger("reply"); n != 1 {
		t.Errorf("the chat got %d messages; want 1", n)
	}
}
