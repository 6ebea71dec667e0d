package storetest

import (
	"fmt"

	"github.com/tgrelay/tgrelay/intake"
)

// Parameters of concurrentRecordsSurviveRequeue: requeueRounds rounds of
// requeueRows rows.
const (
	requeueRounds  = 4
	requeueRows    = 12
	requeueFirstID = 9000
)

// concurrentRecordsSurviveRequeue: the record that rides on a concurrent
// abandonment or failure is kept byte for byte through a requeue and a
// later completion, as it would be one settlement at a time. Every row of
// a round is claimed at 1ms with a lease to 100ms; its attempt is
// abandoned (even rows) or failed (odd rows) with its record, all rows at
// once, so that a store that merges concurrent settlements (as the SQL
// stores do under load, keeping only a completion's record in its row) is
// judged on its merged path; then, one row at a time, it is requeued at
// 110ms, claimed again at 120ms and completed at 130ms with its record.
// Each history must read the first record, the requeue's mark, then the
// completion's record.
func concurrentRecordsSurviveRequeue(c *checker) {
	for round := range requeueRounds {
		first := int64(requeueFirstID + round*requeueRows)
		calls := make([]*settleCall, requeueRows)
		for i := range requeueRows {
			id := first + int64(i)
			c.mustAdd(id, 0)
			h := c.mustClaimOwned(id, claimOpts(1, 100, defaultMax), 1)
			rec := record(id, 1, h.ClaimID, intake.AttemptFailed, 1, 50)
			st := withRecord(abandoned(50, "gave up"), rec)
			if i%2 == 1 {
				st = withRecord(failedAt(50, 1000, "failed"), rec)
			}
			calls[i] = &settleCall{id: h, st: st, want: true}
		}
		settleTogether(c, round, calls)
		for _, call := range calls {
			id := call.id.UpdateID
			if !call.got {
				c.errorf("round %d: concurrent Settle(%s, %s at 50ms) of a live lease = false; want true", round, fmtID(call.id), call.st.State)
				continue
			}
			ok, err := c.admin.Requeue(c.ctx, id, at(110))
			c.failed(fmt.Sprintf("Requeue(%d, at 110ms)", id), err)
			if !ok {
				c.errorf("round %d: Requeue(%d, at 110ms) of a %s row reported false", round, id, call.st.State)
				continue
			}
			again := c.mustClaimOwned(id, claimOpts(120, 200, defaultMax), 1)
			done := record(id, 1, again.ClaimID, intake.AttemptCompleted, 120, 130)
			if !c.settleOwned(again, withRecord(completed(130), done)) {
				c.errorf("round %d: Settle(%s, completed at 130ms) of a live lease reported false", round, fmtID(again))
				continue
			}
			mark := intake.AttemptRecord{UpdateID: id, Attempt: 0, Outcome: intake.AttemptRequeued, StartedAt: at(110), EndedAt: at(110), ClaimID: call.id.ClaimID}
			c.expectHistory(fmt.Sprintf("round %d, after a concurrent %s settlement, a requeue and a completion", round, call.st.State),
				id, []intake.AttemptRecord{*call.st.Attempt, mark, done})
		}
	}
}
