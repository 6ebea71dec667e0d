package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// completionClearsErrorRule is the rule of completionClearsError.
const completionClearsErrorRule = "a completion clears the row's error text, whatever text its settlement carries"

// completionClearsError: [intake.Settlement.Error] is the failure text of a
// failed or abandoned settlement, and a completed row has none
// ([intake.Row.Error]). Update 1 fails once ("boom") and its second
// attempt completes with an error text set; update 2 completes its first
// attempt with an error text and its attempt's record. Each settlement is
// made alone, one at a time, so a store that merges concurrent
// settlements is judged on its single-row path (Batch/ConcurrentSettles
// judges the merged one). Get must show both completed with no error.
func completionClearsError(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	one := c.mustClaimOwned(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settleOwned(one, failedAt(1, 5, "boom")) {
		c.fatalf("Settle(%s, failed at 1ms) of a live lease reported false", fmtID(one))
	}
	again := c.mustClaimOwned(1, claimOpts(5, 100, defaultMax), 2)
	done := completed(6)
	done.Error = "not kept: completed"
	if !c.settleOwned(again, done) {
		c.fatalf("Settle(%s, completed at 6ms) of a live lease reported false", fmtID(again))
	}
	two := c.mustClaimOwned(2, claimOpts(0, 100, defaultMax), 1)
	doneRec := completed(7)
	doneRec.Error = "not kept: completed"
	doneRec = withRecord(doneRec, record(2, 1, two.ClaimID, intake.AttemptCompleted, 0, 7))
	if !c.settleOwned(two, doneRec) {
		c.fatalf("Settle(%s, completed at 7ms, with its record) of a live lease reported false", fmtID(two))
	}
	c.expectRow("after a completion whose settlement carried an error text", 1,
		wantRow{state: intake.StateCompleted, attempts: 2, claimID: again.ClaimID, ignoreDue: true, settledMS: 6})
	c.expectRow("after a completion with its record whose settlement carried an error text", 2,
		wantRow{state: intake.StateCompleted, attempts: 1, claimID: two.ClaimID, ignoreDue: true, settledMS: 7})
}
