package storetest

import (
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
)

func processCases() []testCase {
	return []testCase{
		{name: "TakeoverWhenOwnerLapses", rule: "a row whose owner's heartbeat lapsed is taken over before its lease ends, and the old identity is fenced", needs: capProcess, run: takeoverWhenOwnerLapses},
		{name: "BeatKeepsOwnerLive", rule: "a renewed heartbeat keeps its rows; a heartbeat is never shortened nor revived", needs: capProcess, run: beatKeepsOwnerLive},
		{name: "BeatRacingLeave", rule: "a heartbeat renewed while its process leaves is gone afterwards: nothing revives it", needs: capProcess, run: beatRacingLeave},
		{name: "RegisterOnce", rule: "a process id is registered once; a lapsed one is not registered again", needs: capProcess, run: registerOnce},
		{name: "ConcurrentRegisters", rule: "of concurrent registrations of one process id exactly one applies", needs: capProcess, run: concurrentRegisters},
		{name: "LeaveReleasesAtOnce", rule: "the rows of a process that left are claimable at once", needs: capProcess, run: leaveReleasesAtOnce},
		{name: "ConcurrentLeaves", rule: "of concurrent leaves of one process exactly one removes its heartbeat", needs: capProcess, run: concurrentLeaves},
		{name: "UnknownOwnerIsLapsed", rule: "a row owned by a process that was never registered is claimable", needs: capProcess, run: unknownOwnerLapsed},
		{name: "OnlyTheOwnerCounts", rule: "only the row's own owner's heartbeat decides a takeover; a row without owner waits for its lease", needs: capProcess, run: onlyTheOwnerCounts},
		{name: "TakeoverByNoProcess", rule: "a claim by no process replaces the row's owner: the row it took over waits for its lease", needs: capProcess, run: takeoverByNoProcess},
		{name: "Reap", rule: "Reap removes exactly the heartbeats that lapsed strictly before now", needs: capProcess, run: reap},
		{name: "ConcurrentReaps", rule: "concurrent reaps remove each lapsed heartbeat once: their counts sum to the heartbeats that lapsed", needs: capProcess, run: concurrentReaps},
		{name: "CrashBudget", rule: "with MaxCrashes, takeovers from lapsed owners count against MaxCrashes, not MaxAttempts", needs: capProcess, run: crashBudget},
		{name: "CrashesAndAttemptsApart", rule: "a lease that ended under a live owner is an attempt, not a crash", needs: capProcess, run: crashesAndAttemptsApart},
		{name: "NoCrashBudget", rule: "with MaxCrashes zero, a crashed attempt counts against MaxAttempts", needs: capProcess, run: noCrashBudget},
		{name: "NegativeCrashBudgetRefused", rule: "a ClaimAs or AddBatchAs with a negative MaxCrashes is refused with intake.ErrInvalidArgument and changes nothing", needs: capProcess, run: negativeCrashBudget},
		{name: "FailedRowIsNoCrash", rule: "the retry of a failed row is no crash, even when its last owner lapsed", needs: capProcess, run: failedRowIsNoCrash},
	}
}

// processOpts are the arguments of a ClaimAs.
type processOpts struct {
	opts intake.ClaimOpts
	p    intake.ProcessClaim
}

// owned returns the arguments of a claim at nowMS with a lease to
// leaseMS, taken by owner.
func owned(nowMS, leaseMS int64, max int, owner string) processOpts {
	return processOpts{opts: claimOpts(nowMS, leaseMS, max), p: intake.ProcessClaim{Process: owner}}
}

// withCrashes returns o with the crash budget set.
func withCrashes(o processOpts, maxCrashes int) processOpts {
	o.p.MaxCrashes = maxCrashes
	return o
}

// claimAs claims id with ClaimAs, remembering the identity.
func (c *checker) claimAs(id int64, o processOpts) (intake.Identity, bool) {
	ident, ok, err := c.process.ClaimAs(c.ctx, id, o.opts, o.p)
	c.failed(fmt.Sprintf("ClaimAs(%d, now %s, process %q, max crashes %d)", id, offset(o.opts.Now), o.p.Process, o.p.MaxCrashes), err)
	if ok {
		c.remember(ident)
	}
	return ident, ok
}

// mustClaimAs claims id with ClaimAs and ends the case unless it gets
// attempt want with a claim id.
func (c *checker) mustClaimAs(id int64, o processOpts, want int) intake.Identity {
	ident, ok := c.claimAs(id, o)
	if !ok || ident.Attempt != want || ident.UpdateID != id || ident.ClaimID == "" {
		c.fatalf("ClaimAs(%d, now %s, process %q) = %s, %v; want attempt %d of update %d with a claim id", id, offset(o.opts.Now), o.p.Process, fmtID(ident), ok, want, id)
	}
	return ident
}

func (c *checker) register(process string, untilMS int64) bool {
	ok, err := c.process.Register(c.ctx, process, at(untilMS))
	c.failed(fmt.Sprintf("Register(%q, until %dms)", process, untilMS), err)
	return ok
}

// mustRegister registers a new process id and ends the case if the store
// refuses it.
func (c *checker) mustRegister(process string, untilMS int64) {
	if !c.register(process, untilMS) {
		c.fatalf("Register(%q, until %dms) of a new process id reported false", process, untilMS)
	}
}

func (c *checker) beat(process string, untilMS, nowMS int64) bool {
	ok, err := c.process.Beat(c.ctx, process, at(untilMS), at(nowMS))
	c.failed(fmt.Sprintf("Beat(%q, until %dms, now %dms)", process, untilMS, nowMS), err)
	return ok
}

func (c *checker) leave(process string) bool {
	ok, err := c.process.Leave(c.ctx, process)
	c.failed(fmt.Sprintf("Leave(%q)", process), err)
	return ok
}

func (c *checker) reap(nowMS int64) int {
	n, err := c.process.Reap(c.ctx, at(nowMS))
	c.failed(fmt.Sprintf("Reap(now %dms)", nowMS), err)
	return n
}

// spentWith checks that update id was spent (abandoned instead of taken)
// with error text want, through the capabilities the store has.
func (c *checker) spentWith(id int64, want string) {
	if c.admin != nil {
		row, ok := c.get(id)
		if !ok || row.State != intake.StateAbandoned || row.Error != want {
			c.errorf("update %d is %s with error %q (found %v); want abandoned with %q", id, row.State, row.Error, ok, want)
		}
		return
	}
	if e, ok := c.findExhaustion(id); !ok || e.Error != want {
		c.errorf("the exhaustion of update %d has error %q (listed %v); want %q", id, e.Error, ok, want)
	}
}

// takeoverWhenOwnerLapses: the heart of the capability.
func takeoverWhenOwnerLapses(c *checker) {
	c.mustRegister("a", 100)
	c.mustRegister("b", 100_000)
	c.mustAdd(1, 0)
	first := c.mustClaimAs(1, owned(0, 10_000, defaultMax, "a"), 1)
	for _, nowMS := range []int64{50, 100} {
		if id, ok := c.claimAs(1, owned(nowMS, 20_000, defaultMax, "b")); ok {
			c.errorf("ClaimAs at %dms took %s while its owner's heartbeat lives to 100ms and its lease to 10000ms", nowMS, fmtID(id))
		}
	}
	if ids := c.dueIDs(100, 100, 10); len(ids) != 0 {
		c.errorf("Due(now 100ms) = %v while the owner of update 1 is live through 100ms; want none", ids)
	}
	if ids := c.dueIDs(101, 101, 10); len(ids) != 1 || ids[0] != 1 {
		c.errorf("Due(now 101ms) = %v after the owner's heartbeat lapsed at 100ms; want [1]", ids)
	}
	second := c.mustClaimAs(1, owned(101, 20_000, defaultMax, "b"), 2)
	if second.ClaimID == first.ClaimID {
		c.errorf("the takeover kept claim id %q", first.ClaimID)
	}
	if c.renewOwned(first, 30_000, 102) {
		c.errorf("Renew(%s) reported true after the row was taken over", fmtID(first))
	}
	if c.owns(first, 102) {
		c.errorf("Owns(%s, at 102ms) = true after the row was taken over", fmtID(first))
	}
	if c.settleOwned(first, completed(103)) {
		c.errorf("Settle(%s) reported true after the row was taken over", fmtID(first))
	}
	if c.exhaust(first, 103, "stale") {
		c.errorf("Exhaust(%s) reported true after the row was taken over", fmtID(first))
	}
	if !c.owns(second, 104) {
		c.errorf("Owns(%s, at 104ms) = false; the takeover holds the row", fmtID(second))
	}
	if _, ok := c.claimAs(1, owned(105, 30_000, defaultMax, "a")); ok {
		c.errorf("ClaimAs at 105ms took the row back from the takeover, whose owner b is live")
	}
	if !c.settleOwned(second, completed(106)) {
		c.errorf("Settle(%s) of the takeover reported false", fmtID(second))
	}
}

// beatKeepsOwnerLive: renewal extends, never shortens, never revives.
func beatKeepsOwnerLive(c *checker) {
	c.mustRegister("a", 100)
	c.mustRegister("b", 100_000)
	c.mustAdd(1, 0)
	c.mustClaimAs(1, owned(0, 10_000, defaultMax, "a"), 1)
	if !c.beat("a", 200, 50) {
		c.errorf("Beat(a, until 200ms, now 50ms) of a heartbeat live to 100ms reported false")
	}
	if id, ok := c.claimAs(1, owned(150, 20_000, defaultMax, "b")); ok {
		c.errorf("ClaimAs at 150ms took %s; the owner's heartbeat was renewed to 200ms", fmtID(id))
	}
	if !c.beat("a", 150, 160) {
		c.errorf("Beat(a, until 150ms, now 160ms) of a heartbeat live to 200ms reported false; a late beat is accepted, without shortening")
	}
	if id, ok := c.claimAs(1, owned(200, 20_000, defaultMax, "b")); ok {
		c.errorf("ClaimAs at 200ms took %s: the beat to 150ms shortened the heartbeat to 200ms", fmtID(id))
	}
	if c.beat("a", 1000, 201) {
		c.errorf("Beat(a, now 201ms) reported true after the heartbeat lapsed at 200ms: a beat revived a lapsed heartbeat")
	}
	c.mustClaimAs(1, owned(202, 20_000, defaultMax, "b"), 2)
	if c.beat("never", 1000, 0) {
		c.errorf("Beat of a process id never registered reported true")
	}
	// A heartbeat is live through its end inclusive.
	c.mustRegister("c", 300)
	if !c.beat("c", 400, 300) {
		c.errorf("Beat(c, until 400ms, now 300ms) of a heartbeat live to 300ms reported false; it is live through its end")
	}
}

// registerOnce: ids are never reused, live or lapsed.
func registerOnce(c *checker) {
	c.mustRegister("a", 100)
	if c.register("a", 500) {
		c.errorf("a second Register(a) of a live process reported true")
	}
	if c.register("a", 100_000) {
		c.errorf("Register(a) of a lapsed process reported true: a process id was reused")
	}
	if c.beat("a", 1000, 101) {
		c.errorf("Beat(a, now 101ms) reported true: the heartbeat lapsed at 100ms (was the refused Register applied?)")
	}
}

// leaveReleasesAtOnce: a clean shutdown hands its rows over without a wait.
func leaveReleasesAtOnce(c *checker) {
	c.mustRegister("a", 100_000)
	c.mustRegister("b", 100_000)
	c.mustAdd(1, 0)
	first := c.mustClaimAs(1, owned(0, 10_000, defaultMax, "a"), 1)
	if !c.leave("a") {
		c.errorf("Leave(a) of a registered process reported false")
	}
	if c.leave("a") {
		c.errorf("a second Leave(a) reported true")
	}
	if c.beat("a", 200_000, 2) {
		c.errorf("Beat(a) reported true after a left")
	}
	c.mustClaimAs(1, owned(1, 20_000, defaultMax, "b"), 2)
	if c.owns(first, 2) {
		c.errorf("Owns(%s) = true after its process left and the row was taken over", fmtID(first))
	}
}

// unknownOwnerLapsed: an owner the store does not know is not live.
func unknownOwnerLapsed(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaimAs(1, owned(0, 10_000, defaultMax, "never-registered"), 1)
	c.mustClaimAs(1, owned(1, 10_000, defaultMax, ""), 2)
}

// onlyTheOwnerCounts: another process's lapse takes nothing from a live
// owner, and an ownerless claim keeps its whole lease.
func onlyTheOwnerCounts(c *checker) {
	c.mustRegister("live", 100_000)
	c.mustRegister("dead", 10)
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	c.mustClaimAs(1, owned(0, 1000, defaultMax, "live"), 1)
	c.mustClaimAs(2, owned(0, 1000, defaultMax, ""), 1)
	for _, id := range []int64{1, 2} {
		if got, ok := c.claimAs(id, owned(500, 2000, defaultMax, "dead")); ok {
			c.errorf("ClaimAs(%d) at 500ms took %s under a live lease; only process dead lapsed", id, fmtID(got))
		}
	}
	if ids := c.dueIDs(500, 500, 10); len(ids) != 0 {
		c.errorf("Due(now 500ms) = %v; want none: no row's owner lapsed", ids)
	}
	c.mustClaimAs(2, owned(1001, 2000, defaultMax, "live"), 2)
}

// takeoverByNoProcess: the store records a claim's process with the
// claim, and a claim with no process is reclaimed only when its lease ends.
// So a claim by no process that takes a row over from a lapsed owner
// leaves the row without an owner: the lapsed owner no longer makes it
// claimable, and neither a claim nor Due takes it before its lease ends.
func takeoverByNoProcess(c *checker) {
	c.mustRegister("gone", 10)
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	c.mustClaimAs(1, owned(0, 1000, 5, "gone"), 1)
	c.mustClaimAs(2, owned(0, 1000, 5, "gone"), 1)
	// At 20ms "gone" has lapsed: claims by no process take both rows over,
	// one through Claim, one through ClaimAs with the zero ProcessClaim.
	c.mustClaim(1, claimOpts(20, 1000, 5), 2)
	c.mustClaimAs(2, owned(20, 1000, 5, ""), 2)
	for _, id := range []int64{1, 2} {
		if got, ok := c.claimAs(id, owned(30, 2000, 5, "")); ok {
			c.errorf("ClaimAs(%d) at 30ms by no process took %s; attempt 2 was claimed by no process, under a lease live to 1000ms", id, fmtID(got))
		}
		if attempt, ok := c.claim(id, claimOpts(30, 2000, 5)); ok {
			c.errorf("Claim(%d) at 30ms took attempt %d; attempt 2 was claimed by no process, under a lease live to 1000ms", id, attempt)
		}
	}
	if ids := c.dueIDs(30, 30, 10); len(ids) != 0 {
		c.errorf("Due(now 30ms) = %v; want none: both rows were taken over by claims of no process, their leases live to 1000ms", ids)
	}
	c.mustClaim(1, claimOpts(1001, 2000, 5), 3)
}

// reap: strictly before now, and a reaped process is gone for good.
func reap(c *checker) {
	c.mustRegister("a", 100)
	c.mustRegister("b", 200)
	c.mustRegister("c", 300)
	if n := c.reap(100); n != 0 {
		c.errorf("Reap(now 100ms) = %d; want 0: a is live through 100ms", n)
	}
	if n := c.reap(201); n != 2 {
		c.errorf("Reap(now 201ms) = %d; want 2 (a and b)", n)
	}
	if n := c.reap(201); n != 0 {
		c.errorf("a second Reap(now 201ms) = %d; want 0", n)
	}
	if !c.beat("c", 400, 250) {
		c.errorf("Beat(c, now 250ms) reported false: Reap removed a live process")
	}
	if c.beat("a", 1000, 100) {
		c.errorf("Beat(a, now 100ms) reported true after a was reaped")
	}
}

// crashBudget: MaxAttempts 2, MaxCrashes 3. Three processes die in turn
// holding the update; the first two takeovers take attempts 2 and 3, beyond
// MaxAttempts, and the third finds the crash budget spent.
func crashBudget(c *checker) {
	c.mustAdd(1, 0)
	for i, owner := range []string{"p1", "p2", "p3"} {
		startMS := int64(i) * 100
		c.mustRegister(owner, startMS+50)
		c.mustClaimAs(1, withCrashes(owned(startMS, 100_000, 2, owner), 3), i+1)
	}
	if c.admin != nil {
		if row, _ := c.get(1); row.Crashes != 2 || row.Attempts != 3 {
			c.errorf("after two takeovers from lapsed owners the row has %d attempts, %d crashes; want 3, 2", row.Attempts, row.Crashes)
		}
	}
	c.mustRegister("p4", 100_000)
	o := withCrashes(owned(251, 200_000, 2, "p4"), 3)
	if id, ok := c.claimAs(1, o); ok {
		c.fatalf("ClaimAs at 251ms took %s; want the row spent on its third crash (MaxCrashes 3)", fmtID(id))
	}
	c.spentWith(1, intake.CrashesSpentText)
}

// crashesAndAttemptsApart: a crash, then leases that end while their owner
// lives; only the latter spend MaxAttempts.
func crashesAndAttemptsApart(c *checker) {
	c.mustRegister("dead", 50)
	c.mustRegister("live", 1_000_000)
	c.mustAdd(1, 0)
	c.mustClaimAs(1, withCrashes(owned(0, 100_000, 2, "dead"), 5), 1)
	// A crash: attempt 1 does not count.
	c.mustClaimAs(1, withCrashes(owned(51, 100, 2, "live"), 5), 2)
	// The lease ended under a live owner: attempt 2 counts, one left.
	c.mustClaimAs(1, withCrashes(owned(101, 200, 2, "live"), 5), 3)
	if id, ok := c.claimAs(1, withCrashes(owned(201, 300, 2, "live"), 5)); ok {
		c.fatalf("ClaimAs at 201ms took %s; attempts 2 and 3 ended under a live owner, which spends MaxAttempts 2", fmtID(id))
	}
	c.spentWith(1, intake.AttemptsSpentText)
}

// noCrashBudget: without a crash budget every attempt counts.
func noCrashBudget(c *checker) {
	c.mustAdd(1, 0)
	c.mustRegister("p1", 50)
	c.mustClaimAs(1, owned(0, 100_000, 2, "p1"), 1)
	c.mustRegister("p2", 150)
	c.mustClaimAs(1, owned(51, 100_000, 2, "p2"), 2)
	if id, ok := c.claimAs(1, owned(151, 100_000, 2, "")); ok {
		c.fatalf("ClaimAs at 151ms with MaxCrashes 0 took %s; two attempts spend MaxAttempts 2, crashed or not", fmtID(id))
	}
	c.spentWith(1, intake.AttemptsSpentText)
}

// failedRowIsNoCrash: a settled failure is an attempt whatever became of
// its process.
func failedRowIsNoCrash(c *checker) {
	c.mustRegister("p", 50)
	c.mustAdd(1, 0)
	first := c.mustClaimAs(1, withCrashes(owned(0, 100, 2, "p"), 5), 1)
	if !c.settleOwned(first, failedAt(1, 60, "boom")) {
		c.fatalf("Settle(%s, failed) reported false", fmtID(first))
	}
	second := c.mustClaimAs(1, withCrashes(owned(60, 200, 2, ""), 5), 2)
	if !c.settleOwned(second, failedAt(61, 70, "boom")) {
		c.fatalf("Settle(%s, failed) reported false", fmtID(second))
	}
	if id, ok := c.claimAs(1, withCrashes(owned(70, 300, 2, ""), 5)); ok {
		c.fatalf("ClaimAs at 70ms took %s; two failed attempts spend MaxAttempts 2 (the retry after owner p lapsed counted as a crash?)", fmtID(id))
	}
	c.spentWith(1, intake.AttemptsSpentText)
}

// negativeCrashBudget: MaxCrashes below zero is outside the contract.
func negativeCrashBudget(c *checker) {
	c.mustAdd(1, 0)
	o := withCrashes(owned(0, 100, defaultMax, ""), -1)
	_, ok, err := c.process.ClaimAs(c.ctx, 1, o.opts, o.p)
	c.refused(fmt.Sprintf("ClaimAs(1, MaxCrashes -1) (reported %v)", ok), err)
	_, err = c.process.AddBatchAs(c.ctx, []intake.AddRequest{addReq(2, 0, claimPtr(0, 100, defaultMax))}, o.p)
	c.refused("AddBatchAs(MaxCrashes -1)", err)
	if ids := c.dueIDs(10, 10, 10); len(ids) != 1 || ids[0] != 1 {
		c.errorf("Due after the refused ClaimAs and AddBatchAs listed %v; want [1]: nothing changed, nothing recorded", ids)
	}
	c.mustClaimAs(1, owned(1, 100, defaultMax, ""), 1)
}
