package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// The cases of this file pin down when an attempt is over: its lease is live
// through its end, a failed settlement ends it for good, and only an
// unacknowledged exhaustion can be acknowledged.

// liveLeaseOnLastAttempt: a claim of a row whose lease is live leaves it
// untouched, even when the row is on its last attempt. The spend ("attempts
// spent") applies only to a row that is claimable at all.
func liveLeaseOnLastAttempt(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 100, 1), 1)
	if attempt, ok := c.claim(1, claimOpts(50, 200, 1)); ok {
		c.errorf("a claim at 50ms took the live lease of the last attempt 1 (lease to 100ms) and got attempt %d", attempt)
	}
	if !c.renew(1, 1, 100, 60) {
		c.errorf("after a claim at 50ms with MaxAttempts 1, Renew by the holder of the live last attempt reported false: the claim spent a row it could not claim")
	}
	if !c.settle(1, 1, completed(70)) {
		c.errorf("after a claim at 50ms with MaxAttempts 1, Settle by the holder of the live last attempt reported false: the claim spent a row it could not claim")
	}
	if c.admin != nil {
		if row, ok := c.get(1); !ok || row.State != intake.StateCompleted || row.Error != "" {
			c.errorf("the row whose live last attempt completed is %s with error %q; want completed, no error", row.State, row.Error)
		}
	}
}

// liveLeaseOnLastAttemptOwned is liveLeaseOnLastAttempt through Claim,
// whose spent claims become exhaustions.
func liveLeaseOnLastAttemptOwned(c *checker) {
	c.mustAdd(1, 0)
	holder := c.mustClaimOwned(1, claimOpts(0, 100, 1), 1)
	if got, ok := c.claimOwned(1, claimOpts(50, 200, 1)); ok {
		c.errorf("Claim at 50ms took the live lease of the last attempt %s and got %s", fmtID(holder), fmtID(got))
	}
	o := claimOpts(55, 200, 1)
	if got, ok := c.claimOwned(1, o); ok {
		c.errorf("a durable Claim at 55ms took the live lease of the last attempt %s and got %s", fmtID(holder), fmtID(got))
	}
	if es := c.dueExhaustions(10, nil); len(es) != 0 {
		c.errorf("DueExhaustions listed %v after claims of a row under a live last attempt: the claim spent a row it could not claim", exhaustionIDs(es))
	}
	if !c.owns(holder, 60) {
		c.errorf("Owns(%s, at 60ms) = false after claims at 50ms with MaxAttempts 1: the claim spent a row it could not claim", fmtID(holder))
	}
	if !c.settleOwned(holder, completed(70)) {
		c.errorf("Settle(%s, completed at 70ms) of the live last attempt reported false", fmtID(holder))
	}
}

// failedAttemptIsOver: an attempt settled as failed (its retry scheduled)
// is over. Before its retry is due, and while its old lease end has not
// passed, it can no longer renew or settle, in any state.
func failedAttemptIsOver(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(1, 1, failedAt(10, 50, "boom")) {
		c.fatalf("Settle(1, attempt 1, failed at 10ms, retry at 50ms) of a live lease reported false")
	}
	for _, st := range []intake.Settlement{completed(20), failedAt(20, 60, "again"), abandoned(20, "give up")} {
		if c.settle(1, 1, st) {
			c.errorf("Settle(1, attempt 1, %s at 20ms) reported true after attempt 1 failed at 10ms", st.State)
		}
	}
	if c.renew(1, 1, 200, 20) {
		c.errorf("Renew(1, attempt 1, now 20ms) reported true after attempt 1 failed at 10ms")
	}
	if attempt, ok := c.claim(1, claimOpts(49, 200, defaultMax)); ok {
		c.errorf("a claim at 49ms took the failed row before its retry at 50ms (attempt %d): a refused settlement changed it", attempt)
	}
	c.mustClaim(1, claimOpts(50, 200, defaultMax), 2)
}

// failedAttemptIsOverOwned is failedAttemptIsOver for the identity calls,
// Exhaust included.
func failedAttemptIsOverOwned(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settleOwned(id, failedAt(10, 50, "boom")) {
		c.fatalf("Settle(%s, failed at 10ms, retry at 50ms) of a live lease reported false", fmtID(id))
	}
	for _, st := range []intake.Settlement{completed(20), failedAt(20, 60, "again"), abandoned(20, "give up")} {
		if c.settleOwned(id, st) {
			c.errorf("Settle(%s, %s at 20ms) reported true after the attempt failed at 10ms", fmtID(id), st.State)
		}
	}
	if c.renewOwned(id, 200, 20) {
		c.errorf("Renew(%s, now 20ms) reported true after the attempt failed at 10ms", fmtID(id))
	}
	if c.owns(id, 20) {
		c.errorf("Owns(%s, at 20ms) = true after the attempt failed at 10ms", fmtID(id))
	}
	if c.exhaust(id, 20, "late") {
		c.errorf("Exhaust(%s, at 20ms) reported true after the attempt failed at 10ms", fmtID(id))
	}
	if es := c.dueExhaustions(10, nil); len(es) != 0 {
		c.errorf("DueExhaustions listed %v after a failed attempt tried to exhaust", exhaustionIDs(es))
	}
	next := c.mustClaimOwned(1, claimOpts(50, 200, defaultMax), 2)
	if next.ClaimID == id.ClaimID {
		c.errorf("the retry reuses the failed attempt's claim id %q", id.ClaimID)
	}
}

// baseSettleAfterLease: the base settle refuses a lapsed lease, exactly as
// the owned one does (Fence/SettleAfterLeaseRefused).
func baseSettleAfterLease(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 10, defaultMax), 1)
	for _, st := range []intake.Settlement{completed(11), failedAt(11, 20, "late"), abandoned(11, "late")} {
		if c.settle(1, 1, st) {
			c.errorf("Settle(1, attempt 1, %s at 11ms) reported true after the lease lapsed at 10ms", st.State)
		}
	}
	if c.renew(1, 1, 100, 11) {
		c.errorf("Renew(1, attempt 1, now 11ms) reported true after the lease lapsed at 10ms")
	}
	c.mustClaim(1, claimOpts(11, 50, defaultMax), 2)
}

// ackOnlyUnacknowledged: AcknowledgeExhaustion accepts only an
// unacknowledged exhaustion. A pending, processing, failed, completed or
// settled abandoned row is refused, even with its exact identity.
func ackOnlyUnacknowledged(c *checker) {
	// Processing, with its live identity.
	c.mustAdd(1, 0)
	live := c.mustClaimOwned(1, claimOpts(0, 100, defaultMax), 1)
	if c.ack(live, 10) {
		c.errorf("AcknowledgeExhaustion(%s) of a processing row reported true", fmtID(live))
	}
	if !c.owns(live, 20) {
		c.errorf("Owns(%s, at 20ms) = false after a refused acknowledgement: it changed the processing row", fmtID(live))
	}
	// Failed, with the identity of the failed attempt.
	c.mustAdd(2, 0)
	failed := c.mustClaimOwned(2, claimOpts(0, 100, defaultMax), 1)
	if !c.settleOwned(failed, failedAt(10, 50, "boom")) {
		c.fatalf("Settle(%s, failed) reported false", fmtID(failed))
	}
	if c.ack(failed, 20) {
		c.errorf("AcknowledgeExhaustion(%s) of a failed row reported true", fmtID(failed))
	}
	if got := c.dueIDs(50, 0, 10); len(got) != 1 || got[0] != 2 {
		c.errorf("Due(now 50ms) listed %v; want [2]: the failed row must still retry at 50ms", got)
	}
	// Completed, and abandoned by a settlement (settled at once).
	c.mustAdd(3, 0)
	done := c.mustClaimOwned(3, claimOpts(0, 100, defaultMax), 1)
	if !c.settleOwned(done, completed(10)) {
		c.fatalf("Settle(%s, completed) reported false", fmtID(done))
	}
	c.mustAdd(4, 0)
	gone := c.mustClaimOwned(4, claimOpts(0, 100, defaultMax), 1)
	if !c.settleOwned(gone, abandoned(10, "no")) {
		c.fatalf("Settle(%s, abandoned) reported false", fmtID(gone))
	}
	for _, id := range []intake.Identity{done, gone} {
		if c.ack(id, 20) {
			c.errorf("AcknowledgeExhaustion(%s) of a settled row reported true", fmtID(id))
		}
	}
	// Pending again after a requeue, with the identity it had before.
	if c.admin != nil {
		c.mustAdd(5, 0)
		ex := c.mustClaimOwned(5, claimOpts(0, 100, defaultMax), 1)
		if !c.exhaust(ex, 10, "x") {
			c.fatalf("Exhaust(%s) reported false", fmtID(ex))
		}
		if ok, err := c.admin.Requeue(c.ctx, 5, at(20)); err != nil || !ok {
			c.fatalf("Requeue(5) of an unacknowledged exhaustion = %v, %v; want true", ok, err)
		}
		if c.ack(ex, 30) {
			c.errorf("AcknowledgeExhaustion(%s) of a row requeued to pending reported true", fmtID(ex))
		}
		if row, ok := c.get(5); !ok || row.State != intake.StatePending || !row.SettledAt.IsZero() {
			c.errorf("the requeued row after a refused acknowledgement is %s settled at %s; want pending, unsettled", row.State, offset(row.SettledAt))
		}
	}
	if n := c.prune(1000); n != 2 {
		c.errorf("Prune(before 1000ms) deleted %d rows; want 2 (the completed and the abandoned row): a refused acknowledgement made a row prunable", n)
	}
}
