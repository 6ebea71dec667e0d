package storetest

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
)

// More cases of [intake.JournalStore]: outcomes land on their own
// occurrence, bodies are copied both ways, a deferred outcome reports its
// own write's result, and identical intents racing in many rounds.

const (
	// journalRaceFirstID is the first update id of the deferred outcome
	// rounds.
	journalRaceFirstID = 7000
	// intentRounds is how many rounds of identical intents race.
	intentRounds = raceRounds / 2
)

func journalPromiseCases() []testCase {
	return []testCase{
		{name: "OutcomePerOccurrence", rule: "an outcome is recorded on the entry of its own occurrence, and only there", needs: capJournal, run: journalOutcomeOccurrence},
		{name: "BodiesCopied", rule: "the journal copies an outcome's body, and the entries it returns are the caller's to modify", needs: capJournal, run: journalBodiesCopied},
		{name: "DeferredOwnResult", rule: "each deferred outcome reports whether its own write applied, whatever it shared a commit with", needs: capJournal, run: journalDeferredOwnResult},
		{name: "HashBeforeOccurrence", rule: journalHashBeforeOccurrenceRule, needs: capJournal, run: journalHashBeforeOccurrence},
	}
}

// journalOutcomeOccurrence: occurrences 1 and 2 of one call are pending;
// the outcome of occurrence 2, recorded first, lands on occurrence 2 only,
// and occurrence 1 then gets its own.
func journalOutcomeOccurrence(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	one, two := call("sendMessage", 1), call("sendMessage", 2)
	c.mustIntent(id, one, 1, intake.IntentRecorded)
	c.mustIntent(id, two, 2, intake.IntentRecorded)
	if !c.outcome(id, two, answered(`{"ok":true,"n":2}`), 3) {
		c.errorf("RecordOutcome(%s, sendMessage #2) of its pending entry reported false", fmtID(id))
	}
	byOcc := func() map[int]intake.JournalEntry {
		m := map[int]intake.JournalEntry{}
		for _, e := range c.entries(1) {
			m[e.Occurrence] = e
		}
		return m
	}
	got := byOcc()
	if e := got[1]; e.Outcome != intake.CallPending || len(e.Body) != 0 || !e.DecidedAt.IsZero() {
		c.errorf("after the outcome of occurrence 2, occurrence 1 reads %s %q decided %s; want pending, no body, undecided: the outcome landed on another occurrence",
			e.Outcome, e.Body, offset(e.DecidedAt))
	}
	if e := got[2]; e.Outcome != intake.CallAnswered || string(e.Body) != `{"ok":true,"n":2}` || !e.DecidedAt.Equal(at(3)) {
		c.errorf("occurrence 2 reads %s %q decided %s after its outcome; want answered {\"ok\":true,\"n\":2} at 3ms", e.Outcome, e.Body, offset(e.DecidedAt))
	}
	if !c.outcome(id, one, answered(`{"ok":true,"n":1}`), 4) {
		c.errorf("RecordOutcome(%s, sendMessage #1) of its pending entry reported false after occurrence 2 got its outcome", fmtID(id))
	}
	got = byOcc()
	if e := got[1]; e.Outcome != intake.CallAnswered || string(e.Body) != `{"ok":true,"n":1}` {
		c.errorf("occurrence 1 reads %s %q after its outcome; want answered {\"ok\":true,\"n\":1}", e.Outcome, e.Body)
	}
	if e := got[2]; string(e.Body) != `{"ok":true,"n":2}` || !e.DecidedAt.Equal(at(3)) {
		c.errorf("occurrence 2 reads %q decided %s after the outcome of occurrence 1; want its own, {\"ok\":true,\"n\":2} at 3ms", e.Body, offset(e.DecidedAt))
	}
}

// journalBodiesCopied: the caller reuses the body slice it passed to
// RecordOutcome, and scribbles over the entries Journal and RecordIntent
// return; the journal still reads the answer byte for byte.
func journalBodiesCopied(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, 3), 1)
	cl := call("sendMessage", 1)
	c.mustIntent(id, cl, 1, intake.IntentRecorded)
	want := []byte(`{"ok":true,"result":{"message_id":1}}`)
	buf := bytes.Clone(want)
	if !c.outcome(id, cl, intake.CallResult{Outcome: intake.CallAnswered, Status: 200, Body: buf}, 2) {
		c.fatalf("RecordOutcome(%s) of its pending entry reported false", fmtID(id))
	}
	for i := range buf {
		buf[i] = 'x'
	}
	check := func(after string) {
		es := c.entries(1)
		if len(es) != 1 || !bytes.Equal(es[0].Body, want) {
			var got []byte
			if len(es) == 1 {
				got = es[0].Body
			}
			c.errorf("Journal(1) after %s reads body %q (%d entries); want %q", after, got, len(es), want)
		}
	}
	check("the caller reused the slice it passed to RecordOutcome")
	for _, e := range c.entries(1) {
		for i := range e.Body {
			e.Body[i] = 'y'
		}
	}
	check("the caller modified the bodies an earlier Journal returned")
	if !c.settleOwned(id, failedAt(10, 20, "retry")) {
		c.fatalf("Settle(%s, failed at 10ms) reported false", fmtID(id))
	}
	again := c.mustClaimOwned(1, claimOpts(20, 100, 3), 2)
	e := c.mustIntent(again, cl, 21, intake.IntentJournaled)
	if !bytes.Equal(e.Body, want) {
		c.errorf("RecordIntent(%s) found the call journaled with body %q; want %q", fmtID(again), e.Body, want)
	}
	for i := range e.Body {
		e.Body[i] = 'z'
	}
	check("the caller modified the body of the entry RecordIntent returned")
}

// journalDeferredOwnResult: through RecordOutcomeDeferred, in each
// round racers record deferred outcomes at once, so that they share
// commits: half of them apply (a pending entry of their identity), the
// others do not (a wrong claim id, an entry already decided, a call never
// intended). Each must report its own result, never its commit's.
func journalDeferredOwnResult(c *checker) {
	d := c.journal
	const rounds = barrierRounds / 4
	wrong := 0
	for round := range rounds {
		u := int64(journalRaceFirstID + round)
		c.mustAdd(u, 0)
		id := c.mustClaimOwned(u, claimOpts(0, 100_000, 3), 1)
		decided := call("answerCallbackQuery", 1)
		c.mustIntent(id, decided, 1, intake.IntentRecorded)
		if !c.outcome(id, decided, answered(`{"ok":true,"first":true}`), 1) {
			c.fatalf("RecordOutcome(%s, answerCallbackQuery #1) of its pending entry reported false", fmtID(id))
		}
		type try struct {
			name  string
			who   intake.Identity
			cl    intake.Call
			apply bool
		}
		var tries []try
		for n := 1; n <= racers/2; n++ {
			cl := call("sendMessage", n)
			c.mustIntent(id, cl, 1, intake.IntentRecorded)
			tries = append(tries, try{fmt.Sprintf("the pending sendMessage #%d of its identity", n), id, cl, true})
			switch n % 3 {
			case 0:
				tries = append(tries, try{"the already decided answerCallbackQuery #1", id, decided, false})
			case 1:
				tries = append(tries, try{fmt.Sprintf("sendMessage #%d with a wrong claim id", n), wrongClaim(id), cl, false})
			default:
				tries = append(tries, try{fmt.Sprintf("sendPhoto #%d, never intended", n), id, call("sendPhoto", n), false})
			}
		}
		got := make([]bool, len(tries))
		fns := make([]func(), len(tries))
		for i, t := range tries {
			fns[i] = func() {
				ok, err := d.RecordOutcomeDeferred(c.ctx, t.who, t.cl, answered(fmt.Sprintf(`{"ok":true,"try":%d}`, i)), at(2))
				if err != nil {
					c.errorf("a concurrent RecordOutcomeDeferred of %s returned an error: %v", t.name, err)
				}
				got[i] = ok
			}
		}
		together(c, fns...)
		for i, t := range tries {
			if got[i] != t.apply {
				wrong++
				if wrong <= 3 {
					c.errorf("round %d: RecordOutcomeDeferred of %s reported %v; want %v, the result of its own write", round, t.name, got[i], t.apply)
				}
			}
		}
		for _, e := range c.entries(u) {
			if e.Call == decided && string(e.Body) != `{"ok":true,"first":true}` {
				c.errorf("round %d: the decided answerCallbackQuery #1 reads %q after deferred outcomes; want its first outcome", round, e.Body)
			}
			if e.Method == "sendMessage" && e.Outcome != intake.CallAnswered {
				c.errorf("round %d: sendMessage #%d reads %s after its deferred outcome; want answered", round, e.Occurrence, e.Outcome)
			}
			if e.Method == "sendPhoto" {
				c.errorf("round %d: the journal holds sendPhoto #%d, never intended, after a deferred outcome of it", round, e.Occurrence)
			}
		}
	}
	if wrong > 3 {
		c.errorf("%d deferred outcomes in %d rounds reported another write's result", wrong, rounds)
	}
}

// journalRaceRounds: racers record identical intents of one identity at
// once, released together, in intentRounds rounds, each on a fresh call;
// exactly one is recorded in each round, the others find it journaled.
func journalRaceRounds(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100_000, 3), 1)
	bad := 0
	for round := range intentRounds {
		cl := call("sendMessage", round+1)
		var (
			mu       sync.Mutex
			recorded int
		)
		fns := make([]func(), racers)
		for i := range fns {
			fns[i] = func() {
				_, in, err := c.journal.RecordIntent(c.ctx, id, cl, at(1))
				switch {
				case err != nil:
					c.errorf("a concurrent RecordIntent returned an error: %v", err)
				case in == intake.IntentRecorded:
					mu.Lock()
					recorded++
					mu.Unlock()
				case in != intake.IntentJournaled:
					c.errorf("a concurrent RecordIntent of a live identity reported %s", in)
				}
			}
		}
		together(c, staggeredAll(round, fns)...)
		if recorded != 1 {
			bad++
			if bad <= 3 {
				c.errorf("round %d: %d of %d concurrent identical intents were recorded; want exactly 1", round, recorded, racers)
			}
		}
	}
	if bad > 3 {
		c.errorf("in %d of %d rounds concurrent identical intents were not recorded exactly once", bad, intentRounds)
	}
}

// staggeredAll delays racer 0 of fns as [staggered] delays one of two, by
// an amount that sweeps with round, so that some round starts the others
// inside its window wherever that lies.
func staggeredAll(round int, fns []func()) []func() {
	if len(fns) < 2 {
		return fns
	}
	pair := staggered(round, fns[0], fns[1])
	return append(pair, fns[2:]...)
}
