package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// settledAtSettlementRule is the rule of settledAtSettlementTime.
const settledAtSettlementRule = "a completion carrying its attempt's record settles the row at the settlement's time, not the record's end, alone or concurrent"

// togetherRows is how many rows completeAloneThenTogether completes at
// once, besides the one it completes alone.
const togetherRows = 16

// settledAtSettlementTime: [intake.Settlement.At] is the settlement time,
// which Prune judges; the record riding on it ([intake.Settlement.Attempt])
// has times of its own. Update 1 is completed alone at 50ms with a record
// of an attempt that ended at 40ms, then updates 2 to 17 the same way all
// at once, so that a store that merges concurrent settlements is judged
// on its merged path too. Every row settled at 50ms: Get (for an
// [intake.AdminStore]) shows it, Prune(before 50ms) deletes none and
// Prune(before 51ms) all. (The other cases' records end when their
// settlements are made, so a store that took the record's end for the
// settlement time passed them.)
func settledAtSettlementTime(c *checker) {
	last := completeAloneThenTogether(c, func(h intake.Identity) intake.Settlement {
		return withRecord(completed(50), record(h.UpdateID, h.Attempt, h.ClaimID, intake.AttemptCompleted, 0, 40))
	})
	if c.admin != nil {
		for id := int64(1); id <= last; id++ {
			if row, ok := c.get(id); ok && !row.SettledAt.Equal(at(50)) {
				c.errorf("Get(%d) after its completion at 50ms, with a record that ended at 40ms, shows it settled at %s; want 50ms", id, offset(row.SettledAt))
			}
		}
	}
	if n := c.prune(50); n != 0 {
		c.errorf("Prune(before 50ms) deleted %d rows; every row was settled at 50ms (its record ended at 40ms), which is not strictly before", n)
	}
	if n := c.prune(51); int64(n) != last {
		c.errorf("Prune(before 51ms) deleted %d rows; want all %d, settled at 50ms", n, last)
	}
}

// completeAloneThenTogether adds and claims updates 1 to 1+togetherRows
// (leases to 100ms), completes update 1 alone and then the rest at once,
// each with the settlement done makes for its identity (completed at 50ms),
// and reports a completion of a live lease that was refused. A store that
// merges concurrent settlements is so judged on both its paths. It returns
// the last update id.
func completeAloneThenTogether(c *checker, done func(intake.Identity) intake.Settlement) int64 {
	const last = 1 + togetherRows
	calls := make([]*settleCall, 0, togetherRows)
	for id := int64(1); id <= last; id++ {
		c.mustAdd(id, 0)
		h := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		if id == 1 {
			if !c.settleOwned(h, done(h)) {
				c.fatalf("Settle(%s, completed at 50ms) of a live lease reported false", fmtID(h))
			}
			continue
		}
		calls = append(calls, &settleCall{id: h, st: done(h), want: true})
	}
	settleTogether(c, 0, calls)
	for _, call := range calls {
		if !call.got {
			c.errorf("concurrent Settle(%s, completed at 50ms) of a live lease reported false", fmtID(call.id))
		}
	}
	return last
}
