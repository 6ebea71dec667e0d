package sqlitestore_test

import (
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
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

// Deferred outcomes carried by an intent (or flushed, those no intent
// took in time) each apply exactly where they would alone: the live ones
// decide their entries, one under a stale claim decides nothing, and of
// two outcomes of one entry exactly one applies.
func TestDeferredOutcomesApplyAsAlone(t *testing.T) {
	t.Parallel()
	s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "intake.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	call := intake.Call{Method: "sendMessage", ParamsHash: "h", Occurrence: 1}
	ids := make([]intake.Identity, 5)
	for u := int64(1); u <= 4; u++ {
		if _, err := s.Add(t.Context(), intake.Incoming{UpdateID: u, Body: []byte(`{}`), ReceivedAt: base}); err != nil {
			t.Fatal(err)
		}
		id, ok, err := s.Claim(t.Context(), u, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Hour), MaxAttempts: 3})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if _, in, err := s.RecordIntent(t.Context(), id, call, base); err != nil || in != intake.IntentRecorded {
			t.Fatal(in, err)
		}
		ids[u] = id
	}
	stale := ids[4]
	stale.ClaimID = "not-the-claim"
	outcomes := []struct {
		id     intake.Identity
		status int
	}{{ids[1], 200}, {ids[2], 200}, {ids[3], 200}, {stale, 200}, {ids[1], 400}}
	applied := make([]bool, len(outcomes))
	var wg sync.WaitGroup
	var done atomic.Int64
	for i, o := range outcomes {
		wg.Go(func() {
			defer done.Add(1)
			res := intake.CallResult{Outcome: intake.CallAnswered, Status: o.status, Body: []byte(`{"ok":true}`)}
			ok, err := s.RecordOutcomeDeferred(t.Context(), o.id, call, res, base)
			if err != nil {
				t.Error(err)
			}
			applied[i] = ok
		})
	}
	// Every outcome waits for an intent to carry it, or the flush (after
	// DeferredOutcomeWait) wrote it meanwhile.
	for sqlitestore.DeferredOutcomes(s)+int(done.Load()) < len(outcomes) {
		runtime.Gosched()
	}
	next := intake.Call{Method: "sendMessage", ParamsHash: "h2", Occurrence: 1}
	if _, in, err := s.RecordIntent(t.Context(), ids[2], next, base); err != nil || in != intake.IntentRecorded {
		t.Fatal(in, err)
	}
	wg.Wait()
	if !applied[1] || !applied[2] || applied[3] || applied[0] == applied[4] {
		t.Fatalf("applied %v; want the live outcomes of updates 2 and 3, none under the stale claim, and one of update 1's two", applied)
	}
	for u, want := range map[int64]intake.CallOutcome{1: intake.CallAnswered, 2: intake.CallAnswered, 3: intake.CallAnswered, 4: intake.CallPending} {
		es, err := s.Journal(t.Context(), u)
		if err != nil || len(es) == 0 || es[0].Outcome != want {
			t.Errorf("update %d: Journal = %v, %v; want its first entry %s", u, es, err, want)
		}
	}
	if es, _ := s.Journal(t.Context(), 1); len(es) == 1 && applied[4] != (es[0].Status == 400) {
		t.Errorf("update 1's entry holds status %d, but the outcome reported applied was the other", es[0].Status)
	}
}
