package storetest

import (
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
)

// Parameters of concurrentSettlesOfEndedAttempts: endedRounds rounds of
// endedRows rows, endedKinds kinds of row each.
const (
	endedRounds  = 4
	endedKinds   = 8
	endedRows    = 3 * endedKinds
	endedFirstID = 7000
)

// concurrentSettlesOfEndedAttempts: an attempt that already ended is not
// settled again by a concurrent settlement either, however live its lease
// end still looks, as it would not be one at a time. Every row of a round
// was claimed at 1ms with a lease to 100ms and its attempt ended alone at
// 10ms (completed, failed with its retry at 200ms, abandoned, or
// exhausted); then its holder settles it again, still inside that lease,
// every row at once, so that a store that merges concurrent settlements
// (as the SQL stores do under load) is judged on its merged path, where a
// state condition dropped from the merged statement would otherwise go
// unseen: one settlement at a time takes the single-row path. Every second
// settlement is refused, records nothing, and leaves its row as the first
// one left it.
func concurrentSettlesOfEndedAttempts(c *checker) {
	for round := range endedRounds {
		first := int64(endedFirstID + round*endedRows)
		holders := make([]intake.Identity, endedRows)
		wants := make([]wantRow, endedRows)
		histories := make([][]intake.AttemptRecord, endedRows)
		ends := make([]string, endedRows)
		calls := make([]*settleCall, endedRows)
		for i := range endedRows {
			id := first + int64(i)
			c.mustAdd(id, 0)
			h := c.mustClaimOwned(id, claimOpts(1, 100, defaultMax), 1)
			holders[i] = h
			rec := func(o intake.AttemptOutcome, endMS int64) intake.AttemptRecord {
				return record(id, 1, h.ClaimID, o, 1, endMS)
			}
			want := wantRow{attempts: 1, claimID: h.ClaimID, settledMS: -1}
			var firstSt intake.Settlement
			switch i % endedKinds / 2 {
			case 0:
				firstSt = withRecord(completed(10), rec(intake.AttemptCompleted, 10))
				want.state, want.ignoreDue, want.settledMS = intake.StateCompleted, true, 10
			case 1:
				firstSt = withRecord(failedAt(10, 200, "first"), rec(intake.AttemptFailed, 10))
				want.state, want.dueMS, want.errText = intake.StateFailed, 200, "first"
			case 2:
				firstSt = withRecord(abandoned(10, "first"), rec(intake.AttemptFailed, 10))
				want.state, want.ignoreDue, want.settledMS, want.errText = intake.StateAbandoned, true, 10, "first"
			case 3:
				want.state, want.dueMS, want.errText, want.unacknowledged = intake.StateAbandoned, 10, "first", true
			}
			if firstSt.State != "" {
				if !c.settleOwned(h, firstSt) {
					c.fatalf("round %d: Settle(%s, %s at 10ms) of a live lease reported false", round, fmtID(h), firstSt.State)
				}
				histories[i] = []intake.AttemptRecord{*firstSt.Attempt}
			} else if !c.exhaust(h, 10, "first") {
				c.fatalf("round %d: Exhaust(%s, at 10ms) of a live lease reported false", round, fmtID(h))
			}
			wants[i], ends[i] = want, string(firstSt.State)
			if firstSt.State == "" {
				ends[i] = "exhausted"
			}
			// The second settlement: the other kind of end, inside the
			// lease, with or without a record.
			var again intake.Settlement
			switch i % 3 {
			case 0:
				again = completed(50)
			case 1:
				again = failedAt(50, 300, "again")
			case 2:
				again = abandoned(50, "again")
			}
			if i%2 == 1 {
				o := intake.AttemptCompleted
				if again.State != intake.StateCompleted {
					o = intake.AttemptFailed
				}
				again = withRecord(again, rec(o, 50))
			}
			calls[i] = &settleCall{id: h, st: again}
		}
		settleTogether(c, round, calls)
		for i, call := range calls {
			if call.got {
				c.errorf("round %d: concurrent Settle(%s, %s at 50ms) of an attempt that ended %s at 10ms = true; want false",
					round, fmtID(call.id), call.st.State, ends[i])
			}
		}
		for i, h := range holders {
			if c.admin != nil {
				when := fmt.Sprintf("round %d, after the concurrent settlements of ended attempts", round)
				c.expectRow(when, h.UpdateID, wants[i])
				c.expectHistory(when, h.UpdateID, histories[i])
			}
			// What a core store shows: only the failed rows are claimable
			// at their retry.
			_, ok := c.claimOwned(h.UpdateID, claimOpts(200, 300, 3))
			if want := wants[i].state == intake.StateFailed; ok != want {
				c.errorf("round %d: after the concurrent settlements of ended attempts, Claim(%d, now 200ms) = %v; want %v (its attempt ended %s at 10ms)",
					round, h.UpdateID, ok, want, ends[i])
			}
		}
	}
}
