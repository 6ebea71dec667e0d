package storetest

import "github.com/tgrelay/tgrelay/intake"

func pruneCases() []testCase {
	return []testCase{
		{name: "ForgetsSettled", rule: "settled updates are forgotten after pruning", run: pruneForgetsSettled},
		{name: "KeepsUnsettledRows", rule: "rows without a settlement time are never pruned", run: pruneKeepsUnsettled},
		{name: "SpentRowKeptUntilAcknowledged", rule: "a row a claim spends is never pruned before its exhaustion is acknowledged", run: spentRowKept},
		{name: "RecycledRowRefusesOldIdentity", rule: "after prune and re-add, attempt numbers repeat but claim ids never do", run: recycledRow},
		{name: "ConcurrentPrunesCountOnce", rule: "concurrent prunes delete each row once: their counts sum to the rows there were to prune", run: concurrentPrunes},
	}
}

// pruneForgetsSettled: rule 5. The bound is strict, a pruned id can be added
// again, a pending one cannot.
func pruneForgetsSettled(c *checker) {
	c.mustAdd(3, 0)
	c.mustClaim(3, claimOpts(30, 100, defaultMax), 1)
	if !c.settle(3, 1, abandoned(36, "gave up")) {
		c.fatalf("Settle(3, attempt 1, abandoned at 36ms) of a live lease reported false")
	}
	c.mustAdd(4, 0)
	if n := c.prune(36); n != 0 {
		c.errorf("Prune(before 36ms) deleted %d rows; the row settled at 36ms is not strictly before", n)
	}
	if n := c.prune(37); n != 1 {
		c.errorf("Prune(before 37ms) deleted %d rows; want exactly 1, the row settled at 36ms", n)
	}
	if !c.add(3, 40) {
		c.errorf("Add(3) after its row was pruned reported false")
	}
	if c.add(4, 40) {
		c.errorf("Add(4) reported true: the pending row 4 was pruned")
	}
}

// pruneKeepsUnsettled: pending, processing and failed rows, and
// unacknowledged exhaustions, survive any prune; only the settled row goes.
func pruneKeepsUnsettled(c *checker) {
	for id := int64(1); id <= 5; id++ {
		c.mustAdd(id, 0)
	}
	c.mustClaim(2, claimOpts(0, 10, defaultMax), 1) // processing, lease lapsed at 10ms
	c.mustClaim(3, claimOpts(0, 10, defaultMax), 1)
	if !c.settle(3, 1, failedAt(1, 5, "x")) { // failed, due since 5ms
		c.fatalf("Settle(3, attempt 1, failed at 1ms) of a live lease reported false")
	}
	c.mustClaim(4, claimOpts(0, 10, defaultMax), 1)
	if !c.settle(4, 1, completed(2)) {
		c.fatalf("Settle(4, attempt 1, completed at 2ms) of a live lease reported false")
	}
	kept := []int64{1, 2, 3, 5} // 5 stays pending below the durable level
	id := c.mustClaimOwned(5, claimOpts(0, 10, defaultMax), 1)
	if !c.exhaust(id, 1, "terminal") {
		c.fatalf("Exhaust(%s, at 1ms) of a live claim reported false", fmtID(id))
	}
	if n := c.prune(1_000_000); n != 1 {
		c.errorf("Prune(before 1000000ms) deleted %d rows; want 1, only the completed row 4", n)
	}
	for _, id := range kept {
		if c.add(id, 1) {
			c.errorf("Add(%d) reported true after a prune: the unsettled row was deleted", id)
		}
	}
	if !c.add(4, 1) {
		c.errorf("Add(4) after its completed row was pruned reported false")
	}
}

// spentRowKept: a claim's spend leaves an unacknowledged exhaustion, which
// no prune deletes; once acknowledged at 25ms it is pruned like any
// settled row.
// now, so the row is prunable strictly after it, and is no exhaustion.
func spentRowKept(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 10, 1), 1)
	if attempt, ok := c.claim(1, claimOpts(20, 30, 1)); ok {
		c.errorf("a claim at 20ms of a row with its one attempt spent took attempt %d", attempt)
	}
	if n := c.prune(1_000_000); n != 0 {
		c.errorf("Prune(before 1000000ms) deleted %d rows; the row spent at 20ms is an unacknowledged exhaustion", n)
	}
	e, ok := c.findExhaustion(1)
	if !ok {
		c.fatalf("the row spent at 20ms is not listed as an exhaustion")
	}
	if !c.ack(e.Identity, 25) {
		c.fatalf("AcknowledgeExhaustion(%s, at 25ms) of the listed exhaustion reported false", fmtID(e.Identity))
	}
	if n := c.prune(25); n != 0 {
		c.errorf("Prune(before 25ms) deleted %d rows; the exhaustion acknowledged at 25ms is not strictly before", n)
	}
	if n := c.prune(26); n != 1 {
		c.errorf("Prune(before 26ms) deleted %d rows; want 1, the exhaustion acknowledged at 25ms", n)
	}
}

// recycledRow: after a prune and re-add the attempt numbers start over, the
// claim ids do not, and the identity of the pruned row can never own,
// renew, settle, exhaust or acknowledge the new one.
func recycledRow(c *checker) {
	c.mustAdd(1, 0)
	old := c.mustClaimOwned(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settleOwned(old, completed(5)) {
		c.fatalf("Settle(%s, completed at 5ms) reported false for the holder", fmtID(old))
	}
	if n := c.prune(6); n != 1 {
		c.fatalf("Prune(before 6ms) deleted %d rows; want 1", n)
	}
	if !c.add(1, 6) {
		c.fatalf("Add(1) after its row was pruned reported false")
	}
	recycled := c.mustClaimOwned(1, claimOpts(7, 100, defaultMax), old.Attempt)
	if recycled.ClaimID == old.ClaimID {
		c.errorf("the re-added row's claim reused the pruned row's claim id %q", old.ClaimID)
	}
	c.expectPrunedFenced(old, 8)
	if c.exhaust(old, 9, "stale") {
		c.errorf("the pruned identity %s exhausted the recycled row", fmtID(old))
	}
	if !c.exhaust(recycled, 10, "terminal") {
		c.fatalf("Exhaust(%s, at 10ms) reported false for the holder", fmtID(recycled))
	}
	if c.ack(old, 11) {
		c.errorf("the pruned identity %s acknowledged the recycled row's exhaustion", fmtID(old))
	}
	if !c.ack(recycled, 12) {
		c.errorf("AcknowledgeExhaustion(%s) of its own exhaustion reported false", fmtID(recycled))
	}
}

// expectPrunedFenced reports each of Owns, Renew and Settle at atMS that
// old, the identity of a row since pruned and recorded again, still
// passes on the recycled row.
func (c *checker) expectPrunedFenced(old intake.Identity, atMS int64) {
	if c.owns(old, atMS) {
		c.errorf("the pruned identity %s owns the recycled row at %dms", fmtID(old), atMS)
	}
	if c.renewOwned(old, atMS+200, atMS) {
		c.errorf("the pruned identity %s renewed the recycled row at %dms", fmtID(old), atMS)
	}
	if c.settleOwned(old, completed(atMS)) {
		c.errorf("the pruned identity %s settled the recycled row at %dms", fmtID(old), atMS)
	}
}
