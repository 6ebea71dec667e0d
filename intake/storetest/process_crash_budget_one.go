package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// crashBudgetOfOneRule is the rule of crashBudgetOfOne.
const crashBudgetOfOneRule = "a crash budget of one is a budget: the first takeover from a lapsed owner spends the row"

// crashBudgetOfOne: [intake.ProcessClaim.MaxCrashes] above zero is a crash
// budget, one included. Update 1's first attempt is claimed by p1 with
// MaxCrashes 1 and MaxAttempts 5; p1's heartbeat lapses, and p2's claim
// (MaxCrashes 1) is the row's first crash, which spends the budget: the
// claim takes nothing and the row becomes an exhaustion with
// [intake.CrashesSpentText], not attempt 2 (Process/CrashBudget uses a
// budget of 3, which a store that read 1 as "no budget" also keeps).
func crashBudgetOfOne(c *checker) {
	c.mustAdd(1, 0)
	c.mustRegister("p1", 50)
	c.mustClaimAs(1, withCrashes(owned(0, 100_000, 5, "p1"), 1), 1)
	c.mustRegister("p2", 100_000)
	if id, ok := c.claimAs(1, withCrashes(owned(51, 200_000, 5, "p2"), 1)); ok {
		c.fatalf("ClaimAs at 51ms with MaxCrashes 1 took %s; the takeover from p1, lapsed at 50ms, is the row's first crash and spends it", fmtID(id))
	}
	c.spentWith(1, intake.CrashesSpentText)
}
