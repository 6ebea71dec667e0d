package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

func fenceCases() []testCase {
	return []testCase{
		{name: "SettleAfterLeaseRefused", rule: "a fenced settlement after the lease lapsed is refused", run: settleAfterLease},
		{name: "RenewOwnedNeverShortens", rule: "a fenced renewal never shortens a live lease", run: renewOwnedNeverShortens},
		{name: "ExpiresAndNeverAdopts", rule: "an attempt fence expires and never adopts a later claim", run: fenceExpires},
		{name: "AllThreeFieldsCompared", rule: "a fenced method compares update id, attempt and claim id", run: allThreeFields},
		{name: "FreshClaimIDs", rule: "every successful fenced claim persists a fresh claim id", run: freshClaimIDs},
		{name: "OwnsOnlyWhileProcessing", rule: "only a processing row is owned", run: ownsOnlyProcessing},
		{name: "LiveLeaseUntouchedOnLastAttempt", rule: "a fenced claim leaves a row under a live lease untouched, even on its last attempt", run: liveLeaseOnLastAttemptOwned},
		{name: "FailedAttemptIsOver", rule: "an attempt that failed can no longer renew, settle, own or exhaust", run: failedAttemptIsOverOwned},
		{name: "SettleRacingReclaim", rule: "a fenced settlement or exhaustion racing a reclaim of its lapsed lease: never both succeed", run: settleOwnedRacingReclaim},
		{name: "RenewRacingReclaim", rule: "a fenced renewal racing a reclaim of its lapsed lease: never both succeed", run: renewRacingReclaim},
	}
}

// settleAfterLease: the fenced control of rule 3. A holder whose lease
// lapsed can no longer settle, and the row is claimable again.
func settleAfterLease(c *checker) {
	c.mustAdd(1, 0)
	first := c.mustClaimOwned(1, claimOpts(0, 10, defaultMax), 1)
	if c.settleOwned(first, completed(11)) {
		c.errorf("Settle(%s, completed at 11ms) reported true after the lease lapsed at 10ms", fmtID(first))
	}
	if c.renewOwned(first, 100, 11) {
		c.errorf("Renew(%s, now 11ms) reported true after the lease lapsed at 10ms", fmtID(first))
	}
	if c.owns(first, 11) {
		c.errorf("Owns(%s, at 11ms) = true after the lease lapsed at 10ms", fmtID(first))
	}
	c.mustClaimOwned(1, claimOpts(11, 50, defaultMax), 2)
}

// renewOwnedNeverShortens: the fenced half of rule 8.
func renewOwnedNeverShortens(c *checker) {
	c.mustAdd(1, 0)
	id := c.mustClaimOwned(1, claimOpts(0, 10, defaultMax), 1)
	if !c.renewOwned(id, 40, 3) {
		c.errorf("Renew(to 40ms, now 3ms) of a live lease to 10ms reported false")
	}
	if !c.renewOwned(id, 35, 4) {
		c.errorf("Renew(to 35ms, now 4ms) of a live lease to 40ms reported false; a late renewal is accepted, without shortening")
	}
	if !c.owns(id, 39) || !c.owns(id, 40) {
		c.errorf("Owns at 39ms or 40ms = false: the renewal to 35ms shortened the lease to 40ms")
	}
	if c.owns(id, 41) {
		c.errorf("Owns(at 41ms) = true; the lease ended at 40ms")
	}
	if c.renewOwned(id, 100, 41) {
		c.errorf("Renew(now 41ms) reported true after the lease lapsed at 40ms: renewal revived an expired lease")
	}
}

// fenceExpires: rule 9, its positive and stale-identity controls, through a
// prune and a re-add of the same update id.
func fenceExpires(c *checker) {
	const id = 10
	c.mustAdd(id, 0)
	first := c.mustClaimOwned(id, claimOpts(0, 10, defaultMax), 1)
	if !c.owns(first, 10) {
		c.errorf("Owns(first, at 10ms) = false; the lease to 10ms is live through its end")
	}
	if c.owns(wrongClaim(first), 5) {
		c.errorf("Owns with a wrong claim id (right update and attempt) = true")
	}
	if c.renewOwned(wrongClaim(first), 20, 5) {
		c.errorf("Renew with a wrong claim id (right update and attempt) reported true")
	}
	if c.owns(first, 11) {
		c.errorf("Owns(first, at 11ms) = true; the lease ended at 10ms")
	}
	if c.renewOwned(first, 50, 11) {
		c.errorf("Renew(first, to 50ms, now 11ms) reported true: renewal revived an expired lease")
	}
	second := c.mustClaimOwned(id, claimOpts(11, 30, defaultMax), 2)
	if second.ClaimID == first.ClaimID {
		c.errorf("the reclaim reused the claim id %q of the first claim", first.ClaimID)
	}
	if c.owns(first, 12) {
		c.errorf("Owns(first, at 12ms) = true after the second claim took the row")
	}
	if !c.owns(second, 12) {
		c.errorf("Owns(second, at 12ms) = false for the holder of a lease to 30ms")
	}
	if !c.settleOwned(second, completed(12)) {
		c.fatalf("Settle(second, completed at 12ms) reported false for the holder")
	}
	if n := c.prune(13); n != 1 {
		c.errorf("Prune(before 13ms) deleted %d rows; want 1, the row completed at 12ms", n)
	}
	if !c.add(id, 13) {
		c.fatalf("Add(%d) after its row was pruned reported false", id)
	}
	recycled := c.mustClaimOwned(id, claimOpts(13, 100, defaultMax), first.Attempt)
	if recycled.ClaimID == first.ClaimID || recycled.ClaimID == second.ClaimID {
		c.errorf("the claim of the re-added row reused an earlier claim id %q", recycled.ClaimID)
	}
	if c.renewOwned(wrongClaim(recycled), 200, 14) {
		c.errorf("Renew with a wrong claim id reported true on the recycled row")
	}
	if c.settleOwned(wrongClaim(recycled), completed(14)) {
		c.errorf("Settle with a wrong claim id reported true on the recycled row")
	}
	if c.owns(first, 14) {
		c.errorf("the pruned identity %s owns the recycled row %s", fmtID(first), fmtID(recycled))
	}
	if c.renewOwned(first, 200, 14) {
		c.errorf("the pruned identity %s renewed the recycled row", fmtID(first))
	}
	if c.settleOwned(first, completed(14)) {
		c.errorf("the pruned identity %s settled the recycled row", fmtID(first))
	}
	if !c.owns(recycled, 15) {
		c.errorf("Owns(recycled, at 15ms) = false after the stale calls; they must have changed nothing")
	}
}

// allThreeFields: an identity that matches the row in all but one field is
// refused by every fenced method.
func allThreeFields(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	first := c.mustClaimOwned(1, claimOpts(0, 10, defaultMax), 1)
	second := c.mustClaimOwned(1, claimOpts(11, 100, defaultMax), 2)
	other := c.mustClaimOwned(2, claimOpts(11, 100, defaultMax), 1)
	mixed := []struct {
		what string
		id   intake.Identity
	}{
		{"the stale first identity", first},
		{"the current attempt with the first claim id", intake.Identity{UpdateID: 1, Attempt: second.Attempt, ClaimID: first.ClaimID}},
		{"the first attempt with the current claim id", intake.Identity{UpdateID: 1, Attempt: first.Attempt, ClaimID: second.ClaimID}},
		{"the current identity with a wrong claim id", wrongClaim(second)},
		{"the current identity with an empty claim id", intake.Identity{UpdateID: 1, Attempt: second.Attempt}},
		{"update 1's claim id on update 2", intake.Identity{UpdateID: 2, Attempt: other.Attempt, ClaimID: second.ClaimID}},
		{"update 2's claim id with attempt 2", intake.Identity{UpdateID: 2, Attempt: 2, ClaimID: other.ClaimID}},
		{"the current identity on a missing update (99)", intake.Identity{UpdateID: 99, Attempt: second.Attempt, ClaimID: second.ClaimID}},
	}
	for _, m := range mixed {
		what, id := m.what, m.id
		if c.owns(id, 20) {
			c.errorf("Owns accepted %s %s", what, fmtID(id))
		}
		if c.renewOwned(id, 200, 20) {
			c.errorf("Renew accepted %s %s", what, fmtID(id))
		}
		if c.settleOwned(id, completed(20)) {
			c.errorf("Settle accepted %s %s", what, fmtID(id))
		}
	}
	for _, id := range []intake.Identity{second, other} {
		if !c.owns(id, 20) {
			c.errorf("Owns(%s, at 20ms) = false for the holder after the refused calls", fmtID(id))
		}
		if !c.settleOwned(id, completed(21)) {
			c.errorf("Settle(%s, completed at 21ms) reported false for the holder", fmtID(id))
		}
	}
}

// freshClaimIDs: claim ids are never empty and never repeat, across
// attempts and rows, and the identity names the claimed row.
func freshClaimIDs(c *checker) {
	seen := map[string]string{}
	note := func(id intake.Identity) {
		if prev, dup := seen[id.ClaimID]; dup {
			c.errorf("claim id %q of %s repeats the claim id of %s", id.ClaimID, fmtID(id), prev)
		}
		seen[id.ClaimID] = fmtID(id)
	}
	for _, u := range []int64{1, 2, 3} {
		c.mustAdd(u, 0)
	}
	for attempt := 1; attempt <= 3; attempt++ {
		now := int64(attempt-1) * 20
		for _, u := range []int64{1, 2, 3} {
			note(c.mustClaimOwned(u, claimOpts(now, now+10, 5), attempt))
		}
	}
}

// ownsOnlyProcessing: pending, failed, completed and abandoned rows are not
// owned, not even by the identity that last held them.
func ownsOnlyProcessing(c *checker) {
	c.mustAdd(1, 0)
	if c.owns(intake.Identity{UpdateID: 1}, 0) {
		c.errorf("Owns({update 1, attempt 0, no claim id}) = true for a pending row")
	}
	id := c.mustClaimOwned(1, claimOpts(0, 100, 5), 1)
	if !c.settleOwned(id, failedAt(1, 50, "x")) {
		c.fatalf("Settle(%s, failed at 1ms) reported false for the holder", fmtID(id))
	}
	if c.owns(id, 2) {
		c.errorf("Owns(%s, at 2ms) = true after it settled failed (its lease ran to 100ms)", fmtID(id))
	}
	if c.renewOwned(id, 200, 2) {
		c.errorf("Renew(%s) reported true after it settled failed", fmtID(id))
	}
	id = c.mustClaimOwned(1, claimOpts(50, 100, 5), 2)
	if !c.settleOwned(id, completed(51)) {
		c.fatalf("Settle(%s, completed at 51ms) reported false for the holder", fmtID(id))
	}
	if c.owns(id, 52) {
		c.errorf("Owns(%s, at 52ms) = true after it completed", fmtID(id))
	}
	if c.settleOwned(id, abandoned(53, "again")) {
		c.errorf("a second Settle(%s) reported true after it completed", fmtID(id))
	}
}
