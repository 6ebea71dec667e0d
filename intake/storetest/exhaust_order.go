package storetest

import (
	"slices"
)

// exhaustionOrderRule is the rule of exhaustionsInUpdateIDOrder.
const exhaustionOrderRule = "DueExhaustions lists in update id order, whatever order the rows were exhausted in"

// exhaustionsInUpdateIDOrder: [intake.Store.DueExhaustions] lists in
// ascending update id order, on the first page as on later ones. Updates
// 1, 2 and 3 are exhausted in the reverse order (3 at 5ms, 2 at 10ms, 1 at
// 15ms), so a listing ordered by exhaustion time, or any order but the
// update id's, shows on a full page and on a short one.
func exhaustionsInUpdateIDOrder(c *checker) {
	for id := int64(1); id <= 3; id++ {
		c.mustAdd(id, 0)
	}
	for id := int64(3); id >= 1; id-- {
		ident := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		atMS := 5 * (4 - id)
		if !c.exhaust(ident, atMS, "terminal") {
			c.fatalf("Exhaust(%s, at %dms) of a live claim reported false", fmtID(ident), atMS)
		}
	}
	for _, ch := range []struct {
		limit int
		after *int64
		want  []int64
	}{
		{10, nil, []int64{1, 2, 3}},
		{2, nil, []int64{1, 2}},
		{1, nil, []int64{1}},
		{10, ptr(1), []int64{2, 3}},
		{1, ptr(1), []int64{2}},
	} {
		if got := exhaustionIDs(c.dueExhaustions(ch.limit, ch.after)); !slices.Equal(got, ch.want) {
			c.errorf("DueExhaustions(limit %d, after %s) listed %v, with update 3 exhausted first and 1 last; want %v", ch.limit, fmtAfter(ch.after), got, ch.want)
		}
	}
}
