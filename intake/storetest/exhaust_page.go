package storetest

import (
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// exhaustionPageRule is the rule of exhaustionPage.
const exhaustionPageRule = "a DueExhaustions page holds the first unacknowledged exhaustions after its cursor, up to its limit: other rows never take its places"

// exhaustionPage: DueExhaustions lists only unacknowledged exhaustions and
// cuts its page after selecting them, never before, also past a cursor. A
// store that took the rows after the cursor first (a LIMIT before the
// exhaustion condition) and then dropped the others lists fewer, or none,
// while later exhaustions wait. Update 1 and 8 are unacknowledged
// exhaustions; 2 to 7 between them are pending, processing, failed,
// completed, an acknowledged exhaustion and abandoned by their attempt.
// Every page, from the start and after each cursor, is the first of 1
// and 8 it reaches, up to its limit.
func exhaustionPage(c *checker) {
	for id := int64(1); id <= 8; id++ {
		c.mustAdd(id, 0)
	}
	exhaust := func(id int64) intake.Identity {
		ident := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		if !c.exhaust(ident, 1, "terminal") {
			c.fatalf("Exhaust(%s, at 1ms) of a live claim reported false", fmtID(ident))
		}
		return ident
	}
	exhaust(1)
	c.mustClaim(3, claimOpts(0, 100, defaultMax), 1)
	for id, s := range map[int64]intake.Settlement{4: failedAt(1, 50, "x"), 5: completed(1), 7: abandoned(1, "y")} {
		c.mustClaim(id, claimOpts(0, 100, defaultMax), 1)
		if !c.settle(id, 1, s) {
			c.fatalf("Settle(%d, attempt 1, %s) reported false for the holder", id, s.State)
		}
	}
	if six := exhaust(6); !c.ack(six, 2) {
		c.fatalf("AcknowledgeExhaustion(%s, at 2ms) reported false", fmtID(six))
	}
	exhaust(8)
	for _, ch := range []struct {
		limit int
		after *int64
		want  []int64
	}{
		{1, nil, []int64{1}},
		{2, nil, []int64{1, 8}},
		{1, ptr(1), []int64{8}},
		{2, ptr(1), []int64{8}},
		{1, ptr(4), []int64{8}},
		{1, ptr(8), nil},
	} {
		if got := exhaustionIDs(c.dueExhaustions(ch.limit, ch.after)); !slices.Equal(got, ch.want) {
			c.errorf("DueExhaustions(limit %d, after %s) listed %v; want %v: only unacknowledged exhaustions take a page's places", ch.limit, fmtAfter(ch.after), got, ch.want)
		}
	}
}
