package storetest

import (
	"bytes"
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
)

// More ClaimOnAdd cases of [intake.Store.AddBatch]: an update id repeated within
// one batch, and claimed adds of one update id racing each other.

const (
	// claimAddFirstID is the first update id of the concurrent claimed adds.
	claimAddFirstID = 4000
	// claimAddRounds is how many rounds of concurrent claimed adds run.
	claimAddRounds = barrierRounds / 2
)

func claimOnAddPromiseCases() []testCase {
	return []testCase{
		{name: "RepeatedInBatch", rule: "a batch that holds an update id twice records it once, as its first request asks, and the repeat neither claims nor changes it",
			run: claimedAddRepeated},
		{name: "ConcurrentClaimedAdds", rule: "of concurrent claimed adds of one update id exactly one records it, under the one identity it answers",
			run: concurrentClaimedAdds},
		{name: "ClaimedAddHasNoCrash", rule: claimedAddNoCrashRule, needs: capProcess, run: claimedAddHasNoCrash},
	}
}

// claimedAddRepeated: three update ids each appear twice in one batch: a
// pending request then a claimed one, a claim then a longer claim, a claim
// then a pending request. Each is recorded once, exactly as its first
// request asks (state, lease and body), and the repeat answers not added
// with no identity.
func claimedAddRepeated(c *checker) {
	again := func(r intake.AddRequest) intake.AddRequest {
		r.Body = fmt.Appendf(nil, `{"update_id":%d,"again":true}`, r.UpdateID)
		return r
	}
	res := c.addClaimed(
		addReq(1, 0, nil), again(addReq(1, 0, claimPtr(0, 50, defaultMax))),
		addReq(2, 0, claimPtr(0, 50, defaultMax)), again(addReq(2, 0, claimPtr(0, 80, defaultMax))),
		addReq(3, 0, claimPtr(0, 50, defaultMax)), again(addReq(3, 0, nil)),
	)
	const batch = "AddBatch([1 pending, 1 claimed, 2 claimed to 50ms, 2 claimed to 80ms, 3 claimed, 3 pending])"
	if r := res[0]; !r.Added || r.Claimed() {
		c.errorf("result 0 of %s = added %v, identity %s; want added with no identity (the first request of 1 asks for no claim)", batch, r.Added, fmtID(r.Identity))
	}
	for _, i := range []int{1, 3, 5} {
		if r := res[i]; r.Added || r.Identity != (intake.Identity{}) {
			c.errorf("result %d of %s = added %v, identity %s; want not added and no identity (a repeat within the batch)", i, batch, r.Added, fmtID(r.Identity))
		}
	}
	for _, id := range []int64{1, 2, 3} {
		if stored, ok := c.heldBody(id); !ok || !bytes.Equal(stored, body(id)) {
			c.errorf("update %d holds body %q (found %v) after %s; want %q, the first request's", id, stored, ok, batch, body(id))
		}
	}
	// Update 1 is pending: listed, and claimable with attempt 1.
	if ids := c.dueIDs(1, 1, 10); len(ids) != 1 || ids[0] != 1 {
		c.errorf("Due(now 1ms, pending before 1ms) after %s listed %v; want [1] (2 and 3 are claimed under live leases)", batch, ids)
	}
	if id, ok := c.claimOwned(1, claimOpts(10, 100, defaultMax)); !ok || id.Attempt != 1 {
		c.errorf("Claim(1, now 10ms) = %s, %v; want attempt 1 of update 1, recorded pending by its first request", fmtID(id), ok)
	}
	// Update 2 holds the first request's claim, to 50ms, not the repeat's.
	if two := res[2].Identity; c.checkClaimedResult(res[2], 2) {
		c.checkStoredClaim(two, 0, 50)
		if !c.owns(two, 50) {
			c.errorf("Owns(%s, at 50ms) = false; the first request of update 2 claimed it to 50ms", fmtID(two))
		}
		if c.owns(two, 51) {
			c.errorf("Owns(%s, at 51ms) = true; the first request of update 2 claimed it to 50ms, and the repeat's lease to 80ms must not apply", fmtID(two))
		}
		if id, ok := c.claimOwned(2, claimOpts(51, 100, defaultMax)); !ok || id.Attempt != 2 {
			c.errorf("Claim(2, now 51ms) = %s, %v; want attempt 2: the first request's lease ended at 50ms", fmtID(id), ok)
		}
	}
	// Update 3 is claimed by its first request; the pending repeat did not
	// undo the claim.
	if three := res[4].Identity; c.checkClaimedResult(res[4], 3) {
		c.checkStoredClaim(three, 0, 50)
		if _, ok := c.claimOwned(3, claimOpts(10, 100, defaultMax)); ok {
			c.errorf("Claim(3, now 10ms) took update 3 under the live claim of %s: the pending repeat undid the claim", fmtID(three))
		}
		if !c.settleOwned(three, completed(20)) {
			c.errorf("Settle(%s, completed at 20ms) = false; the first request's claim holds update 3", fmtID(three))
		}
	}
}

// concurrentClaimedAdds: in each round addRacers goroutines, released
// together, record the same fresh update id through AddBatch, each
// with its own body; in odd rounds every other racer asks for no claim.
// Exactly one reports it added, with an identity exactly when it asked for
// a claim; the row holds that racer's body and, when claimed, only its
// identity owns it.
func concurrentClaimedAdds(c *checker) {
	bad := 0
	for round := range claimAddRounds {
		id := int64(claimAddFirstID + round)
		bodies := make([][]byte, addRacers)
		results := make([]intake.AddResult, addRacers)
		claims := make([]bool, addRacers)
		fns := make([]func(), addRacers)
		for i := range addRacers {
			bodies[i] = fmt.Appendf(nil, `{"update_id":%d,"racer":%d}`, id, i)
			claims[i] = round%2 == 0 || i%2 == 0
			req := intake.AddRequest{Incoming: intake.Incoming{UpdateID: id, Body: bodies[i], ReceivedAt: at(0)}}
			if claims[i] {
				req.Claim = claimPtr(0, 100, defaultMax)
			}
			fns[i] = func() {
				res, err := c.store.AddBatch(c.ctx, []intake.AddRequest{req})
				if err != nil || len(res) != 1 {
					c.errorf("a concurrent AddBatch of update %d = %v, %v; want one result", id, res, err)
					return
				}
				results[i] = res[0]
			}
		}
		together(c, fns...)
		winner, added := -1, 0
		for i, r := range results {
			if r.Added {
				winner, added = i, added+1
			}
		}
		if added != 1 {
			bad++
			if bad <= 3 {
				c.errorf("round %d: %d of %d concurrent AddBatch calls of update %d reported it added; exactly one must", round, added, addRacers, id)
			}
			continue
		}
		for i, r := range results {
			if i != winner && r.Identity != (intake.Identity{}) {
				c.errorf("round %d: a concurrent AddBatch of update %d that did not add it answered identity %s; want none", round, id, fmtID(r.Identity))
			}
		}
		w := results[winner]
		if stored, ok := c.heldBody(id); !ok || !bytes.Equal(stored, bodies[winner]) {
			c.errorf("round %d: update %d holds body %q (found %v); want %q, the body of the one add that recorded it", round, id, stored, ok, bodies[winner])
		}
		if !claims[winner] {
			if w.Claimed() {
				c.errorf("round %d: the add of update %d that asked for no claim answered identity %s", round, id, fmtID(w.Identity))
			}
			c.mustClaim(id, claimOpts(10, 100, defaultMax), 1)
			continue
		}
		if !c.checkClaimedResult(w, id) {
			continue
		}
		if !c.owns(w.Identity, 50) {
			c.errorf("round %d: Owns(%s, at 50ms) = false for the one claimed add of update %d", round, fmtID(w.Identity), id)
		}
		if other, ok := c.claimOwned(id, claimOpts(50, 200, defaultMax)); ok {
			c.errorf("round %d: Claim(%d, now 50ms) took the row (%s) under the live claim of the one claimed add", round, id, fmtID(other))
		}
	}
	if bad > 3 {
		c.errorf("in %d of %d rounds concurrent AddBatch calls of one update id recorded it more than once (or never)", bad, claimAddRounds)
	}
}

// heldBody reads id's body through Get, or else through a Due late enough
// that every lease the cases grant has lapsed, so that a claimed row is
// listed too.
func (c *checker) heldBody(id int64) ([]byte, bool) {
	if c.admin != nil {
		row, ok := c.get(id)
		return row.Body, ok
	}
	for _, r := range c.due(1_000_000, 1_000_000, 10_000) {
		if r.UpdateID == id {
			return r.Body, true
		}
	}
	return nil, false
}
