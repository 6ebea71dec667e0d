package gateway_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/wire"
)

// fencedOnly hides every optional capability of its store: a core-only store
// without a journal.
type fencedOnly struct{ intake.Store }

// TestCompletedAttemptsTail: the attempt that completed its update goes
// on making calls (a framework answered its forward early), sent once and
// journaled; an attempt that ended failed does not, and neither does a
// completed one without a journal, whose calls could not be replayed.
func TestCompletedAttemptsTail(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	id := f.claim(t, 11)
	if r := f.send(t, &id, "before"); r.status != 200 {
		t.Fatalf("the live attempt's call = %d %s", r.status, r.body)
	}
	ok, err := f.store.Settle(t.Context(), id, intake.Settlement{State: intake.StateCompleted, At: time.Now()})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for name, r := range map[string]reply{
		"headers": f.send(t, &id, "tail"),
		"root":    f.post(t, attemptRoot("", id)+"/bot"+f.tg.Token+"/sendMessage", nil, map[string]any{"chat_id": f.chat.ID, "text": "tail by root"}),
		"read":    f.post(t, "/bot"+f.tg.Token+"/getMe", &id, map[string]any{}),
	} {
		if r.status != 200 || !r.env.OK || r.header.Get(gateway.HeaderReplayed) != "" {
			t.Errorf("%s: the completing attempt's call = %d %s (replayed %q); want Telegram's 200", name, r.status, r.body, r.header.Get(gateway.HeaderReplayed))
		}
	}
	if f.ledger("tail") != 1 || f.ledger("tail by root") != 1 || f.ledger("before") != 1 {
		t.Errorf("ledger: %v; want each message once", f.tg.MessagesTo(f.chat.ID))
	}
	// The outcomes are written after their answers (see outcomes.go).
	testkit.WaitFor(t, "the tail's outcomes journaled", func() bool {
		o := f.outcomes(t, 11)
		return len(o) == 3 && !slices.Contains(o, intake.CallPending)
	})
	es, err := f.store.Journal(t.Context(), 11)
	if err != nil || len(es) != 3 {
		t.Fatalf("Journal(11) = %d entries, %v; want the 3 sendMessage calls", len(es), err)
	}
	for _, e := range es {
		if e.ClaimID != id.ClaimID || e.Outcome != intake.CallAnswered {
			t.Errorf("journal entry %s by claim %q is %s; want answered under the completing claim", e.Method, e.ClaimID, e.Outcome)
		}
	}

	failed := f.claim(t, 12)
	f.fail(t, failed)
	for name, r := range map[string]reply{
		"send": f.send(t, &failed, "failed tail"),
		"read": f.post(t, "/bot"+f.tg.Token+"/getMe", &failed, map[string]any{}),
	} {
		if r.status != gateway.StatusStale || r.header.Get(wire.HeaderOutcome) != "stale" {
			t.Errorf("%s: a failed attempt's call = %d %s; want 409 stale", name, r.status, r.body)
		}
	}
	if n := f.ledger("failed tail"); n != 0 {
		t.Errorf("a failed attempt's call reached the chat %d times", n)
	}
}

func TestCompletedAttemptWithoutJournalIsStale(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.Store = fencedOnly{c.Store} }})
	id := f.claim(t, 13)
	ok, err := f.store.Settle(t.Context(), id, intake.Settlement{State: intake.StateCompleted, At: time.Now()})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	for name, r := range map[string]reply{
		"send": f.send(t, &id, "unjournaled tail"),
		"read": f.post(t, "/bot"+f.tg.Token+"/getMe", &id, map[string]any{}),
	} {
		if r.status != gateway.StatusStale {
			t.Errorf("%s: a completed attempt's call without a journal = %d %s; want 409 stale", name, r.status, r.body)
		}
	}
	if n := f.ledger("unjournaled tail"); n != 0 {
		t.Errorf("the call reached the chat %d times", n)
	}
}
