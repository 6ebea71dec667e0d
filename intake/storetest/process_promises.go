package storetest

import (
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// More cases of [intake.ProcessStore]: a takeover whose lease lapsed too is
// still a crash, a requeue starts the crash count afresh, and Due judges
// owners at its Now. And the
// reclaim races: concurrent claims of a processing row whose lease or
// owner lapsed.

const (
	// reclaimFirstID is the first update id of the reclaim races.
	reclaimFirstID = 6000
	// reclaimRounds is how many rounds each reclaim race runs.
	reclaimRounds = raceRounds / 2
)

func processPromiseCases() []testCase {
	return []testCase{
		{name: "LapsedLeaseTakeoverIsCrash", rule: "a takeover from a lapsed or reaped owner counts a crash, also when the lease has lapsed too",
			needs: capProcess, run: lapsedLeaseTakeoverIsCrash},
		{name: "RequeueResetsCrashes", rule: "a requeue starts the row afresh: no attempts and no crashes, so a row spent by crashes gets its whole crash budget again",
			needs: capProcess | capAdmin, run: requeueResetsCrashes},
		{name: "DueJudgesOwnersAtNow", rule: "Due lists a row whose owner lapsed by the owner's heartbeat at q.Now, whatever q.PendingBefore",
			needs: capProcess, run: dueJudgesOwnersAtNow},
		{name: "CrashesKept", rule: crashesKeptRule, needs: capProcess, run: crashesKept},
		{name: "CrashBudgetOfOne", rule: crashBudgetOfOneRule, needs: capProcess, run: crashBudgetOfOne},
	}
}

func reclaimRaceCases() []testCase {
	return []testCase{
		{name: "ReclaimLapsedLease", rule: "of concurrent claims of a processing row whose lease lapsed exactly one takes it",
			run: raceReclaimLease},
		{name: "ReclaimLapsedOwner", rule: "of concurrent claims of a processing row whose owner's heartbeat lapsed exactly one takes it",
			needs: capProcess, run: raceReclaimOwner},
	}
}

// lapsedLeaseTakeoverIsCrash: with MaxAttempts 1 and a crash budget, a
// takeover succeeds only if it counts a crash rather than an attempt. Row 1
// is taken over after both its owner's heartbeat (50ms) and its lease
// (100ms) lapsed; row 2 after its owner was reaped, its lease still live.
func lapsedLeaseTakeoverIsCrash(c *checker) {
	c.mustRegister("a", 50)
	c.mustRegister("b", 1_000_000)
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	c.mustClaimAs(1, withCrashes(owned(0, 100, 1, "a"), 3), 1)
	c.mustClaimAs(2, withCrashes(owned(0, 1000, 1, "a"), 3), 1)
	ident, ok := c.claimAs(1, withCrashes(owned(200, 1000, 1, "b"), 3))
	if !ok || ident.Attempt != 2 {
		c.errorf(`ClaimAs(1, now 200ms, process "b", MaxAttempts 1, MaxCrashes 3) = %s, %v after its owner lapsed at 50ms and its lease at 100ms; "+
			"want attempt 2: the attempt ended with its process, a crash, however long ago its lease ended too`, fmtID(ident), ok)
	}
	if n := c.reap(250); n != 1 {
		c.errorf("Reap(now 250ms) removed %d heartbeats; want 1 (a, lapsed at 50ms)", n)
	}
	ident2, ok := c.claimAs(2, withCrashes(owned(300, 2000, 1, "b"), 3))
	if !ok || ident2.Attempt != 2 {
		c.errorf(`ClaimAs(2, now 300ms, process "b", MaxAttempts 1, MaxCrashes 3) = %s, %v after its owner was reaped, its lease live to 1000ms; want attempt 2: a crash`, fmtID(ident2), ok)
	}
	if c.admin != nil {
		for _, id := range []int64{1, 2} {
			if row, _ := c.get(id); row.Crashes != 1 || row.Attempts != 2 {
				c.errorf("update %d has %d attempts and %d crashes after one takeover from a lapsed owner; want 2 and 1", id, row.Attempts, row.Crashes)
			}
		}
	}
}

// requeueResetsCrashes: a row spent by its crash budget (MaxCrashes 2) is
// requeued; its crash count starts at zero again, so one more crash does
// not spend it.
func requeueResetsCrashes(c *checker) {
	const maxCrashes = 2
	c.mustAdd(1, 0)
	c.mustRegister("p1", 50)
	c.mustClaimAs(1, withCrashes(owned(0, 100_000, 5, "p1"), maxCrashes), 1)
	c.mustRegister("p2", 150)
	c.mustClaimAs(1, withCrashes(owned(51, 100_000, 5, "p2"), maxCrashes), 2)
	c.mustRegister("p3", 1_000_000)
	if id, ok := c.claimAs(1, withCrashes(owned(151, 100_000, 5, "p3"), maxCrashes)); ok {
		c.fatalf(`ClaimAs(1, now 151ms, process "p3") took %s; want the row spent on its second crash (MaxCrashes 2)`, fmtID(id))
	}
	c.spentWith(1, intake.CrashesSpentText)
	ok, err := c.admin.Requeue(c.ctx, 1, at(200))
	c.failed("Requeue(1)", err)
	if !ok {
		c.fatalf("Requeue(1) of a row spent by crashes reported false")
	}
	if row, _ := c.get(1); row.State != intake.StatePending || row.Attempts != 0 || row.Crashes != 0 {
		c.errorf("Get(1) after its requeue = %s, %d attempts, %d crashes; want pending, 0 attempts, 0 crashes: a requeued row is handled again from the start",
			row.State, row.Attempts, row.Crashes)
	}
	c.mustRegister("p4", 250)
	c.mustClaimAs(1, withCrashes(owned(200, 100_000, 5, "p4"), maxCrashes), 1)
	ident, ok := c.claimAs(1, withCrashes(owned(251, 100_000, 5, "p3"), maxCrashes))
	if !ok || ident.Attempt != 2 {
		c.errorf(`ClaimAs(1, now 251ms, process "p3", MaxCrashes 2) = %s, %v; want attempt 2: the requeued row's first crash since the requeue leaves one of its budget`, fmtID(ident), ok)
	}
	if row, _ := c.get(1); row.Crashes != 1 {
		c.errorf("Get(1) after one crash since its requeue has %d crashes; want 1", row.Crashes)
	}
}

// raceReclaimLease: in each round a fresh row is claimed with a lease to
// 100ms; at 101ms racers claim it at once. Exactly one takes attempt 2, and
// it alone owns the row.
func raceReclaimLease(c *checker) {
	for round := range reclaimRounds {
		id := int64(reclaimFirstID + round)
		c.mustAdd(id, 0)
		first := c.mustClaimOwned(id, claimOpts(0, 100, raceMaxTries), 1)
		won := race(c, "reclaim", id, func() (intake.Identity, bool, error) {
			return c.store.Claim(c.ctx, id, claimOpts(101, 200, raceMaxTries))
		})
		c.checkReclaimRace(round, id, "whose lease lapsed at 100ms", first, won)
	}
}

// raceReclaimOwner is raceReclaimLease with a row whose lease lasts, but
// whose owner's heartbeat lapsed at 50ms: racers take it over at 51ms.
func raceReclaimOwner(c *checker) {
	c.mustRegister("live", 1_000_000)
	for round := range reclaimRounds {
		id := int64(reclaimFirstID + round)
		dead := fmt.Sprintf("dead-%d", round)
		c.mustRegister(dead, 50)
		c.mustAdd(id, 0)
		first := c.mustClaimAs(id, owned(0, 100_000, raceMaxTries, dead), 1)
		won := race(c, "takeover", id, func() (intake.Identity, bool, error) {
			o := withCrashes(owned(51, 200_000, raceMaxTries, "live"), raceMaxTries)
			return c.process.ClaimAs(c.ctx, id, o.opts, o.p)
		})
		c.checkReclaimRace(round, id, "whose owner lapsed at 50ms", first, won)
	}
}

// checkReclaimRace checks the winners of one reclaim race of id, which
// first held.
func (c *checker) checkReclaimRace(round int, id int64, what string, first intake.Identity, won []intake.Identity) {
	if len(won) != 1 {
		var ids []string
		for _, w := range won {
			ids = append(ids, fmtID(w))
		}
		c.errorf("round %d: %d of %d concurrent claims of processing update %d %s took it (%v); exactly one must", round, len(won), racers, id, what, ids)
		return
	}
	w := won[0]
	if w.Attempt != 2 || w.UpdateID != id || w.ClaimID == "" || w.ClaimID == first.ClaimID {
		c.errorf("round %d: the one reclaim of update %d %s got %s; want attempt 2 with a new claim id", round, id, what, fmtID(w))
	}
	if !c.owns(w, 150) {
		c.errorf("round %d: Owns(%s, at 150ms) = false for the winner of the reclaim race", round, fmtID(w))
	}
	if c.owns(first, 150) {
		c.errorf("round %d: Owns(%s, at 150ms) = true for the identity the row was reclaimed from", round, fmtID(first))
	}
}

// dueJudgesOwnersAtNow: Due judges a row's owner at q.Now, not at
// q.PendingBefore (which a sweep sets earlier, by the pending grace): a
// row whose owner's heartbeat ends at 50ms is not listed at 40ms, however
// late PendingBefore, and is listed at 60ms, however early PendingBefore.
// Its lease runs to 1000ms, so only its owner decides. The strict listings
// of a chat order store judge it the same way.
func dueJudgesOwnersAtNow(c *checker) {
	const owner = "due-owner"
	c.mustRegister(owner, 50)
	c.mustAdd(1, 0)
	ids := []int64{1}
	if c.order != nil {
		c.addChat(2, "due-chat", 0)
		ids = append(ids, 2)
	}
	for _, id := range ids {
		c.mustClaimAs(id, owned(0, 1000, defaultMax, owner), 1)
	}
	if got := c.dueIDs(40, 60, 10); len(got) != 0 {
		c.errorf("Due(now 40ms, pending before 60ms) listed %v; want none: the owner's heartbeat is live at 40ms (to 50ms) and the leases run to 1000ms", got)
	}
	if got := c.dueIDs(60, 40, 10); !slices.Equal(got, ids) {
		c.errorf("Due(now 60ms, pending before 40ms) listed %v; want %v: the owner's heartbeat lapsed at 50ms, so its rows are claimable at 60ms", got, ids)
	}
	if c.order == nil {
		return
	}
	if got := c.strictDue(40, 60, 10, ""); len(got) != 0 {
		c.errorf("DueInOrder(now 40ms, pending before 60ms) listed %v; want none: the owner's heartbeat is live at 40ms", got)
	}
	if got := c.strictDue(60, 40, 10, ""); !slices.Equal(got, ids) {
		c.errorf("DueInOrder(now 60ms, pending before 40ms) listed %v; want %v: the owner's heartbeat lapsed at 50ms", got, ids)
	}
	if got := c.strictDue(40, 60, 10, "due-chat"); len(got) != 0 {
		c.errorf("DueInOrder(now 40ms, pending before 60ms, chat %q) listed %v; want none: the owner's heartbeat is live at 40ms", "due-chat", got)
	}
	if got := c.strictDue(60, 40, 10, "due-chat"); !slices.Equal(got, []int64{2}) {
		c.errorf("DueInOrder(now 60ms, pending before 40ms, chat %q) listed %v; want [2]: the owner's heartbeat lapsed at 50ms", "due-chat", got)
	}
}
