package storetest

import (
	"bytes"

	"github.com/tgrelay/tgrelay/intake"
)

// oldestPendingSinceRequeue: Stats' OldestPending is when the oldest
// pending row became pending: its receipt, or its requeue. A row received
// long ago and requeued just now is not old.
func oldestPendingSinceRequeue(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(10, 100, defaultMax), 1)
	if !c.settle(1, 1, abandoned(20, "x")) {
		c.fatalf("Settle(1, attempt 1, abandoned at 20ms) of a live lease reported false")
	}
	c.mustAdd(2, 300)
	if ok, err := c.admin.Requeue(c.ctx, 1, at(500)); err != nil || !ok {
		c.fatalf("Requeue(1, at 500ms) of an abandoned row = %v, %v; want true", ok, err)
	}
	st, err := c.admin.Stats(c.ctx)
	c.failed("Stats", err)
	if !st.OldestPending.Equal(at(300)) {
		c.errorf("Stats.OldestPending is %s; want 300ms, when update 2 was received (update 1, received at 0ms, is pending only since its requeue at 500ms)", offset(st.OldestPending))
	}
	c.mustClaim(2, claimOpts(600, 700, defaultMax), 1)
	st, err = c.admin.Stats(c.ctx)
	c.failed("Stats", err)
	if !st.OldestPending.Equal(at(500)) {
		c.errorf("Stats.OldestPending is %s with only the requeued update 1 pending; want 500ms, its requeue", offset(st.OldestPending))
	}
}

// scribble overwrites every byte of b, as a caller may.
func scribble(b []byte) {
	for i := range b {
		b[i] = '#'
	}
}

// readsReturnPrivateBodies: every read (Due, DueExhaustions, Get, List)
// returns bodies the caller may modify without changing what the store
// holds: a second read returns the stored body unchanged.
func readsReturnPrivateBodies(c *checker) {
	const pendingID, exhaustedID = 1, 2
	c.mustAdd(pendingID, 0)
	want := map[int64][]byte{pendingID: body(pendingID)}
	c.mustAdd(exhaustedID, 0)
	id := c.mustClaimOwned(exhaustedID, claimOpts(0, 100, defaultMax), 1)
	if !c.exhaust(id, 10, "x") {
		c.fatalf("Exhaust(%s) reported false", fmtID(id))
	}
	want[exhaustedID] = body(exhaustedID)
	check := func(read string) {
		rows := c.due(20, 20, 10)
		if len(rows) != 1 || !bytes.Equal(rows[0].Body, want[pendingID]) {
			c.errorf("after the caller wrote into the bodies %s returned, Due lists %v with body %q; want update %d with %q", read, storedIDs(rows), firstBody(rows), pendingID, want[pendingID])
		}
		if c.admin != nil {
			for id, b := range want {
				if row, ok := c.get(id); !ok || !bytes.Equal(row.Body, b) {
					c.errorf("after the caller wrote into the bodies %s returned, Get(%d) has body %q; want %q", read, id, row.Body, b)
				}
			}
		}
		if e, ok := c.findExhaustion(exhaustedID); !ok || !bytes.Equal(e.Body, want[exhaustedID]) {
			c.errorf("after the caller wrote into the bodies %s returned, DueExhaustions has body %q for update %d; want %q", read, e.Body, exhaustedID, want[exhaustedID])
		}
	}
	for _, r := range c.due(20, 20, 10) {
		scribble(r.Body)
	}
	check("Due")
	for _, e := range c.dueExhaustions(10, nil) {
		scribble(e.Body)
	}
	check("DueExhaustions")
	if c.admin != nil {
		for id := range want {
			row, _ := c.get(id)
			scribble(row.Body)
		}
		check("Get")
		rows, err := c.admin.List(c.ctx, intake.ListQuery{Limit: 10})
		c.failed("List", err)
		for _, r := range rows {
			scribble(r.Body)
		}
		check("List")
	}
}

func firstBody(rows []intake.StoredUpdate) string {
	if len(rows) == 0 {
		return "(none)"
	}
	return string(rows[0].Body)
}

// dueReportsReceipt: Due reports each row's ReceivedAt as recorded, for a
// pending row, a failed row due for its retry and a processing row whose
// lease ended: the runner counts an update's deadline from it.
func dueReportsReceipt(c *checker) {
	c.mustAdd(1, 100)
	c.mustAdd(2, 200)
	c.mustAdd(3, 300)
	c.mustClaim(2, claimOpts(400, 500, defaultMax), 1)
	if !c.settle(2, 1, failedAt(450, 600, "x")) {
		c.fatalf("Settle(2, attempt 1, failed at 450ms) of a live lease reported false")
	}
	c.mustClaim(3, claimOpts(400, 500, defaultMax), 1)
	want := map[int64]int64{1: 100, 2: 200, 3: 300}
	rows := c.due(700, 700, 10)
	if len(rows) != 3 {
		c.fatalf("Due(now 700ms) listed %v; want updates 1, 2 and 3", storedIDs(rows))
	}
	for _, r := range rows {
		if !r.ReceivedAt.Equal(at(want[r.UpdateID])) {
			c.errorf("Due reports update %d received at %s; want %dms, its Incoming.ReceivedAt", r.UpdateID, offset(r.ReceivedAt), want[r.UpdateID])
		}
	}
}
