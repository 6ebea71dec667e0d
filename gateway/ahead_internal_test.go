package gateway

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// finalsFixture is an update in a memstore whose first attempt journals
// calls, for the tests of finalInJournal.
type finalsFixture struct {
	t     *testing.T
	st    *memstore.Store
	g     *Gateway
	id    int64
	now   time.Time
	first intake.Identity
}

func newFinalsFixture(t *testing.T, updateID int64) *finalsFixture {
	st := memstore.New()
	g, err := New(Config{Token: "123:abc", Store: st, OwnsIntake: true, Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	f := &finalsFixture{t: t, st: st, g: g, id: updateID, now: time.Now()}
	if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: updateID, Body: []byte(`{}`), ReceivedAt: f.now}); err != nil {
		t.Fatal(err)
	}
	f.first = f.claim()
	return f
}

func (f *finalsFixture) claim() intake.Identity {
	f.t.Helper()
	id, ok, err := f.st.Claim(f.t.Context(), f.id, intake.ClaimOpts{Now: f.now, LeaseUntil: f.now.Add(time.Minute), MaxAttempts: 10})
	if err != nil || !ok {
		f.t.Fatalf("Claim = %v, %v", ok, err)
	}
	return id
}

// retry ends the first attempt failed and claims the second.
func (f *finalsFixture) retry() intake.Identity {
	f.t.Helper()
	if ok, err := f.st.Settle(f.t.Context(), f.first, intake.Settlement{State: intake.StateFailed, At: f.now, RetryAt: f.now, Error: "failed"}); err != nil || !ok {
		f.t.Fatalf("Settle = %v, %v", ok, err)
	}
	return f.claim()
}

func finalsCall(n int) intake.Call {
	return intake.Call{Method: "sendMessage", ParamsHash: fmt.Sprint("h", n), Occurrence: 1}
}

// record journals call n under id, with res as its outcome (none: pending).
func (f *finalsFixture) record(id intake.Identity, n int, res *intake.CallResult) {
	f.t.Helper()
	if _, intent, err := f.st.RecordIntent(f.t.Context(), id, finalsCall(n), f.now); err != nil || intent != intake.IntentRecorded {
		f.t.Fatalf("RecordIntent(%d) = %v, %v", n, intent, err)
	}
	if res != nil {
		if ok, err := f.st.RecordOutcome(f.t.Context(), id, finalsCall(n), *res, f.now); err != nil || !ok {
			f.t.Fatalf("RecordOutcome(%d) = %v, %v", n, ok, err)
		}
	}
}

var finalsAnswer = &intake.CallResult{Outcome: intake.CallAnswered, Status: 200, Body: []byte(`{"ok":true}`)}

// TestFinalInJournalFindsFinalOutcomes: an attempt after the first finds
// the calls whose outcome is final (answered or unknown), not those
// pending or not dispatched, which wait for their turn; a first attempt
// never lists the journal.
func TestFinalInJournalFindsFinalOutcomes(t *testing.T) {
	f := newFinalsFixture(t, 9)
	f.record(f.first, 0, finalsAnswer)
	f.record(f.first, 1, &intake.CallResult{Outcome: intake.CallUnknown})
	f.record(f.first, 2, &intake.CallResult{Outcome: intake.CallNotDispatched})
	f.record(f.first, 3, nil)
	if f.g.finalInJournal(t.Context(), f.first, finalsCall(0)) {
		t.Fatal("a first attempt listed the journal")
	}
	second := f.retry()
	for n, want := range []bool{true, true, false, false, false} {
		if got := f.g.finalInJournal(t.Context(), second, finalsCall(n)); got != want {
			t.Errorf("finalInJournal(call %d) = %v; want %v", n, got, want)
		}
	}
}

// TestFinalInJournalListsOnce: an attempt lists the journal once, so an
// outcome recorded after its listing is not found (that call waits for its
// turn), and it keeps at most maxFinalCalls calls.
func TestFinalInJournalListsOnce(t *testing.T) {
	f := newFinalsFixture(t, 10)
	const answered = maxFinalCalls + 10
	for n := range answered {
		f.record(f.first, n, finalsAnswer)
	}
	second := f.retry()
	found := 0
	for n := range answered {
		if f.g.finalInJournal(t.Context(), second, finalsCall(n)) {
			found++
		}
	}
	if found != maxFinalCalls {
		t.Fatalf("found %d of %d answered calls; want the bound, %d", found, answered, maxFinalCalls)
	}
	f.record(second, answered, finalsAnswer)
	if f.g.finalInJournal(t.Context(), second, finalsCall(answered)) {
		t.Fatal("an outcome recorded after the attempt's listing was found: the journal was listed again")
	}
}
