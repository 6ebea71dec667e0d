package storetest

import (
	"errors"
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
)

func argumentCases() []testCase {
	return []testCase{
		{name: "BadBaseArgumentsRefused", rule: "a claim option, settlement or due query outside the contract is refused with intake.ErrInvalidArgument and changes nothing", run: badBaseArguments},
		{name: "BadOwnedArgumentsRefused", rule: "an owned claim or settlement with arguments outside the contract is refused with intake.ErrInvalidArgument and changes nothing", run: badOwnedArguments},
		{name: "BadExhaustionQueryRefused", rule: "an exhaustion query outside the contract is refused with intake.ErrInvalidArgument", run: badExhaustionQuery},
		{name: "BadListQueryRefused", rule: "a list query outside the contract is refused with intake.ErrInvalidArgument", needs: capAdmin, run: badListQuery},
	}
}

// badSettlements are settlements whose state is not a final one.
var badSettlements = []intake.State{intake.StatePending, intake.StateProcessing, "", "done"}

// badMaxAttempts are attempt ceilings that fail ClaimOpts.Validate.
var badMaxAttempts = []int{0, -1}

// refused checks that err wraps intake.ErrInvalidArgument.
func (c *checker) refused(call string, err error) {
	if !errors.Is(err, intake.ErrInvalidArgument) {
		c.errorf("%s returned %v; want an error wrapping intake.ErrInvalidArgument", call, err)
	}
}

// Update 2 is claimed first, then bad settlements of it and bad claims of
// the pending update 1 are made: neither may change a row.
func badBaseArguments(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	c.mustClaim(2, claimOpts(0, 100, defaultMax), 1)
	for _, m := range badMaxAttempts {
		_, ok, err := c.store.Claim(c.ctx, 1, claimOpts(0, 100, m))
		c.refused(fmt.Sprintf("Claim(1, MaxAttempts %d) (reported %v)", m, ok), err)
	}
	for _, st := range badSettlements {
		ok, err := c.store.Settle(c.ctx, c.identity(2, 1), intake.Settlement{State: st, At: at(1), RetryAt: at(1), Error: "x"})
		c.refused(fmt.Sprintf("Settle(2, attempt 1, state %q) (reported %v)", st, ok), err)
	}
	for _, limit := range []int{0, -1} {
		rows, err := c.store.Due(c.ctx, intake.DueQuery{Now: at(1000), PendingBefore: at(1000), Limit: limit})
		c.refused(fmt.Sprintf("Due(limit %d) (listed %d rows)", limit, len(rows)), err)
	}
	if attempt, ok := c.claim(2, claimOpts(50, 200, defaultMax)); ok {
		c.errorf("after the refused settlements, a claim at 50ms took update 2 (attempt %d); the lease to 100ms must still hold", attempt)
	}
	if attempt, ok := c.claim(1, claimOpts(60, 200, defaultMax)); !ok || attempt != 1 {
		c.errorf("after the refused claims, Claim(1) = attempt %d, %v; want attempt 1 of the untouched pending row", attempt, ok)
	}
}

func badOwnedArguments(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	id := c.mustClaimOwned(2, claimOpts(0, 100, defaultMax), 1)
	for _, m := range badMaxAttempts {
		got, ok, err := c.store.Claim(c.ctx, 1, claimOpts(0, 100, m))
		c.refused(fmt.Sprintf("Claim(1, MaxAttempts %d) (reported %s, %v)", m, fmtID(got), ok), err)
	}
	for _, st := range badSettlements {
		ok, err := c.store.Settle(c.ctx, id, intake.Settlement{State: st, At: at(1), RetryAt: at(1), Error: "x"})
		c.refused(fmt.Sprintf("Settle(%s, state %q) (reported %v)", fmtID(id), st, ok), err)
	}
	if !c.owns(id, 50) {
		c.errorf("after the refused settlements, Owns(%s, at 50ms) reported false; the lease to 100ms must still hold", fmtID(id))
	}
	if got, ok := c.claimOwned(1, claimOpts(60, 200, defaultMax)); !ok || got.Attempt != 1 {
		c.errorf("after the refused claims, Claim(1) = %s, %v; want attempt 1 of the untouched pending row", fmtID(got), ok)
	}
}

func badExhaustionQuery(c *checker) {
	for _, limit := range []int{0, -1} {
		rows, err := c.store.DueExhaustions(c.ctx, intake.ExhaustionQuery{Limit: limit})
		c.refused(fmt.Sprintf("DueExhaustions(limit %d) (listed %d)", limit, len(rows)), err)
	}
}

func badListQuery(c *checker) {
	c.mustAdd(1, 0)
	for name, q := range map[string]intake.ListQuery{
		"limit 0":                         {Limit: 0},
		"limit -1":                        {Limit: -1},
		"state lost":                      {Limit: 10, State: "lost"},
		"unacknowledged in state pending": {Limit: 10, State: intake.StatePending, Unacknowledged: true},
	} {
		rows, err := c.admin.List(c.ctx, q)
		c.refused(fmt.Sprintf("List(%s) (listed %d)", name, len(rows)), err)
	}
}
