package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// TestDeferredOutcomeSurvivesClose: an outcome RecordOutcomeDeferred
// reported applied is in the file after Close and a reopen, and one still
// waiting for an intent when Close begins is written by Close (or
// reported failed, and then the entry stays pending): never applied in
// the answer and lost on disk.
func TestDeferredOutcomeSurvivesClose(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "intake.db")
	for round := range 20 {
		s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{Synchronous: "FULL"})
		if err != nil {
			t.Fatal(err)
		}
		u := int64(round + 1)
		if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: u, Body: []byte(`{}`), ReceivedAt: base}); err != nil {
			t.Fatal(err)
		}
		id, ok, err := s.Claim(t.Context(), u, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Hour), MaxAttempts: 3})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		call := intake.Call{Method: "sendMessage", ParamsHash: "h", Occurrence: 1}
		if _, in, err := s.RecordIntent(t.Context(), id, call, base); err != nil || in != intake.IntentRecorded {
			t.Fatal(in, err)
		}
		type result struct {
			ok  bool
			err error
		}
		got := make(chan result, 1)
		res := intake.CallResult{Outcome: intake.CallAnswered, Status: 200, Body: []byte(`{"ok":true}`)}
		if round == 0 {
			// No Close racing: the deferred outcome commits alone.
			ok, err := s.RecordOutcomeDeferred(t.Context(), id, call, res, base)
			got <- result{ok, err}
		} else {
			go func() {
				ok, err := s.RecordOutcomeDeferred(t.Context(), id, call, res, base)
				got <- result{ok, err}
			}()
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		r := <-got
		if round == 0 && (!r.ok || r.err != nil) {
			t.Fatalf("RecordOutcomeDeferred alone = %v, %v; want applied", r.ok, r.err)
		}
		again, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		es, err := again.Journal(t.Context(), u)
		again.Close()
		if err != nil || len(es) != 1 {
			t.Fatalf("round %d: Journal = %v, %v", round, es, err)
		}
		if r.ok && es[0].Outcome != intake.CallAnswered {
			t.Errorf("round %d: the deferred outcome was reported applied but the file holds %s", round, es[0].Outcome)
		}
		if !r.ok && es[0].Outcome != intake.CallPending {
			t.Errorf("round %d: the deferred outcome was reported not applied (%v) but the file holds %s", round, r.err, es[0].Outcome)
		}
	}
}
