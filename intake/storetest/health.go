package storetest

import "github.com/tgrelay/tgrelay/intake"

// healthyRule is the rule of healthyWhileServing.
const healthyRule = "a HealthChecker reports nil while the store serves: before and after it records, claims and settles"

// healthyWhileServing: [intake.HealthChecker.Health] returns nil while the
// store can serve and an error only saying why not, and the relay's
// readiness trusts it. A store whose check always failed (a query that
// errs, a wrong comparison of its answer) would take a working relay out
// of service while every other case passes. A fresh store is healthy, and
// stays healthy as it records, claims and completes an update.
func healthyWhileServing(c *checker) {
	h := c.store.(intake.HealthChecker)
	check := func(when string) {
		if err := h.Health(c.ctx); err != nil {
			c.errorf("Health %s = %v; want nil: the store serves", when, err)
		}
	}
	check("of a fresh store")
	c.mustAdd(1, 0)
	check("after an Add")
	c.mustClaim(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(1, 1, completed(10)) {
		c.fatalf("Settle(1, attempt 1, completed at 10ms) of a live lease reported false")
	}
	check("after a claim and its completion")
}
