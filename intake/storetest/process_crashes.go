package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// A row's crashes ([intake.Row.Crashes], [intake.ProcessClaim.MaxCrashes])
// count every attempt of the row that ended with its process, since the
// row was added or last requeued: a settlement or an exhaustion of a later
// attempt keeps them, and the claim that spends the row on a crash counts
// that crash too. A store that forgot them when an attempt failed would
// let a row crash its processes without end, one failure between crashes.

// crashesKeptRule is the rule of crashesKept.
const crashesKeptRule = "a row's crashes outlive the settlement or exhaustion of a later attempt, and the crash that spends the row is counted; only a requeue resets them"

// crashesKept: processes "a" (heartbeat to 10ms) and "b" (to 30ms) crash
// on update 1 in turn, with a failed attempt between the two crashes;
// process "c" (live) then finds the second crash spends a budget of two.
// Updates 2 and 3 are taken over once and then completed or exhausted:
// each keeps its one crash.
func crashesKept(c *checker) {
	c.mustRegister("a", 10)
	c.mustRegister("b", 30)
	c.mustRegister("c", 1_000_000)
	for id := int64(1); id <= 3; id++ {
		c.mustAdd(id, 0)
		c.mustClaimAs(id, withCrashes(owned(0, 1_000, 10, "a"), 3), 1)
	}

	// Update 1: crash, failed attempt, crash.
	second := c.mustClaimAs(1, withCrashes(owned(11, 1_000, 10, "b"), 3), 2)
	c.expectCrashes(1, 1, "after the takeover from process \"a\"")
	if !c.settleOwned(second, failedAt(12, 13, "boom")) {
		c.fatalf("Settle(%s, failed at 12ms) of a live lease reported false", fmtID(second))
	}
	c.expectCrashes(1, 1, "after its next attempt failed")
	c.mustClaimAs(1, withCrashes(owned(13, 1_000, 10, "b"), 3), 3)
	if ident, ok := c.claimAs(1, withCrashes(owned(31, 2_000, 10, "c"), 2)); ok {
		c.errorf("ClaimAs(1, now 31ms, process \"c\", max crashes 2) took update 1 as %s; want it spent: "+
			"process \"a\" crashed on attempt 1, attempt 2 failed, and process \"b\" (heartbeat to 30ms) crashed on attempt 3, "+
			"two crashes that reach the budget (a store that reset the crashes when attempt 2 failed counts one)", fmtID(ident))
	} else {
		c.spentWith(1, intake.CrashesSpentText)
		c.expectCrashes(1, 2, "after the claim that its second crash spent")
	}

	// Updates 2 and 3: one crash, then a completion or an exhaustion.
	two := c.mustClaimAs(2, withCrashes(owned(11, 1_000, 10, "c"), 3), 2)
	if !c.settleOwned(two, completed(12)) {
		c.errorf("Settle(%s, completed at 12ms) of a live lease reported false", fmtID(two))
	}
	c.expectCrashes(2, 1, "after the attempt that took it over completed it")
	three := c.mustClaimAs(3, withCrashes(owned(11, 1_000, 10, "c"), 3), 2)
	if !c.exhaust(three, 12, "gave up") {
		c.errorf("Exhaust(%s, at 12ms) of a live lease reported false", fmtID(three))
	}
	c.expectCrashes(3, 1, "after the attempt that took it over exhausted it")
}

// expectCrashes reports a violation unless Get shows update id with want
// crashes. It checks nothing for a store without [intake.AdminStore].
func (c *checker) expectCrashes(id int64, want int, when string) {
	if c.admin == nil {
		return
	}
	row, ok := c.get(id)
	if !ok {
		c.errorf("Get(%d) %s found no row", id, when)
		return
	}
	if row.Crashes != want {
		c.errorf("Get(%d) %s shows %d crashes; want %d", id, when, row.Crashes, want)
	}
}
