package storetest

import "slices"

// duePageRule is the rule of duePage.
const duePageRule = "a Due page holds the first due rows up to its limit: rows that are not due (pending within the grace, under a live lease, failed before the retry, settled or exhausted) never fill it"

// duePage: Due lists at most Limit rows, and they are the lowest update
// ids among the rows that are due, so the rows that are not due are judged
// before the page is cut, never after. A store that takes a page of rows
// first (a LIMIT before the due conditions) and then drops the rows that
// are not due lists fewer, or none, while due rows wait behind them, and a
// sweep that reads one page never schedules those. Updates 1 to 5 are not
// due at 100ms (1 pending within the grace, 2 under a live lease, 3 failed
// with its retry at 500ms, 4 completed, 5 an unacknowledged exhaustion);
// updates 6 to 8 are (6 pending past the grace, 7 under a lease that
// lapsed, 8 failed with its retry due). Each page of Due, and of
// DueInOrder for a store with strict order (none of these rows has a
// chat), is the first of 6, 7 and 8 up to its limit.
func duePage(c *checker) {
	const nowMS, pendingBeforeMS = 100, 40
	for id := int64(1); id <= 8; id++ {
		received := int64(0)
		if id == 1 {
			received = 50 // within the grace: received after 40ms
		}
		c.mustAdd(id, received)
	}
	c.mustClaim(2, claimOpts(0, 1000, defaultMax), 1)
	c.mustClaim(3, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(3, 1, failedAt(10, 500, "later")) {
		c.fatalf("Settle(3, attempt 1, failed at 10ms) of a live lease reported false")
	}
	c.mustClaim(4, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(4, 1, completed(10)) {
		c.fatalf("Settle(4, attempt 1, completed at 10ms) of a live lease reported false")
	}
	five := c.mustClaimOwned(5, claimOpts(0, 100, defaultMax), 1)
	if !c.exhaust(five, 10, "gave up") {
		c.fatalf("Exhaust(%s, at 10ms) of a live lease reported false", fmtID(five))
	}
	c.mustClaim(7, claimOpts(0, 50, defaultMax), 1)
	c.mustClaim(8, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(8, 1, failedAt(10, 60, "soon")) {
		c.fatalf("Settle(8, attempt 1, failed at 10ms) of a live lease reported false")
	}
	due := []int64{6, 7, 8}
	for _, limit := range []int{1, 2, 3, 10} {
		want := due[:min(limit, len(due))]
		if got := c.dueIDs(nowMS, pendingBeforeMS, limit); !slices.Equal(got, want) {
			c.errorf("Due(now %dms, pending before %dms, limit %d) = %v; want %v: updates 1 to 5 are not due and must not take the page's places", nowMS, pendingBeforeMS, limit, got, want)
		}
		if c.order == nil {
			continue
		}
		if got := c.strictDue(nowMS, pendingBeforeMS, limit, ""); !slices.Equal(got, want) {
			c.errorf("DueInOrder(now %dms, pending before %dms, limit %d) = %v; want %v: updates 1 to 5 are not due and must not take the page's places, and no row has a chat", nowMS, pendingBeforeMS, limit, got, want)
		}
	}
}
