package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// requeueKeepsClaimRule is the rule of requeueKeepsClaimID.
const requeueKeepsClaimRule = "a requeued row was claimed: its claim id is not empty, as Row.ClaimID is only for a row never claimed"

// requeueKeepsClaimID: [intake.Row.ClaimID] is empty only when the row was
// never claimed. Update 1 fails its one claim and update 2 is spent by a
// claim after its attempt failed; each is requeued. Get and List must
// still show a claim id for both (the stores keep the last one, for the
// record, until the next claim replaces it), and an update only added
// shows none.
func requeueKeepsClaimID(c *checker) {
	for id := int64(1); id <= 3; id++ {
		c.mustAdd(id, 0)
	}
	one := c.mustClaimOwned(1, claimOpts(0, 100, 1), 1)
	if !c.settleOwned(one, failedAt(1, 5, "boom")) {
		c.fatalf("Settle(%s, failed at 1ms) of a live lease reported false", fmtID(one))
	}
	two := c.mustClaimOwned(2, claimOpts(0, 100, 1), 1)
	if !c.settleOwned(two, failedAt(1, 5, "boom")) {
		c.fatalf("Settle(%s, failed at 1ms) of a live lease reported false", fmtID(two))
	}
	if attempt, ok := c.claim(2, claimOpts(6, 100, 1)); ok {
		c.fatalf("Claim(2, now 6ms, max attempts 1) took update 2 as attempt %d; its one attempt is spent", attempt)
	}
	for _, id := range []int64{1, 2} {
		ok, err := c.admin.Requeue(c.ctx, id, at(10))
		c.failed("Requeue", err)
		if !ok {
			c.fatalf("Requeue(%d, now 10ms) of a failed or spent row reported false", id)
		}
		if row, found := c.get(id); found && row.ClaimID == "" {
			c.errorf("Get(%d) after Requeue shows an empty claim id; the row was claimed (last as %q), and an empty ClaimID means never claimed", id, []string{one.ClaimID, two.ClaimID}[id-1])
		}
	}
	rows, err := c.admin.List(c.ctx, intake.ListQuery{State: intake.StatePending, Limit: 10})
	c.failed("List(pending)", err)
	for _, r := range rows {
		if (r.UpdateID == 3) != (r.ClaimID == "") {
			c.errorf("List(pending) shows update %d with claim id %q; want one only for the requeued updates 1 and 2, none for update 3, never claimed", r.UpdateID, r.ClaimID)
		}
	}
}
