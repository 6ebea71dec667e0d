package storetest

import (
	"bytes"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

func claimCases() []testCase {
	return []testCase{
		{name: "LiveLeaseNotTaken", rule: "a live lease is not taken, a lapsed one is", run: liveLease},
		{name: "OnlyHolderRenewsOrSettles", rule: "only the holding attempt renews or settles", run: holderRenewsSettles},
		{name: "FailedRetryAndSpend", rule: "a failed update is due at its retry, and spent attempts abandon it", run: failedRetryAndSpend},
		{name: "RenewNeverShortens", rule: "renewal never shortens a live lease and never revives a lapsed one", run: renewNeverShortens},
		{name: "MissingAndTerminalRows", rule: "missing and terminal rows are neither claimed, renewed nor settled", run: missingAndTerminal},
		{name: "MillisecondPrecision", rule: "times keep millisecond precision", run: millisecondPrecision},
		{name: "LiveLeaseUntouchedOnLastAttempt", rule: "a claim leaves a row under a live lease untouched, even on its last attempt", run: liveLeaseOnLastAttempt},
		{name: "FailedAttemptIsOver", rule: "an attempt that failed can no longer renew or settle", run: failedAttemptIsOver},
		{name: "BaseSettleRefusesLapsedLease", rule: "a base settlement after the lease lapsed is refused", run: baseSettleAfterLease},
		{name: "SettleRacingReclaim", rule: "a settlement racing a reclaim of its lapsed lease: never both succeed", run: settleRacingReclaim},
		{name: "SpendWaitsForRetry", rule: "a failed row on its last attempt is not claimable before its retry time, so a claim then spends nothing", run: spendWaitsForRetry},
		{name: "DuePageOfDueRows", rule: duePageRule, run: duePage},
	}
}

// liveLease: rule 2. The lease is live through its end inclusive; Due and
// Claim leave it alone until it lapsed, then it is claimable again.
func liveLease(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(10, 100, defaultMax), 1)
	if attempt, ok := c.claim(1, claimOpts(50, 200, defaultMax)); ok {
		c.errorf("a claim at 50ms took the live lease of attempt 1 (lease to 100ms) and got attempt %d", attempt)
	}
	if attempt, ok := c.claim(1, claimOpts(100, 200, defaultMax)); ok {
		c.errorf("a claim at 100ms took the lease of attempt 1, still live through its end at 100ms, and got attempt %d", attempt)
	}
	if got := c.dueIDs(50, 50, 10); len(got) != 0 {
		c.errorf("Due(now 50ms) listed %v while update 1 is under a live lease to 100ms", got)
	}
	rows := c.due(101, 0, 10)
	if len(rows) != 1 || rows[0].UpdateID != 1 {
		c.errorf("Due(now 101ms) listed %v; want update 1, whose lease lapsed at 100ms", storedIDs(rows))
	} else if !bytes.Equal(rows[0].Body, body(1)) {
		c.errorf("Due(now 101ms) listed update 1 with body %q; want %q", rows[0].Body, body(1))
	}
	if attempt, ok := c.claim(1, claimOpts(101, 200, defaultMax)); !ok || attempt != 2 {
		c.errorf("a claim at 101ms after the lease lapsed at 100ms = attempt %d, %v; want attempt 2", attempt, ok)
	}
}

// holderRenewsSettles: rule 3. After a reclaim, the earlier attempt neither
// renews nor settles; the current one does both.
func holderRenewsSettles(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 10, defaultMax), 1)
	c.mustClaim(1, claimOpts(11, 50, defaultMax), 2)
	if c.renew(1, 1, 500, 11) {
		c.errorf("Renew by the stale attempt 1 reported true after attempt 2 took the row")
	}
	if !c.renew(1, 2, 60, 12) {
		c.errorf("Renew by the holding attempt 2 (lease to 50ms, now 12ms) reported false")
	}
	if c.settle(1, 1, completed(20)) {
		c.errorf("Settle by the stale attempt 1 reported true")
	}
	if got := c.dueIDs(61, 61, 10); !slices.Equal(got, []int64{1}) {
		c.errorf("Due(now 61ms) listed %v; want [1]: the stale settle must be ignored and the lease to 60ms has lapsed", got)
	}
	if !c.settle(1, 2, completed(30)) {
		c.errorf("Settle by the holding attempt 2 at 30ms reported false")
	}
	if got := c.dueIDs(1000, 1000, 10); len(got) != 0 {
		c.errorf("Due(now 1000ms) listed %v after update 1 was completed", got)
	}
}

// failedRetryAndSpend: rule 4. A failed row is due at its retry time, Due is
// ordered by update id and honours its limit, and a claim of a row whose
// attempts are spent abandons it.
func failedRetryAndSpend(c *checker) {
	c.mustAdd(2, 0)
	c.mustAdd(1, 5)
	c.mustClaim(2, claimOpts(0, 10, defaultMax), 1)
	if !c.settle(2, 1, failedAt(1, 30, "boom")) {
		c.fatalf("Settle(2, attempt 1, failed at 1ms) of a live lease reported false")
	}
	if got := c.dueIDs(29, 0, 10); len(got) != 0 {
		c.errorf("Due(now 29ms, pending before 0ms) listed %v; update 2 retries at 30ms, update 1 was received at 5ms", got)
	}
	if got := c.dueIDs(30, 5, 10); !slices.Equal(got, []int64{1, 2}) {
		c.errorf("Due(now 30ms, pending before 5ms) listed %v; want [1 2] in update id order", got)
	}
	if got := c.dueIDs(30, 5, 1); !slices.Equal(got, []int64{1}) {
		c.errorf("Due(now 30ms, limit 1) listed %v; want exactly [1]", got)
	}
	if attempt, ok := c.claim(2, claimOpts(29, 60, defaultMax)); ok {
		c.errorf("a claim at 29ms took the failed row before its retry at 30ms (attempt %d)", attempt)
	}
	c.mustClaim(2, claimOpts(30, 60, defaultMax), 2)
	if !c.settle(2, 2, failedAt(31, 35, "boom again")) {
		c.fatalf("Settle(2, attempt 2, failed at 31ms) of a live lease reported false")
	}
	if attempt, ok := c.claim(2, claimOpts(36, 100, defaultMax)); ok {
		c.errorf("a claim at 36ms of a row whose attempts are spent (2 of %d) took attempt %d", defaultMax, attempt)
	}
	if got := c.dueIDs(100, 0, 10); len(got) != 0 {
		c.errorf("Due(now 100ms, pending before 0ms) listed %v; update 2 must be abandoned after its spent claim", got)
	}
	if attempt, ok := c.claim(2, claimOpts(200, 300, 5)); ok {
		c.errorf("a claim with a higher MaxAttempts took the abandoned row (attempt %d); abandoned is terminal", attempt)
	}
	if c.admin != nil {
		row, ok := c.get(2)
		switch {
		case !ok:
			c.errorf("Get(2) found no row after the spend")
		case row.State != intake.StateAbandoned || row.Error != intake.AttemptsSpentText:
			c.errorf("after the spend, Get(2) = state %s, error %q; want abandoned, %q", row.State, row.Error, intake.AttemptsSpentText)
		case !row.SettledAt.IsZero() || !row.DueAt.Equal(at(36)):
			c.errorf("after a spend at 36ms, SettledAt is %s and DueAt %s; want the zero time (an unacknowledged exhaustion) and 36ms", offset(row.SettledAt), offset(row.DueAt))
		}
	}
}

// spendWaitsForRetry: a claim changes nothing on a row that is not
// claimable, and a failed row is claimable only from its retry time on; only
// a claimable row whose attempts reached the ceiling is spent. So a claim
// before the retry of a row on its last attempt reports false and leaves it
// failed, not exhausted; the claim at its retry time spends it.
func spendWaitsForRetry(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 10, 1), 1)
	if !c.settle(1, 1, failedAt(1, 30, "boom")) {
		c.fatalf("Settle(1, attempt 1, failed at 1ms, retry at 30ms) of a live lease reported false")
	}
	if attempt, ok := c.claim(1, claimOpts(29, 60, 1)); ok {
		c.errorf("a claim at 29ms took the failed row before its retry at 30ms (attempt %d)", attempt)
	}
	if e, ok := c.findExhaustion(1); ok {
		c.errorf("a claim at 29ms, before the retry at 30ms, spent update 1 (exhausted at %s, error %q); a row that is not claimable is left untouched, even on its last attempt",
			offset(e.ExhaustedAt), e.Error)
	}
	if c.admin != nil {
		if row, ok := c.get(1); !ok || row.State != intake.StateFailed || row.Error != "boom" || !row.DueAt.Equal(at(30)) || row.Attempts != 1 {
			c.errorf("after a claim at 29ms, before the retry, Get(1) = state %s, attempts %d, error %q, due %s, found %v; want failed, 1, %q, 30ms",
				row.State, row.Attempts, row.Error, offset(row.DueAt), ok, "boom")
		}
	}
	if got := c.dueIDs(30, 0, 10); !slices.Equal(got, []int64{1}) {
		c.errorf("Due(now 30ms) listed %v; want [1], its retry being due", got)
	}
	if attempt, ok := c.claim(1, claimOpts(30, 60, 1)); ok {
		c.errorf("a claim at 30ms of a row whose one attempt is spent took attempt %d", attempt)
	}
	if e, ok := c.findExhaustion(1); !ok {
		c.errorf("the claim at 30ms, the retry time, did not spend update 1 on its spent attempt")
	} else if !e.ExhaustedAt.Equal(at(30)) || e.Error != intake.AttemptsSpentText {
		c.errorf("the spend at 30ms listed exhausted at %s, error %q; want 30ms, %q", offset(e.ExhaustedAt), e.Error, intake.AttemptsSpentText)
	}
}

// renewNeverShortens: rule 8. A late renewal with an earlier end is accepted
// but does not shorten the lease; a renewal after the lease lapsed does not
// revive it.
func renewNeverShortens(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 10, defaultMax), 1)
	if !c.renew(1, 1, 30, 1) {
		c.errorf("Renew(attempt 1, to 30ms, now 1ms) of a live lease to 10ms reported false")
	}
	if !c.renew(1, 1, 20, 2) {
		c.errorf("Renew(attempt 1, to 20ms, now 2ms) of a live lease to 30ms reported false; a late renewal is accepted, without shortening")
	}
	if got := c.dueIDs(21, 21, 10); len(got) != 0 {
		c.errorf("Due(now 21ms) listed %v: the renewal to 20ms shortened the lease to 30ms", got)
	}
	if attempt, ok := c.claim(1, claimOpts(30, 100, defaultMax)); ok {
		c.errorf("a claim at 30ms took the lease renewed to 30ms (attempt %d)", attempt)
	}
	if c.renew(1, 1, 100, 31) {
		c.errorf("Renew(attempt 1, now 31ms) reported true after the lease lapsed at 30ms: renewal revived an expired lease")
	}
	if attempt, ok := c.claim(1, claimOpts(31, 100, defaultMax)); !ok || attempt != 2 {
		c.errorf("a claim at 31ms after the lease lapsed at 30ms = attempt %d, %v; want attempt 2", attempt, ok)
	}
}

// missingAndTerminal: a missing id and a completed or settled abandoned row
// report false everywhere, without an error.
func missingAndTerminal(c *checker) {
	if _, ok := c.claim(99, claimOpts(0, 10, defaultMax)); ok {
		c.errorf("Claim of a missing update id reported true")
	}
	if c.renew(99, 1, 10, 0) {
		c.errorf("Renew of a missing update id reported true")
	}
	if c.settle(99, 1, completed(0)) {
		c.errorf("Settle of a missing update id reported true")
	}
	if c.renew(99, 0, 10, 0) || c.settle(99, 0, completed(0)) {
		c.errorf("Renew or Settle with attempt 0 of a missing update id reported true")
	}
	c.mustAdd(1, 0)
	if c.renew(1, 0, 10, 0) {
		c.errorf("Renew(attempt 0) of a pending row reported true")
	}
	if c.settle(1, 0, completed(0)) {
		c.errorf("Settle(attempt 0) of a pending row reported true")
	}
	c.mustClaim(1, claimOpts(0, 10, defaultMax), 1)
	if !c.settle(1, 1, completed(5)) {
		c.fatalf("Settle(1, attempt 1, completed at 5ms) of a live lease reported false")
	}
	c.mustAdd(2, 0)
	c.mustClaim(2, claimOpts(0, 10, defaultMax), 1)
	if !c.settle(2, 1, abandoned(5, "gave up")) {
		c.fatalf("Settle(2, attempt 1, abandoned at 5ms) of a live lease reported false")
	}
	for _, id := range []int64{1, 2} {
		if attempt, ok := c.claim(id, claimOpts(100, 200, defaultMax)); ok {
			c.errorf("Claim of the settled update %d took attempt %d", id, attempt)
		}
		if c.renew(id, 1, 200, 6) {
			c.errorf("Renew of the settled update %d reported true", id)
		}
		if c.settle(id, 1, completed(6)) {
			c.errorf("a second Settle of the settled update %d reported true", id)
		}
	}
	if got := c.dueIDs(1000, 1000, 10); len(got) != 0 {
		c.errorf("Due listed settled rows %v", got)
	}
}

// millisecondPrecision: the stored times compare to the millisecond on
// 13-digit epoch values: one millisecond decides each boundary.
func millisecondPrecision(c *checker) {
	const received, lease, retry = 1_001, 2_003, 3_007
	c.mustAdd(1, received)
	if got := c.dueIDs(0, received-1, 10); len(got) != 0 {
		c.errorf("Due(pending before %dms) listed %v; the row was received 1ms later", received-1, got)
	}
	if got := c.dueIDs(0, received, 10); len(got) != 1 {
		c.errorf("Due(pending before %dms) listed %v; the row was received at exactly that time", received, got)
	}
	c.mustClaim(1, claimOpts(received, lease, defaultMax), 1)
	if !c.renew(1, 1, lease, lease) {
		c.errorf("Renew at exactly the lease end %dms reported false; the lease is live through its end", lease)
	}
	if got := c.dueIDs(lease, 0, 10); len(got) != 0 {
		c.errorf("Due(now %dms) listed %v at exactly the lease end", lease, got)
	}
	if got := c.dueIDs(lease+1, 0, 10); len(got) != 1 {
		c.errorf("Due(now %dms) listed %v; the lease ended 1ms earlier", lease+1, got)
	}
	if !c.settle(1, 1, failedAt(lease, retry, "x")) {
		c.errorf("Settle at exactly the lease end %dms reported false", lease)
	}
	if got := c.dueIDs(retry-1, 0, 10); len(got) != 0 {
		c.errorf("Due(now %dms) listed %v; the retry is 1ms later", retry-1, got)
	}
	if got := c.dueIDs(retry, 0, 10); len(got) != 1 {
		c.errorf("Due(now %dms) listed %v; the retry is due at exactly that time", retry, got)
	}
	if c.admin != nil {
		row, ok := c.get(1)
		if !ok || !row.ReceivedAt.Equal(at(received)) || !row.DueAt.Equal(at(retry)) {
			c.errorf("Get(1) = ReceivedAt %s, DueAt %s, found %v; want %dms and %dms exactly", offset(row.ReceivedAt), offset(row.DueAt), ok, received, retry)
		}
	}
}
