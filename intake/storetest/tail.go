package storetest

import (
	"fmt"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
)

// The tail cases, part of the Journal group: an [intake.JournalStore] admits the calls of the
// identity that completed its update (see "Who may call" there), and no
// other identity without a live lease.

// tailFirstID is the first update id of the tail race's rounds.
const tailFirstID = 700

func tailCases() []testCase {
	return []testCase{
		{name: "TailAdmitted", rule: "the identity that completed an update records its calls, journaled, after its lease, until the row is pruned; Owns still refuses it", needs: capJournal, run: tailAdmitted},
		{name: "EndedAttemptRefused", rule: "an attempt that ended failed, abandoned or exhausted records no call", needs: capJournal, run: tailEndedRefused},
		{name: "TailEndsWithRow", rule: "an identity whose row was claimed again, requeued or pruned and recorded again records no call, whatever its attempt number", needs: capJournal | capAdmin, run: tailEndsWithRow},
		{name: "ConcurrentTailIntents", rule: "of concurrent identical intents of a tail exactly one is recorded", needs: capJournal, run: tailRace},
	}
}

func (c *checker) admits(id intake.Identity, atMS int64) bool {
	ok, err := c.journal.Admits(c.ctx, id, at(atMS))
	c.failed(fmt.Sprintf("Admits(%s, at %dms)", fmtID(id), atMS), err)
	return ok
}

// notAdmitted reports a violation unless id is refused at atMS by both Admits
// and RecordIntent, for what (a description of id's situation).
func (c *checker) notAdmitted(id intake.Identity, atMS int64, what string) {
	if c.admits(id, atMS) {
		c.errorf("Admits(%s, at %dms) = true for %s; want false", fmtID(id), atMS, what)
	}
	if _, in := c.intent(id, call("sendTail", 1), atMS); in != intake.IntentStale {
		c.errorf("RecordIntent(%s, at %dms) = %s for %s; want stale", fmtID(id), atMS, in, what)
	}
}

// tailAdmitted: an update completed by id; id's calls are recorded after
// the lease ended, journaled (identical calls replayed, outcomes fenced by
// the entry), Admits says so, and Owns does not. Pruning ends the tail.
func tailAdmitted(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	// Before the completion, as Owns: through the lease's end inclusive.
	if !c.admits(id, 100) {
		c.errorf("Admits(%s, at 100ms) = false under a lease live through 100ms; want true", fmtID(id))
	}
	if c.admits(id, 101) {
		c.errorf("Admits(%s, at 101ms) = true after the lease ended at 100ms, the update not completed; want false", fmtID(id))
	}
	c.mustIntent(id, call("answerCallbackQuery", 1), 10, intake.IntentRecorded)
	if !c.settleOwned(id, completed(20)) {
		c.fatalf("Settle(%s, completed at 20ms) reported false", fmtID(id))
	}
	// Within the lease and long after it.
	for _, ms := range []int64{30, 100, 10_000} {
		if !c.admits(id, ms) {
			c.errorf("Admits(%s, at %dms) = false for the identity that completed the update; want true (its tail)", fmtID(id), ms)
		}
	}
	if c.owns(id, 30) {
		c.errorf("Owns(%s, at 30ms) = true after the attempt completed; Owns admits no tail", fmtID(id))
	}
	edit := call("editMessageText", 1)
	e := c.mustIntent(id, edit, 10_000, intake.IntentRecorded)
	if e.Outcome != intake.CallPending || e.Attempt != 1 || e.ClaimID != id.ClaimID || !e.IntendedAt.Equal(at(10_000)) {
		c.errorf("the tail's entry is %+v; want pending under the completing identity at 10000ms", e)
	}
	if !c.outcome(id, edit, answered(`{"ok":true,"tail":1}`), 10_001) {
		c.errorf("RecordOutcome of the tail's own intent reported false")
	}
	if got := c.mustIntent(id, edit, 10_002, intake.IntentJournaled); got.Outcome != intake.CallAnswered || string(got.Body) != `{"ok":true,"tail":1}` {
		c.errorf("the tail's identical call found %s %q; want its answered entry", got.Outcome, got.Body)
	}
	if c.outcome(wrongClaim(id), edit, answered(`{}`), 10_003) {
		c.errorf("RecordOutcome with a wrong claim id applied to the tail's entry")
	}
	c.notAdmitted(wrongClaim(id), 30, "a wrong claim id on a completed row")
	c.notAdmitted(intake.Identity{UpdateID: 1, Attempt: 2, ClaimID: id.ClaimID}, 30, "a wrong attempt on a completed row")
	c.notAdmitted(intake.Identity{UpdateID: 2, Attempt: 1, ClaimID: id.ClaimID}, 30, "a missing update")
	es := c.entries(1)
	if len(es) != 2 || es[1].Method != "editMessageText" || es[1].Outcome != intake.CallAnswered {
		c.errorf("Journal(1) = %v; want the call under the lease, then the tail's answered call", methods(es))
	}
	if n := c.prune(10_004); n != 1 {
		c.fatalf("Prune(before 10004ms) deleted %d rows; want 1", n)
	}
	c.notAdmitted(id, 10_005, "the identity that completed a pruned update")
}

// tailEndedRefused: attempts that ended failed (retry pending), abandoned or
// exhausted are refused, at once and after their lease, and leave no entry.
func tailEndedRefused(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	failed := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	gaveUp := c.mustClaimOwned(2, claimOpts(0, 100, 3), 1)
	if !c.settleOwned(failed, failedAt(10, 50_000, "handler failed")) {
		c.fatalf("Settle(%s, failed) reported false", fmtID(failed))
	}
	if !c.settleOwned(gaveUp, abandoned(10, "gave up")) {
		c.fatalf("Settle(%s, abandoned) reported false", fmtID(gaveUp))
	}
	for _, ms := range []int64{20, 200} {
		c.notAdmitted(failed, ms, "an attempt that ended failed, its retry not yet claimed")
		c.notAdmitted(gaveUp, ms, "an attempt that ended abandoned")
	}
	ids := []int64{1, 2}
	c.mustAdd(3, 0)
	ex := c.mustClaimOwned(3, claimOpts(0, 100, 3), 1)
	if !c.exhaust(ex, 10, "exhausted") {
		c.fatalf("Exhaust(%s) reported false", fmtID(ex))
	}
	c.notAdmitted(ex, 20, "an exhausted attempt")
	if !c.ack(ex, 30) {
		c.fatalf("AcknowledgeExhaustion(%s) reported false", fmtID(ex))
	}
	c.notAdmitted(ex, 40, "an acknowledged exhaustion")
	ids = append(ids, 3)
	for _, u := range ids {
		if es := c.entries(u); len(es) != 0 {
			c.errorf("Journal(%d) = %v; an ended attempt recorded calls", u, methods(es))
		}
	}
}

// tailEndsWithRow: an attempt whose row was claimed again, requeued, or
// pruned and recorded again is refused, even when the new identity has the
// same attempt number and itself completed the row.
func tailEndsWithRow(c *checker) {
	c.mustAdd(1, 0)
	first := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	if !c.settleOwned(first, failedAt(10, 20, "x")) {
		c.fatalf("Settle(%s, failed) reported false", fmtID(first))
	}
	second := c.mustClaimOwned(1, claimOpts(20, 100, 3), 2)
	c.notAdmitted(first, 30, "attempt 1 of a row claimed again")
	if !c.settleOwned(second, abandoned(40, "gave up")) {
		c.fatalf("Settle(%s, abandoned) reported false", fmtID(second))
	}
	ok, err := c.admin.Requeue(c.ctx, 1, at(50))
	c.failed("Requeue(1)", err)
	if !ok {
		c.fatalf("Requeue(1) of an abandoned row reported false")
	}
	c.notAdmitted(second, 60, "the last attempt of a requeued row")
	third := c.mustClaimOwned(1, claimOpts(70, 200, 3), 1)
	if !c.settleOwned(third, completed(80)) {
		c.fatalf("Settle(%s, completed) reported false", fmtID(third))
	}
	c.notAdmitted(second, 90, "the last attempt before a requeue, after the requeued row completed")
	if !c.admits(third, 90) {
		c.errorf("Admits(%s, at 90ms) = false for the attempt that completed the requeued row", fmtID(third))
	}
	c.mustIntent(third, call("sendMessage", 1), 90, intake.IntentRecorded)
	// Pruned and recorded again: the new attempt 1 completes it too.
	if n := c.prune(100); n != 1 {
		c.fatalf("Prune(before 100ms) deleted %d rows; want 1", n)
	}
	c.mustAdd(1, 110)
	again := c.mustClaimOwned(1, claimOpts(110, 300, 3), 1)
	if !c.settleOwned(again, completed(120)) {
		c.fatalf("Settle(%s, completed) reported false", fmtID(again))
	}
	c.notAdmitted(third, 130, "the attempt that completed the update before it was pruned and recorded again (same attempt number, another claim id)")
	if e := c.mustIntent(again, call("sendMessage", 1), 130, intake.IntentRecorded); e.ClaimID != again.ClaimID {
		c.errorf("the new tail's intent is recorded under claim %q; want %q", e.ClaimID, again.ClaimID)
	}
}

// tailRace: racers identical intents of one tail at once, in rounds on
// fresh rows; exactly one is recorded per round, the others find it
// journaled.
func tailRace(c *checker) {
	for round := range raceRounds {
		u := int64(tailFirstID + round)
		c.mustAdd(u, 0)
		id := c.mustClaimOwned(u, claimOpts(0, 100, 3), 1)
		if !c.settleOwned(id, completed(10)) {
			c.fatalf("Settle(%s, completed) reported false", fmtID(id))
		}
		var (
			mu       sync.Mutex
			recorded int
		)
		fns := make([]func(), racers)
		for i := range fns {
			fns[i] = func() {
				_, in, err := c.journal.RecordIntent(c.ctx, id, call("editMessageText", 1), at(200))
				switch {
				case err != nil:
					c.errorf("a concurrent RecordIntent of a tail returned an error: %v", err)
				case in == intake.IntentRecorded:
					mu.Lock()
					recorded++
					mu.Unlock()
				case in != intake.IntentJournaled:
					c.errorf("a concurrent RecordIntent of a tail reported %s; want recorded or journaled", in)
				}
			}
		}
		together(c, fns...)
		if recorded != 1 {
			c.errorf("%d of %d concurrent identical intents of the tail %s were recorded; want exactly 1", recorded, racers, fmtID(id))
		}
	}
}
