package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// The ClaimOnAdd cases: a row [intake.Store.AddBatch] records claimed must
// be exactly a claimed row, under exactly the identity the store answered;
// through [intake.ProcessStore.AddBatchAs] it is owned by its process too.

func claimOnAddCases() []testCase {
	return []testCase{
		{name: "ClaimedAddIsAClaim", rule: "a claimed add persists exactly a claim's state and identity", run: claimedAddIsAClaim},
		{name: "DuplicateNeitherAddedNorClaimed", rule: "a claimed add of a stored or repeated update id neither records nor claims it", run: claimedAddDuplicate},
		{name: "LapsedLeaseReclaimed", rule: "a claimed-on-add row whose lease lapsed is reclaimed with attempt 2 and a new claim id", run: claimedAddLapses},
		{name: "MixedBatch", rule: "claimed and unclaimed adds in one batch each get their own state", run: claimedAddMixed},
		{name: "FreshClaimIDAfterPrune", rule: "a claimed add of an update id pruned and recorded again gets a claim id never used before, and the old identity is fenced", run: claimedAddFreshAfterPrune},
		{name: "LargeBatches", rule: "every request of a large claimed batch is recorded and claimed under the identity answered for it", run: claimedAddLarge},
		{name: "InvalidClaimRefused", rule: "a claimed add with an invalid claim is refused with intake.ErrInvalidArgument and records nothing", run: claimedAddInvalid},
		{name: "ReceiptKept", rule: claimedAddReceiptRule, run: claimedAddKeepsReceipt},
		{name: "OwnerLapseTakesOver", rule: "a claimed AddBatchAs records its process: when the owner's heartbeat lapses the row is taken over before its lease ends, as a crash", needs: capProcess, run: claimedAddOwnerLapses},
	}
}

// addReq is a request to record id with its standard body at receivedMS,
// claimed under o when o is set.
func addReq(id, receivedMS int64, o *intake.ClaimOpts) intake.AddRequest {
	return intake.AddRequest{Incoming: intake.Incoming{UpdateID: id, Body: body(id), ReceivedAt: at(receivedMS)}, Claim: o}
}

func claimPtr(nowMS, leaseMS int64, max int) *intake.ClaimOpts {
	o := claimOpts(nowMS, leaseMS, max)
	return &o
}

// addClaimed calls AddBatch and ends the case on an error or a
// result count that does not match.
func (c *checker) addClaimed(reqs ...intake.AddRequest) []intake.AddResult {
	ids := make([]int64, len(reqs))
	for i, r := range reqs {
		ids[i] = r.UpdateID
	}
	call := fmt.Sprintf("AddBatch(%v)", ids)
	res, err := c.store.AddBatch(c.ctx, reqs)
	c.failed(call, err)
	if len(res) != len(reqs) {
		c.fatalf("%s answered %d results for %d requests", call, len(res), len(reqs))
	}
	return res
}

// checkClaimedResult reports unless res is a claim of update id at attempt
// 1 with a claim id.
func (c *checker) checkClaimedResult(res intake.AddResult, id int64) bool {
	if !res.Added || !res.Claimed() || res.Identity.UpdateID != id || res.Identity.Attempt != 1 {
		c.errorf("the claimed add of new update %d answered added %v, identity %s; want added, attempt 1 of update %d with a claim id",
			id, res.Added, fmtID(res.Identity), id)
		return false
	}
	return true
}

// checkStoredClaim checks, when the store is an AdminStore, that the row of
// id holds exactly the claim ident with lease end leaseMS, received at
// receivedMS.
func (c *checker) checkStoredClaim(ident intake.Identity, receivedMS, leaseMS int64) {
	if c.admin == nil {
		return
	}
	row, ok := c.get(ident.UpdateID)
	switch {
	case !ok:
		c.errorf("Get(%d) found no row after its claimed add", ident.UpdateID)
	case row.State != intake.StateProcessing || row.Attempts != 1 || row.ClaimID != ident.ClaimID ||
		!row.DueAt.Equal(at(leaseMS)) || !row.ReceivedAt.Equal(at(receivedMS)) || !row.SettledAt.IsZero() || row.Error != "":
		c.errorf("Get(%d) after its claimed add = state %s, attempts %d, claim %q, due %s, received %s, settled %s, error %q; "+
			"want processing, 1, %q, due %s (the lease end), received %s, not settled, no error",
			ident.UpdateID, row.State, row.Attempts, row.ClaimID, offset(row.DueAt), offset(row.ReceivedAt), offset(row.SettledAt), row.Error,
			ident.ClaimID, offset(at(leaseMS)), offset(at(receivedMS)))
	case !bytes.Equal(row.Body, body(ident.UpdateID)):
		c.errorf("Get(%d) after its claimed add has body %q; want %q", ident.UpdateID, row.Body, body(ident.UpdateID))
	}
}

// claimedAddIsAClaim: the identity answered is the one persisted; it owns,
// renews and settles, and every other identity is refused; the row is not
// claimable or due while its lease is live.
func claimedAddIsAClaim(c *checker) {
	res := c.addClaimed(addReq(1, 10, claimPtr(10, 30, defaultMax)), addReq(2, 10, claimPtr(10, 30, defaultMax)))
	if !c.checkClaimedResult(res[0], 1) || !c.checkClaimedResult(res[1], 2) {
		return
	}
	id := res[0].Identity
	if res[1].Identity.ClaimID == id.ClaimID {
		c.errorf("two claimed adds got the same claim id %q; every claim id is fresh", id.ClaimID)
	}
	c.checkStoredClaim(id, 10, 30)
	if !c.owns(id, 20) || !c.owns(id, 30) {
		c.errorf("Owns(%s) at 20ms or 30ms = false; the claimed add's lease is live through 30ms", fmtID(id))
	}
	if c.owns(id, 31) {
		c.errorf("Owns(%s, at 31ms) = true; the claimed add's lease ended at 30ms", fmtID(id))
	}
	wrongAttempt := id
	wrongAttempt.Attempt = 2
	for _, bad := range []intake.Identity{wrongClaim(id), wrongAttempt, res[1].Identity} {
		if bad.UpdateID != id.UpdateID {
			bad.UpdateID = id.UpdateID // update 2's claim id on update 1
		}
		if c.owns(bad, 20) {
			c.errorf("Owns(%s, at 20ms) = true for a claimed add persisted as %s", fmtID(bad), fmtID(id))
		}
		if c.renewOwned(bad, 100, 20) {
			c.errorf("Renew(%s, now 20ms) = true for a claimed add persisted as %s", fmtID(bad), fmtID(id))
		}
		if c.settleOwned(bad, completed(20)) {
			c.errorf("Settle(%s, completed at 20ms) = true for a claimed add persisted as %s", fmtID(bad), fmtID(id))
		}
	}
	if _, ok := c.claimOwned(1, claimOpts(20, 100, defaultMax)); ok {
		c.errorf("Claim(1, now 20ms) took a claimed add under its live lease (to 30ms)")
	}
	if ids := c.dueIDs(25, 1000, 10); len(ids) != 0 {
		c.errorf("Due(now 25ms, pending before 1000ms) listed %v; claimed adds under live leases are not due", ids)
	}
	if !c.renewOwned(id, 60, 25) {
		c.errorf("Renew(%s, to 60ms, now 25ms) = false; want the claimed add's live lease renewed", fmtID(id))
	}
	if !c.owns(id, 60) {
		c.errorf("Owns(%s, at 60ms) = false after the renewal to 60ms", fmtID(id))
	}
	if !c.settleOwned(id, completed(50)) {
		c.errorf("Settle(%s, completed at 50ms) = false; want the claimed add settled by its identity", fmtID(id))
	}
	if c.owns(id, 50) {
		c.errorf("Owns(%s, at 50ms) = true after its completion", fmtID(id))
	}
	two := res[1].Identity
	if !c.settleOwned(two, failedAt(20, 40, "boom")) {
		c.errorf("Settle(%s, failed at 20ms) = false; want the claimed add's failure recorded", fmtID(two))
	}
	c.mustClaimOwned(2, claimOpts(40, 80, defaultMax), 2)
}

// claimedAddDuplicate: a stored row (pending, or claimed by someone else)
// and a repeat within the batch are neither recorded again nor claimed.
func claimedAddDuplicate(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	held := c.mustClaimOwned(2, claimOpts(0, 100, defaultMax), 1)
	res := c.addClaimed(
		intake.AddRequest{Incoming: intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1,"again":true}`), ReceivedAt: at(5)}, Claim: claimPtr(5, 50, defaultMax)},
		addReq(2, 5, claimPtr(5, 50, defaultMax)),
		addReq(3, 5, claimPtr(5, 50, defaultMax)),
		intake.AddRequest{Incoming: intake.Incoming{UpdateID: 3, Body: []byte(`{"update_id":3,"again":true}`), ReceivedAt: at(5)}, Claim: claimPtr(5, 50, defaultMax)},
	)
	for i, want := range []int64{1, 2, 0, 3} {
		r := res[i]
		if want == 0 {
			c.checkClaimedResult(r, 3)
			continue
		}
		if r.Added || r.Claimed() || r.Identity != (intake.Identity{}) {
			c.errorf("result %d of AddBatch([1 2 3 3]) with 1 pending and 2 claimed = added %v, identity %s; want not added and no identity (a duplicate)",
				i, r.Added, fmtID(r.Identity))
		}
	}
	// Update 1 is still a pending row with zero attempts and its first body.
	if rows := c.due(6, 6, 10); !slices.Equal(storedIDs(rows), []int64{1}) {
		c.errorf("Due(now 6ms) after the duplicate claimed adds listed %v; want [1] (still pending; 2 and 3 are claimed)", storedIDs(rows))
	} else if !bytes.Equal(rows[0].Body, body(1)) {
		c.errorf("update 1's body became %q after a duplicate claimed add; want %q", rows[0].Body, body(1))
	}
	c.mustClaimOwned(1, claimOpts(6, 50, defaultMax), 1)
	// The holder of update 2 still owns it, under its own lease.
	if !c.owns(held, 60) {
		c.errorf("Owns(%s, at 60ms) = false after a duplicate claimed add of update 2: the duplicate took over its claim", fmtID(held))
	}
	if !c.settleOwned(held, completed(60)) {
		c.errorf("Settle(%s, completed at 60ms) = false after a duplicate claimed add of update 2", fmtID(held))
	}
	if c.admin != nil {
		if row, ok := c.get(3); ok && !bytes.Equal(row.Body, body(3)) {
			c.errorf("update 3 has body %q; the first of the repeated requests wins, want %q", row.Body, body(3))
		}
	}
}

// claimedAddLapses: a claimed add whose process died is reclaimed like any
// claimed row once its lease lapsed, and its old identity is fenced out.
func claimedAddLapses(c *checker) {
	res := c.addClaimed(addReq(1, 0, claimPtr(0, 20, defaultMax)))
	if !c.checkClaimedResult(res[0], 1) {
		return
	}
	first := res[0].Identity
	if ids := c.dueIDs(20, 0, 10); len(ids) != 0 {
		c.errorf("Due(now 20ms) listed %v; the claimed add's lease is live through 20ms", ids)
	}
	rows := c.due(21, 0, 10)
	if !slices.Equal(storedIDs(rows), []int64{1}) {
		c.fatalf("Due(now 21ms) listed %v; want [1]: the claimed add's lease lapsed at 20ms", storedIDs(rows))
	}
	if !bytes.Equal(rows[0].Body, body(1)) {
		c.errorf("Due listed the lapsed claimed add with body %q; want %q", rows[0].Body, body(1))
	}
	second := c.mustClaimOwned(1, claimOpts(21, 60, defaultMax), 2)
	if second.ClaimID == first.ClaimID {
		c.errorf("the reclaim of a claimed add kept its claim id %q; want a new one", first.ClaimID)
	}
	if c.owns(first, 21) || c.renewOwned(first, 100, 21) || c.settleOwned(first, completed(21)) {
		c.errorf("the claimed add's identity %s still owns, renews or settles after its reclaim as %s", fmtID(first), fmtID(second))
	}
	if !c.settleOwned(second, completed(30)) {
		c.errorf("Settle(%s, completed at 30ms) = false; want the reclaim settled", fmtID(second))
	}
	// At the ceiling, a lapsed claimed add is spent, not taken.
	res = c.addClaimed(addReq(2, 0, claimPtr(0, 20, 1)))
	if !c.checkClaimedResult(res[0], 2) {
		return
	}
	if id, ok := c.claimOwned(2, claimOpts(21, 60, 1)); ok {
		c.errorf("Claim(2, now 21ms, MaxAttempts 1) took the lapsed claimed add (%s); its one attempt is spent", fmtID(id))
	}
}

// claimedAddMixed: in one batch, unclaimed requests become pending rows and
// claimed ones processing rows, each under its own identity.
func claimedAddMixed(c *checker) {
	res := c.addClaimed(
		addReq(10, 5, nil),
		addReq(11, 5, claimPtr(5, 40, defaultMax)),
		addReq(12, 5, nil),
		addReq(13, 5, claimPtr(5, 50, defaultMax)),
	)
	for i, id := range []int64{10, 12} {
		r := res[2*i]
		if !r.Added || r.Claimed() || r.Identity != (intake.Identity{}) {
			c.errorf("the unclaimed add of new update %d in a mixed batch answered added %v, identity %s; want added with no identity", id, r.Added, fmtID(r.Identity))
		}
	}
	if !c.checkClaimedResult(res[1], 11) || !c.checkClaimedResult(res[3], 13) {
		return
	}
	if res[1].Identity.ClaimID == res[3].Identity.ClaimID {
		c.errorf("two claimed adds of one batch got the same claim id %q", res[1].Identity.ClaimID)
	}
	c.checkStoredClaim(res[1].Identity, 5, 40)
	c.checkStoredClaim(res[3].Identity, 5, 50)
	if ids := c.dueIDs(10, 10, 10); !slices.Equal(ids, []int64{10, 12}) {
		c.errorf("Due(now 10ms, pending before 10ms) after a mixed batch listed %v; want [10 12] (11 and 13 are claimed)", ids)
	}
	if ids := c.dueIDs(45, 0, 10); !slices.Equal(ids, []int64{11}) {
		c.errorf("Due(now 45ms, pending before 0ms) listed %v; want [11], whose lease ended at 40ms", ids)
	}
	c.mustClaimOwned(10, claimOpts(10, 60, defaultMax), 1)
	if !c.owns(res[3].Identity, 50) || !c.settleOwned(res[3].Identity, completed(50)) {
		c.errorf("the claimed add %s of a mixed batch does not own or settle at 50ms", fmtID(res[3].Identity))
	}
	c.mustClaimOwned(11, claimOpts(45, 90, defaultMax), 2)
}

// claimedAddInvalid: a claim with MaxAttempts 0 is refused and the batch,
// its valid requests included, records nothing, wherever the invalid claim
// stands in the batch.
func claimedAddInvalid(c *checker) {
	for _, reqs := range [][]intake.AddRequest{
		{addReq(1, 0, nil), addReq(2, 0, claimPtr(0, 20, 0))},
		{addReq(1, 0, claimPtr(0, 20, defaultMax)), addReq(2, 0, claimPtr(0, 20, 0))},
	} {
		_, err := c.store.AddBatch(c.ctx, reqs)
		if !errors.Is(err, intake.ErrInvalidArgument) {
			c.errorf("AddBatch with a claim of MaxAttempts 0 (request 2, request 1 claimed: %v) returned %v; want an error wrapping intake.ErrInvalidArgument", reqs[0].Claim != nil, err)
		}
		// At 100ms a row recorded claimed, its lease ended at 20ms, is due too.
		if ids := c.dueIDs(100, 100, 10); len(ids) != 0 {
			c.errorf("Due after a refused AddBatch listed %v; want nothing recorded", ids)
		}
	}
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
}

// addClaimedByLapsing registers process "a" (heartbeat to 100ms) and "b"
// (to 100000ms), and records update 1 claimed by "a" (AddBatchAs, lease to
// 10000ms, one attempt). It reports whether the add answered as a claimed
// add must, with its result.
func (c *checker) addClaimedByLapsing() (intake.AddResult, bool) {
	c.mustRegister("a", 100)
	c.mustRegister("b", 100_000)
	res, err := c.process.AddBatchAs(c.ctx, []intake.AddRequest{addReq(1, 0, claimPtr(0, 10_000, 1))}, intake.ProcessClaim{Process: "a"})
	c.failed(`AddBatchAs([1], process "a")`, err)
	if len(res) != 1 {
		c.fatalf(`AddBatchAs([1], process "a") answered %d results for 1 request`, len(res))
	}
	return res[0], c.checkClaimedResult(res[0], 1)
}

// claimedAddOwnerLapses: a claimed add is a claim by its owner too. Once
// the owner's heartbeat lapses the row is due and taken over before its
// lease ends, the takeover counts a crash (not an attempt), and the first
// identity is fenced.
func claimedAddOwnerLapses(c *checker) {
	res, ok := c.addClaimedByLapsing()
	if !ok {
		return
	}
	first := res.Identity
	if _, ok := c.claimAs(1, owned(100, 20_000, 1, "b")); ok {
		c.errorf("ClaimAs(1, now 100ms) took a claimed add while its owner lives to 100ms and its lease to 10000ms")
	}
	if ids := c.dueIDs(101, 101, 10); len(ids) != 1 || ids[0] != 1 {
		c.errorf("Due(now 101ms) = %v after the claimed add's owner lapsed at 100ms; want [1]", ids)
	}
	// MaxAttempts 1 with a crash budget: only a takeover that counts a crash
	// (not an attempt) can take the row.
	second := c.mustClaimAs(1, withCrashes(owned(101, 20_000, 1, "b"), 3), 2)
	if c.owns(first, 102) || c.settleOwned(first, completed(102)) {
		c.errorf("the claimed add's identity %s still owns or settles after the takeover", fmtID(first))
	}
	if !c.settleOwned(second, completed(103)) {
		c.errorf("Settle(%s) = false; the takeover holds the row", fmtID(second))
	}
}

// claimedAddFreshAfterPrune: update 1 is recorded claimed, completed and
// pruned, then recorded claimed again: the new claim id is fresh, and the
// first identity, attempt 1 like the new one, neither owns, renews nor
// settles the new row.
func claimedAddFreshAfterPrune(c *checker) {
	res := c.addClaimed(addReq(1, 0, claimPtr(0, 20, defaultMax)))
	if !c.checkClaimedResult(res[0], 1) {
		return
	}
	old := res[0].Identity
	if !c.settleOwned(old, completed(5)) {
		c.fatalf("Settle(%s, completed at 5ms) of a claimed add reported false", fmtID(old))
	}
	if n := c.prune(10); n != 1 {
		c.fatalf("Prune(before 10ms) removed %d rows; want the completed row 1", n)
	}
	res = c.addClaimed(addReq(1, 30, claimPtr(30, 100, defaultMax)))
	if !c.checkClaimedResult(res[0], 1) {
		return
	}
	if res[0].Identity.ClaimID == old.ClaimID {
		c.errorf("the claimed add of update 1 after its prune reused claim id %q", old.ClaimID)
	}
	c.expectPrunedFenced(old, 40)
	if !c.settleOwned(res[0].Identity, completed(42)) {
		c.errorf("Settle(%s, completed at 42ms) of the new claimed add reported false", fmtID(res[0].Identity))
	}
}

// claimedAddLarge: batches of 100, 150 and 250 claimed requests, sizes
// around the chunks a store may split a batch into; each answered identity
// owns its own row.
func claimedAddLarge(c *checker) {
	next := int64(1000)
	for _, n := range []int{100, 150, 250} {
		reqs := make([]intake.AddRequest, n)
		for i := range reqs {
			reqs[i] = addReq(next+int64(i), 0, claimPtr(0, 100, defaultMax))
		}
		res := c.addClaimed(reqs...)
		seen := map[string]bool{}
		for i, r := range res {
			if !c.checkClaimedResult(r, reqs[i].UpdateID) {
				return
			}
			if seen[r.Identity.ClaimID] {
				c.errorf("the claimed adds of a batch of %d share claim id %q", n, r.Identity.ClaimID)
			}
			seen[r.Identity.ClaimID] = true
			if !c.owns(r.Identity, 50) {
				c.errorf("request %d of a claimed batch of %d answered %s, which does not own its row at 50ms", i+1, n, fmtID(r.Identity))
				return
			}
		}
		next += int64(n)
	}
}
