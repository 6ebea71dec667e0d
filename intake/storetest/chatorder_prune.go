package storetest

import "slices"

// A prune removes a chat's settled rows and nothing of the chat's order:
// the chat's unsettled rows hold it as before, also against a row of the
// chat recorded after the prune. A store that keeps each chat's rows apart
// for strict order (memstore's chats) and forgot a chat's remaining rows
// when it pruned one of them would let a later row overtake them.

// pruneKeepsChatHeldRule is the rule of chatOrderPruneKeepsHeld.
const pruneKeepsChatHeldRule = "a prune of a chat's settled rows leaves its unsettled rows holding the chat, also against rows recorded after the prune"

// chatOrderPruneKeepsHeld: rows 1, 2 and 3 of chat "a"; row 1 is claimed
// in order and completed at 20ms, row 2 stays pending, and a prune before
// 30ms removes row 1. Row 4 of chat "a", recorded after the prune, and row
// 3 are still held by row 2, in strict claims and listings alike; once row
// 2 completes, row 3 is next, and row 4 after it.
func chatOrderPruneKeepsHeld(c *checker) {
	c.addChat(1, "a", 0)
	c.addChat(2, "a", 0)
	c.addChat(3, "a", 0)
	c.expectStrict(1, 10, 100, true, "it is the lowest row of chat a")
	if !c.settle(1, 1, completed(20)) {
		c.fatalf("Settle(1, attempt 1, completed at 20ms) under a live lease reported false")
	}
	if n := c.prune(30); n != 1 {
		c.fatalf("Prune(before 30ms) with row 1 completed at 20ms = %d; want 1", n)
	}
	c.addChat(4, "a", 40)
	c.expectStrict(4, 50, 500, false, "row 2 of its chat is pending: the prune of the chat's completed row 1 released nothing")
	c.expectStrict(3, 50, 500, false, "row 2 of its chat is pending: the prune of the chat's completed row 1 released nothing")
	for _, chat := range []string{"", "a"} {
		if got := c.strictDue(50, 50, 10, chat); !slices.Equal(got, []int64{2}) {
			c.errorf("DueInOrder(now 50ms, chat %q) after the prune of row 1 = %v; want [2]: rows 3 and 4 are held by row 2", chat, got)
		}
	}
	c.expectStrict(2, 60, 600, true, "it is the lowest unsettled row of chat a")
	c.expectStrict(4, 70, 700, false, "row 2 of its chat is processing, and row 3 pending")
	if !c.settle(2, 1, completed(80)) {
		c.fatalf("Settle(2, attempt 1, completed at 80ms) under a live lease reported false")
	}
	c.expectStrict(4, 90, 900, false, "row 3 of its chat is pending")
	c.expectStrict(3, 90, 900, true, "row 2 of its chat completed and row 3 is next")
}
