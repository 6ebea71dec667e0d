package storetest

import (
	"bytes"
	"fmt"
	"strings"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
)

// The Journal cases run only for an [intake.JournalStore].

func journalCases() []testCase {
	return append([]testCase{
		{name: "IntentFencedByIdentity", rule: "a stale identity records no intent", needs: capJournal, run: journalFenced},
		{name: "ReplayAcrossAttempts", rule: "a later attempt finds the recorded call and its answer byte for byte", needs: capJournal, run: journalReplay},
		{name: "PendingAndUnknownStay", rule: "an intent without outcome and an unknown outcome are never recorded again", needs: capJournal, run: journalPendingStays},
		{name: "NotDispatchedFreesCall", rule: "a not-dispatched call may be recorded again by a later attempt", needs: capJournal, run: journalNotDispatched},
		{name: "ListedInKeyOrder", rule: "Journal lists an update's entries by intent time, then method, parameters hash and occurrence", needs: capJournal, run: journalOrder},
		{name: "OutcomeFencedByEntry", rule: "only the identity that recorded an intent records its outcome, once", needs: capJournal, run: journalOutcomeFence},
		{name: "ConcurrentOutcomes", rule: "of concurrent outcomes of one pending intent exactly one is recorded", needs: capJournal, run: concurrentOutcomes},
		{name: "OccurrencesAndMethods", rule: "method, hash and occurrence each distinguish calls, their outcomes and the entries found again", needs: capJournal, run: journalKeys},
		{name: "PrunedWithUpdate", rule: "pruning an update forgets its journal", needs: capJournal, run: journalPruned},
		{name: "TailIntentRacingPrune", rule: "an intent racing the prune of its update never outlives the row: the id recorded again starts with an empty journal", needs: capJournal, run: tailIntentRacingPrune},
		{name: "InvalidCalls", rule: "calls outside the contract are errors", needs: capJournal, run: journalInvalid},
		{name: "ConcurrentIntents", rule: "of concurrent identical intents exactly one is recorded", needs: capJournal, run: journalRaceRounds},
		{name: "DeferredOutcomes", rule: "a deferred outcome is recorded as RecordOutcome records it, with or without an intent to share its commit", needs: capJournal, run: journalDeferred},
		{name: "RequeueKeepsJournal", rule: "a requeued update keeps its journal", needs: capJournal | capAdmin, run: journalRequeue},
	}, tailCases()...)
}

func call(method string, occurrence int) intake.Call {
	return intake.Call{Method: method, ParamsHash: "h-" + method, Occurrence: occurrence}
}

func (c *checker) intent(id intake.Identity, cl intake.Call, atMS int64) (intake.JournalEntry, intake.Intent) {
	e, in, err := c.journal.RecordIntent(c.ctx, id, cl, at(atMS))
	c.failed(fmt.Sprintf("RecordIntent(%s, %s #%d, at %dms)", fmtID(id), cl.Method, cl.Occurrence, atMS), err)
	return e, in
}

func (c *checker) mustIntent(id intake.Identity, cl intake.Call, atMS int64, want intake.Intent) intake.JournalEntry {
	e, in := c.intent(id, cl, atMS)
	if in != want {
		c.fatalf("RecordIntent(%s, %s #%d, at %dms) = %s; want %s", fmtID(id), cl.Method, cl.Occurrence, atMS, in, want)
	}
	return e
}

func (c *checker) outcome(id intake.Identity, cl intake.Call, res intake.CallResult, atMS int64) bool {
	ok, err := c.journal.RecordOutcome(c.ctx, id, cl, res, at(atMS))
	c.failed(fmt.Sprintf("RecordOutcome(%s, %s #%d, %s)", fmtID(id), cl.Method, cl.Occurrence, res.Outcome), err)
	return ok
}

func (c *checker) entries(updateID int64) []intake.JournalEntry {
	es, err := c.journal.Journal(c.ctx, updateID)
	c.failed(fmt.Sprintf("Journal(%d)", updateID), err)
	return es
}

func answered(body string) intake.CallResult {
	return intake.CallResult{Outcome: intake.CallAnswered, Status: 200, Body: []byte(body)}
}

// journalFenced: a wrong claim id, an earlier attempt, a lapsed lease, a
// failed attempt and a missing row all get IntentStale and leave no entry.
func journalFenced(c *checker) {
	c.mustAdd(1, 0)
	first := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	for _, tc := range []struct {
		what string
		id   intake.Identity
		atMS int64
	}{
		{"a wrong claim id", wrongClaim(first), 10},
		{"a wrong attempt", intake.Identity{UpdateID: 1, Attempt: 2, ClaimID: first.ClaimID}, 10},
		{"a lapsed lease", first, 101},
		{"a missing update", intake.Identity{UpdateID: 2, Attempt: 1, ClaimID: first.ClaimID}, 10},
	} {
		if _, in := c.intent(tc.id, call("sendMessage", 1), tc.atMS); in != intake.IntentStale {
			c.errorf("RecordIntent with %s = %s; want stale", tc.what, in)
		}
	}
	// The lease boundary is inclusive, as for Owns.
	c.mustIntent(first, call("sendMessage", 1), 100, intake.IntentRecorded)
	second := c.mustClaimOwned(1, claimOpts(101, 200, 3), 2)
	if _, in := c.intent(first, call("sendPhoto", 1), 150); in != intake.IntentStale {
		c.errorf("RecordIntent by the reclaimed attempt 1 = %s; want stale", in)
	}
	// A completed attempt is its update's tail (see the Tail cases); a
	// failed one is refused.
	if !c.settleOwned(second, failedAt(150, 10_000, "x")) {
		c.fatalf("Settle(%s, failed at 150ms) reported false", fmtID(second))
	}
	if _, in := c.intent(second, call("sendPhoto", 1), 160); in != intake.IntentStale {
		c.errorf("RecordIntent by the failed attempt 2 = %s; want stale", in)
	}
	es := c.entries(1)
	if len(es) != 1 || es[0].Method != "sendMessage" {
		c.errorf("Journal(1) = %d entries %v; want only the one intent recorded under a live lease", len(es), methods(es))
	}
}

func methods(es []intake.JournalEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%s#%d(%s)", e.Method, e.Occurrence, e.Outcome)
	}
	return out
}

// journalReplay: attempt 1 records and answers a call; attempt 2's identical
// call is journaled with the exact answer, including arbitrary bytes.
func journalReplay(c *checker) {
	c.mustAdd(1, 0)
	first := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	cl := call("sendMessage", 1)
	e := c.mustIntent(first, cl, 5, intake.IntentRecorded)
	if e.Outcome != intake.CallPending || e.Attempt != 1 || e.ClaimID != first.ClaimID || !e.IntendedAt.Equal(at(5)) || e.UpdateID != 1 || e.Call != cl {
		c.errorf("the recorded entry is %+v; want pending, attempt 1, the claim id, intended at 5ms", e)
	}
	big := bytes.Repeat([]byte{0, 0xff, '"', '\\', 'x'}, intake.MaxJournalBody/5)
	res := intake.CallResult{Outcome: intake.CallAnswered, Status: 400, Body: big}
	if !c.outcome(first, cl, res, 7) {
		c.fatalf("RecordOutcome by the identity that recorded the intent reported false")
	}
	if !c.settleOwned(first, failedAt(8, 9, "handler failed")) {
		c.fatalf("Settle(%s, failed) reported false", fmtID(first))
	}
	second := c.mustClaimOwned(1, claimOpts(10, 100, 3), 2)
	got := c.mustIntent(second, cl, 11, intake.IntentJournaled)
	if got.Outcome != intake.CallAnswered || got.Status != 400 || !bytes.Equal(got.Body, big) {
		c.errorf("attempt 2 found outcome %s, status %d, %d body bytes (equal %v); want answered, 400 and the %d recorded bytes",
			got.Outcome, got.Status, len(got.Body), bytes.Equal(got.Body, big), len(big))
	}
	if got.Attempt != 1 || got.ClaimID != first.ClaimID || !got.IntendedAt.Equal(at(5)) || !got.DecidedAt.Equal(at(7)) {
		c.errorf("attempt 2 found attempt %d, claim %q, intended %s, decided %s; want the intent of attempt 1 at 5ms decided at 7ms",
			got.Attempt, got.ClaimID, offset(got.IntendedAt), offset(got.DecidedAt))
	}
	if c.outcome(second, cl, answered(`{"ok":true}`), 12) {
		c.errorf("attempt 2 recorded an outcome for the entry attempt 1 recorded")
	}
	es := c.entries(1)
	if len(es) != 1 || es[0].Outcome != intake.CallAnswered || !bytes.Equal(es[0].Body, big) {
		c.errorf("Journal(1) = %v; want the one answered entry", methods(es))
	}
	got.Body[0] = 'Z'
	if es := c.entries(1); len(es) == 1 && es[0].Body[0] == 'Z' {
		c.errorf("writing to a returned body changed the stored one")
	}
	// Two occurrences of one call: each is found as its own entry.
	two := call("sendPhoto", 2)
	c.mustIntent(second, call("sendPhoto", 1), 13, intake.IntentRecorded)
	c.mustIntent(second, two, 14, intake.IntentRecorded)
	if !c.outcome(second, call("sendPhoto", 1), answered(`{"occurrence":1}`), 15) || !c.outcome(second, two, answered(`{"occurrence":2}`), 16) {
		c.fatalf("RecordOutcome of attempt 2's own intents reported false")
	}
	if !c.settleOwned(second, failedAt(17, 18, "handler failed")) {
		c.fatalf("Settle(%s, failed) reported false", fmtID(second))
	}
	third := c.mustClaimOwned(1, claimOpts(20, 100, 3), 3)
	if e := c.mustIntent(third, two, 21, intake.IntentJournaled); e.Occurrence != 2 || string(e.Body) != `{"occurrence":2}` {
		c.errorf("attempt 3's intent of occurrence 2 found occurrence %d with body %q; want occurrence 2's own entry", e.Occurrence, e.Body)
	}
}

// journalPendingStays: a pending intent (crash before the outcome) and an
// unknown outcome are both journaled for the next attempt.
func journalPendingStays(c *checker) {
	c.mustAdd(1, 0)
	first := c.mustClaimOwned(1, claimOpts(0, 10, 3), 1)
	pending, unknown := call("sendMessage", 1), call("sendPhoto", 1)
	c.mustIntent(first, pending, 1, intake.IntentRecorded)
	c.mustIntent(first, unknown, 2, intake.IntentRecorded)
	if !c.outcome(first, unknown, intake.CallResult{Outcome: intake.CallUnknown, Body: []byte("connection reset")}, 3) {
		c.fatalf("RecordOutcome(unknown) reported false")
	}
	// The lease lapses (a crash); attempt 2 takes over.
	second := c.mustClaimOwned(1, claimOpts(11, 100, 3), 2)
	if e := c.mustIntent(second, pending, 12, intake.IntentJournaled); e.Outcome != intake.CallPending || e.ClaimID != first.ClaimID {
		c.errorf("attempt 2 found the intent without outcome as %s by claim %q; want pending by attempt 1's claim", e.Outcome, e.ClaimID)
	}
	if e := c.mustIntent(second, unknown, 13, intake.IntentJournaled); e.Outcome != intake.CallUnknown || string(e.Body) != "connection reset" {
		c.errorf("attempt 2 found the unknown call as %s %q; want unknown \"connection reset\"", e.Outcome, e.Body)
	}
	// The outcome of attempt 1 may still arrive after its lease ended.
	if !c.outcome(first, pending, answered(`{"ok":true}`), 14) {
		c.errorf("RecordOutcome by attempt 1 after its lease ended reported false; an outcome is fenced by the entry, not the lease")
	}
}

// journalNotDispatched: a not-dispatched entry is replaced by the next
// identical intent.
func journalNotDispatched(c *checker) {
	c.mustAdd(1, 0)
	first := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	cl := call("sendMessage", 1)
	c.mustIntent(first, cl, 1, intake.IntentRecorded)
	if !c.outcome(first, cl, intake.CallResult{Outcome: intake.CallNotDispatched, Body: []byte("connect refused")}, 2) {
		c.fatalf("RecordOutcome(not_dispatched) reported false")
	}
	if !c.settleOwned(first, failedAt(3, 4, "x")) {
		c.fatalf("Settle(failed) reported false")
	}
	second := c.mustClaimOwned(1, claimOpts(5, 100, 3), 2)
	e := c.mustIntent(second, cl, 6, intake.IntentRecorded)
	if e.Attempt != 2 || e.ClaimID != second.ClaimID || e.Outcome != intake.CallPending || !e.IntendedAt.Equal(at(6)) {
		c.errorf("the intent replacing a not-dispatched entry is %+v; want pending under attempt 2 at 6ms", e)
	}
	// What is stored, not only what was answered: a fresh pending entry,
	// nothing of the not-dispatched one left.
	if es := c.entries(1); len(es) != 1 {
		c.errorf("Journal(1) after the replacing intent has %d entries; want 1", len(es))
	} else if g := es[0]; g.Attempt != 2 || g.ClaimID != second.ClaimID || g.Outcome != intake.CallPending ||
		!g.IntendedAt.Equal(at(6)) || g.Status != 0 || len(g.Body) != 0 || !g.DecidedAt.IsZero() {
		c.errorf("Journal(1) after the replacing intent holds attempt %d, claim %q, %s, intended at %v, status %d, body %q, decided at %v; want attempt 2 under its claim id, pending, intended at 6ms, no status, body or decision",
			g.Attempt, g.ClaimID, g.Outcome, g.IntendedAt, g.Status, g.Body, g.DecidedAt)
	}
	if c.outcome(first, cl, answered("{}"), 7) {
		c.errorf("attempt 1 recorded an outcome on the entry attempt 2 took over")
	}
	if !c.outcome(second, cl, answered(`{"ok":true}`), 8) {
		c.errorf("attempt 2 could not record the outcome of its intent")
	}
	if es := c.entries(1); len(es) != 1 || es[0].Attempt != 2 || es[0].Outcome != intake.CallAnswered {
		c.errorf("Journal(1) = %v; want one answered entry of attempt 2", methods(es))
	}
}

// journalOutcomeFence: a wrong claim id or attempt records nothing, an
// outcome is recorded once, an unrecorded call has no outcome.
func journalOutcomeFence(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	cl := call("sendMessage", 1)
	if c.outcome(id, cl, answered("{}"), 1) {
		c.errorf("RecordOutcome of a call without intent reported true")
	}
	c.mustIntent(id, cl, 2, intake.IntentRecorded)
	if c.outcome(wrongClaim(id), cl, answered("{}"), 3) {
		c.errorf("RecordOutcome with a wrong claim id reported true")
	}
	if c.outcome(intake.Identity{UpdateID: 1, Attempt: 2, ClaimID: id.ClaimID}, cl, answered("{}"), 3) {
		c.errorf("RecordOutcome with a wrong attempt reported true")
	}
	if !c.outcome(id, cl, answered(`{"first":1}`), 4) {
		c.fatalf("RecordOutcome by the recording identity reported false")
	}
	if c.outcome(id, cl, intake.CallResult{Outcome: intake.CallUnknown}, 5) {
		c.errorf("a second RecordOutcome of the same entry reported true")
	}
	if es := c.entries(1); len(es) != 1 || string(es[0].Body) != `{"first":1}` || es[0].Status != 200 || !es[0].DecidedAt.Equal(at(4)) {
		c.errorf("Journal(1) = %v; want the first outcome only, decided at 4ms", methods(es))
	}
}

// journalKeys: calls that differ in method, hash or occurrence are distinct
// entries, and Journal lists them by intent time.
func journalKeys(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	other := c.mustClaimOwned(2, claimOpts(0, 100, 3), 1)
	calls := []intake.Call{
		{Method: "sendMessage", ParamsHash: "a", Occurrence: 1},
		{Method: "sendMessage", ParamsHash: "a", Occurrence: 2},
		{Method: "sendMessage", ParamsHash: "b", Occurrence: 1},
		{Method: "sendPhoto", ParamsHash: "a", Occurrence: 1},
	}
	for i, cl := range calls {
		c.mustIntent(id, cl, int64(10-i), intake.IntentRecorded)
	}
	c.mustIntent(other, calls[0], 1, intake.IntentRecorded)
	es := c.entries(1)
	if len(es) != len(calls) {
		c.fatalf("Journal(1) has %d entries; want %d", len(es), len(calls))
	}
	for i, e := range es {
		if want := calls[len(calls)-1-i]; e.Call != want || e.UpdateID != 1 {
			c.errorf("Journal(1)[%d] = update %d %+v; want %+v (ordered by intent time)", i, e.UpdateID, e.Call, want)
		}
	}
	if es := c.entries(2); len(es) != 1 {
		c.errorf("Journal(2) has %d entries; want 1: journals of different updates are separate", len(es))
	}
	if es := c.entries(3); len(es) != 0 {
		c.errorf("Journal(3) of a missing update has %d entries", len(es))
	}
	// Each call's outcome is its own, and so is the entry an identical
	// call finds: one with the same method and occurrence but another
	// hash, or the same hash under another method, is another call.
	for i, cl := range calls {
		if !c.outcome(id, cl, answered(fmt.Sprintf(`{"call":%d}`, i)), 20+int64(i)) {
			c.errorf("RecordOutcome(%+v) reported false; each distinct call has its own pending entry", cl)
		}
	}
	for i, cl := range calls {
		e := c.mustIntent(id, cl, 30+int64(i), intake.IntentJournaled)
		if want := fmt.Sprintf(`{"call":%d}`, i); e.Call != cl || string(e.Body) != want {
			c.errorf("RecordIntent(%+v) again found %+v answered %q; want its own entry, answered %s", cl, e.Call, e.Body, want)
		}
	}
}

// journalPruned: prune deletes the update's journal with it; the re-added
// update id starts empty and records the same call again.
func journalPruned(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	keep := c.mustClaimOwned(2, claimOpts(0, 100, 3), 1)
	cl := call("sendMessage", 1)
	c.mustIntent(id, cl, 1, intake.IntentRecorded)
	c.mustIntent(keep, cl, 1, intake.IntentRecorded)
	c.outcome(id, cl, answered("{}"), 2)
	if !c.settleOwned(id, completed(3)) {
		c.fatalf("Settle(completed) reported false")
	}
	if es := c.entries(1); len(es) != 1 {
		c.errorf("Journal(1) of a settled, unpruned update has %d entries; want 1", len(es))
	}
	if n := c.prune(4); n != 1 {
		c.fatalf("Prune(before 4ms) deleted %d rows; want 1", n)
	}
	if es := c.entries(1); len(es) != 0 {
		c.errorf("Journal(1) after pruning the update has %d entries; want none", len(es))
	}
	if es := c.entries(2); len(es) != 1 {
		c.errorf("Journal(2) of the unpruned update has %d entries after a prune; want 1", len(es))
	}
	c.mustAdd(1, 5)
	again := c.mustClaimOwned(1, claimOpts(5, 100, 3), 1)
	c.mustIntent(again, cl, 6, intake.IntentRecorded)
}

// journalInvalid: empty method or hash, occurrence 0 and a pending or
// unknown outcome string are errors.
func journalInvalid(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	for _, cl := range []intake.Call{
		{Method: "", ParamsHash: "a", Occurrence: 1},
		{Method: "m", ParamsHash: "", Occurrence: 1},
		{Method: "m", ParamsHash: "a", Occurrence: 0},
	} {
		if _, _, err := c.journal.RecordIntent(c.ctx, id, cl, at(1)); err == nil {
			c.errorf("RecordIntent(%+v) returned no error", cl)
		}
	}
	c.mustIntent(id, call("m", 1), 1, intake.IntentRecorded)
	for _, o := range []intake.CallOutcome{intake.CallPending, "sent", ""} {
		if _, err := c.journal.RecordOutcome(c.ctx, id, call("m", 1), intake.CallResult{Outcome: o}, at(2)); err == nil {
			c.errorf("RecordOutcome with outcome %q returned no error", o)
		}
		// The deferred form records exactly as RecordOutcome does.
		if _, err := c.journal.RecordOutcomeDeferred(c.ctx, id, call("m", 1), intake.CallResult{Outcome: o}, at(2)); err == nil {
			c.errorf("RecordOutcomeDeferred with outcome %q returned no error", o)
		}
	}
	if es := c.entries(1); len(es) != 1 || es[0].Outcome != intake.CallPending {
		c.errorf("Journal(1) = %v after invalid outcomes; want the entry still pending", methods(es))
	}
	// A result without a body is valid: it is recorded with an empty one.
	if !c.outcome(id, call("m", 1), intake.CallResult{Outcome: intake.CallUnknown}, 3) {
		c.errorf("RecordOutcome(unknown, no body) of the entry's own intent reported false")
	}
	if es := c.entries(1); len(es) != 1 || es[0].Outcome != intake.CallUnknown || len(es[0].Body) != 0 {
		c.errorf("Journal(1) = %v after an outcome without a body; want the entry unknown, with an empty body", methods(es))
	}
}

// journalRequeue: requeueing keeps the journal, so the requeued update's
// next attempt finds its calls.
func journalRequeue(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 1), 1)
	cl := call("sendMessage", 1)
	c.mustIntent(id, cl, 1, intake.IntentRecorded)
	c.outcome(id, cl, answered(`{"ok":true}`), 2)
	if !c.settleOwned(id, abandoned(3, "gave up")) {
		c.fatalf("Settle(abandoned) reported false")
	}
	ok, err := c.admin.Requeue(c.ctx, 1, at(4))
	c.failed("Requeue(1)", err)
	if !ok {
		c.fatalf("Requeue(1) of an abandoned row reported false")
	}
	again := c.mustClaimOwned(1, claimOpts(5, 100, 1), 1)
	if e := c.mustIntent(again, cl, 6, intake.IntentJournaled); e.Outcome != intake.CallAnswered {
		c.errorf("the requeued update's call was journaled as %s; want answered", e.Outcome)
	}
}

// journalDeferred: outcomes recorded with RecordOutcomeDeferred, alone or
// while intents are recorded, are applied exactly as RecordOutcome applies
// them and durable on return.
func journalDeferred(c *checker) {
	d := c.journal
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100_000, 3), 1)
	var calls []intake.Call
	for n := 1; n <= racers; n++ {
		cl := call("sendMessage", n)
		c.mustIntent(id, cl, 1, intake.IntentRecorded)
		calls = append(calls, cl)
	}
	alone := call("sendPhoto", 1)
	c.mustIntent(id, alone, 1, intake.IntentRecorded)
	deferred := func(cl intake.Call, res intake.CallResult, who intake.Identity) bool {
		ok, err := d.RecordOutcomeDeferred(c.ctx, who, cl, res, at(2))
		c.failed(fmt.Sprintf("RecordOutcomeDeferred(%s, %s #%d)", fmtID(who), cl.Method, cl.Occurrence), err)
		return ok
	}
	// Alone: nothing else is written meanwhile.
	if !deferred(alone, answered(`{"ok":true,"alone":1}`), id) {
		c.errorf("RecordOutcomeDeferred of a pending entry with no other write reported false")
	}
	// Alongside intents of other calls.
	var wg sync.WaitGroup
	for i, cl := range calls {
		wg.Go(func() {
			defer c.recoverPanic()
			if !deferred(cl, answered(fmt.Sprintf(`{"ok":true,"n":%d}`, i)), id) {
				c.errorf("RecordOutcomeDeferred(%s #%d) beside intents reported false", cl.Method, cl.Occurrence)
			}
		})
		wg.Go(func() {
			defer c.recoverPanic()
			c.mustIntent(id, call("sendVideo", i+1), 3, intake.IntentRecorded)
		})
	}
	wg.Wait()
	if deferred(calls[0], answered(`{}`), id) {
		c.errorf("a second deferred outcome of an entry was applied")
	}
	if deferred(alone, answered(`{}`), wrongClaim(id)) {
		c.errorf("a deferred outcome with a wrong claim id was applied")
	}
	got := map[string]intake.JournalEntry{}
	for _, e := range c.entries(1) {
		got[fmt.Sprintf("%s#%d", e.Method, e.Occurrence)] = e
	}
	if e := got["sendPhoto#1"]; e.Outcome != intake.CallAnswered || string(e.Body) != `{"ok":true,"alone":1}` || e.Status != 200 {
		c.errorf("the outcome deferred alone reads %s %d %q", e.Outcome, e.Status, e.Body)
	}
	for i, cl := range calls {
		want := fmt.Sprintf(`{"ok":true,"n":%d}`, i)
		if e := got[fmt.Sprintf("%s#%d", cl.Method, cl.Occurrence)]; e.Outcome != intake.CallAnswered || string(e.Body) != want || !e.DecidedAt.Equal(at(2)) {
			c.errorf("the outcome deferred beside intents (%s #%d) reads %s %q decided %v; want answered %s at 2ms", cl.Method, cl.Occurrence, e.Outcome, e.Body, e.DecidedAt, want)
		}
		if e := got[fmt.Sprintf("sendVideo#%d", i+1)]; e.Outcome != intake.CallPending {
			c.errorf("an intent recorded beside deferred outcomes reads %s; want pending", e.Outcome)
		}
	}
}

// journalOrder: intents recorded out of order, several in one millisecond,
// are listed by intent time, then method, hash and occurrence.
func journalOrder(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	recorded := []struct {
		call intake.Call
		ms   int64
	}{
		{intake.Call{Method: "sendMessage", ParamsHash: "b", Occurrence: 2}, 10},
		{intake.Call{Method: "sendMessage", ParamsHash: "b", Occurrence: 1}, 10},
		{intake.Call{Method: "sendMessage", ParamsHash: "a", Occurrence: 1}, 10},
		{intake.Call{Method: "editMessageText", ParamsHash: "z", Occurrence: 1}, 10},
		{intake.Call{Method: "answerCallbackQuery", ParamsHash: "a", Occurrence: 1}, 11},
		{intake.Call{Method: "sendPhoto", ParamsHash: "a", Occurrence: 1}, 9},
	}
	for _, r := range recorded {
		c.mustIntent(id, r.call, r.ms, intake.IntentRecorded)
	}
	var got []string
	for _, e := range c.entries(1) {
		got = append(got, fmt.Sprintf("%d:%s/%s/%d", e.IntendedAt.Sub(at(0)).Milliseconds(), e.Method, e.ParamsHash, e.Occurrence))
	}
	want := "9:sendPhoto/a/1 10:editMessageText/z/1 10:sendMessage/a/1 10:sendMessage/b/1 10:sendMessage/b/2 11:answerCallbackQuery/a/1"
	if s := strings.Join(got, " "); s != want {
		c.errorf("Journal(1) lists %s; want %s", s, want)
	}
}
