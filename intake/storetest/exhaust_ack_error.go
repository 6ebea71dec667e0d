package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// ackKeepsErrorRule is the rule of ackKeepsError.
const ackKeepsErrorRule = "an acknowledged exhaustion is still an abandoned row: it keeps its error text, and its settlement time is the acknowledgement's"

// ackKeepsError: [intake.Row.Error] is the failure text of an abandoned
// row, an exhaustion's included, and an acknowledgement only settles the
// exhaustion. Update 1 is exhausted by its holder (Exhaust, "gave up") and
// update 2 spent by a claim ([intake.AttemptsSpentText]); once each is
// acknowledged, Get still shows it abandoned with that text, settled at the
// acknowledgement.
func ackKeepsError(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	one := c.mustClaimOwned(1, claimOpts(0, 100, defaultMax), 1)
	if !c.exhaust(one, 5, "gave up") {
		c.fatalf("Exhaust(%s, at 5ms) of a live lease reported false", fmtID(one))
	}
	two := c.mustClaimOwned(2, claimOpts(0, 100, 1), 1)
	if !c.settleOwned(two, failedAt(1, 5, "boom")) {
		c.fatalf("Settle(%s, failed at 1ms) of a live lease reported false", fmtID(two))
	}
	if attempt, ok := c.claim(2, claimOpts(6, 100, 1)); ok {
		c.fatalf("Claim(2, now 6ms, max attempts 1) took update 2 as attempt %d; its one attempt is spent", attempt)
	}
	want := map[int64]string{1: "gave up", 2: intake.AttemptsSpentText}
	for _, e := range c.dueExhaustions(10, nil) {
		if !c.ack(e.Identity, 20) {
			c.errorf("AcknowledgeExhaustion(%s, at 20ms) of a listed exhaustion reported false", fmtID(e.Identity))
		}
		delete(want, e.UpdateID)
	}
	if len(want) != 0 {
		c.fatalf("DueExhaustions did not list the exhaustions of updates %v", want)
	}
	for id, text := range map[int64]string{1: "gave up", 2: intake.AttemptsSpentText} {
		row, ok := c.get(id)
		if !ok {
			c.errorf("Get(%d) after the acknowledgement found no row", id)
			continue
		}
		if row.State != intake.StateAbandoned || row.Error != text || !row.SettledAt.Equal(at(20)) {
			c.errorf("Get(%d) after AcknowledgeExhaustion at 20ms = state %s, error %q, settled %s; want abandoned, %q (the exhaustion's text), settled 20ms",
				id, row.State, row.Error, offset(row.SettledAt), text)
		}
	}
}
