package storetest

// A row recorded claimed ([intake.Store.AddBatch] with a Claim) is exactly
// a claimed row: attempt 1 and no crash. A store that counted a crash on
// it would spend the row's crash budget one takeover early and show a
// crash that never happened (Row.Crashes, SearchQuery.Crashed).

// claimedAddNoCrashRule is the rule of claimedAddHasNoCrash.
const claimedAddNoCrashRule = "a row recorded claimed has no crash: the first takeover from its lapsed owner is its first crash, within the crash budget"

// claimedAddHasNoCrash: update 1 is recorded claimed by process "a"
// (AddBatchAs, heartbeat to 100ms, lease to 10000ms). Get shows no crash.
// Once "a" lapses, process "b" takes it over with a crash budget of two and
// MaxAttempts 1: the takeover is the row's first crash, so it takes the
// row as attempt 2 rather than spending it, and the row then shows one
// crash.
func claimedAddHasNoCrash(c *checker) {
	if _, ok := c.addClaimedByLapsing(); !ok {
		return
	}
	if c.admin != nil {
		if row, ok := c.get(1); ok && row.Crashes != 0 {
			c.errorf("Get(1) after its claimed add shows %d crashes; want 0: no process has crashed on it", row.Crashes)
		}
	}
	ident, ok := c.claimAs(1, withCrashes(owned(101, 20_000, 1, "b"), 2))
	if !ok || ident.Attempt != 2 {
		c.errorf("ClaimAs(1, now 101ms, process \"b\", max crashes 2) after the claimed add's owner lapsed at 100ms = %s, %v; "+
			"want attempt 2: the takeover is the row's first crash, within a budget of two (a claimed add that counted a crash spends it here)",
			fmtID(ident), ok)
		return
	}
	if c.admin != nil {
		if row, ok := c.get(1); ok && row.Crashes != 1 {
			c.errorf("Get(1) after one takeover from a lapsed owner shows %d crashes; want 1", row.Crashes)
		}
	}
}
