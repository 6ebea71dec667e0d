package gateway_test

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// TestReplayRecordsNoOutcome: a replayed call sent nothing, so it records
// no outcome: the journal entry it was answered from stays as it was, and
// the gateway logs no "outcome not journaled" warning for it (a store
// refuses an outcome for another attempt's entry, and an operator would
// read that warning as a call left unknown). Both kinds of replay: an
// answer, and an unknown outcome.
func TestReplayRecordsNoOutcome(t *testing.T) {
	t.Parallel()
	logs := &testkit.SyncBuffer{}
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	if err := f.tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect, Nth: 2}); err != nil {
		t.Fatal(err)
	}
	first := f.claim(t, 24)
	f.send(t, &first, "answered")
	f.send(t, &first, "unknown") // dropped after its effect: unknown
	if err := f.gw.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	before, err := f.store.Journal(t.Context(), 24)
	if err != nil || len(before) != 2 {
		t.Fatalf("Journal(24) = %d entries, %v; want 2", len(before), err)
	}
	logged := logs.String()

	second := retryAttempt(t, f.store, first)
	for _, text := range []string{"answered", "unknown"} {
		if r := f.send(t, &second, text); r.header.Get(gateway.HeaderReplayed) != "true" {
			t.Fatalf("attempt 2's %q = %d %s; want it replayed", text, r.status, r.body)
		}
	}
	if err := f.gw.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	after, err := f.store.Journal(t.Context(), 24)
	if err != nil || !slices.EqualFunc(before, after, sameEntry) {
		t.Errorf("the journal changed under replays:\nbefore %+v\nafter  %+v", before, after)
	}
	if more := logs.String()[len(logged):]; more != "" {
		t.Errorf("replays logged:\n%s", more)
	}
}

func sameEntry(a, b intake.JournalEntry) bool {
	return a.Call == b.Call && a.Attempt == b.Attempt && a.Outcome == b.Outcome && a.Status == b.Status &&
		string(a.Body) == string(b.Body) && a.DecidedAt.Equal(b.DecidedAt)
}
