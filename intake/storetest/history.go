package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// The cases of this file pin down the attempt history of an
// [intake.AdminStore]: every record kept byte for byte and in order,
// through later attempts, a completion and a requeue (which leaves its
// mark), and gone with its update when the update is pruned.

func historyCases() []testCase {
	return []testCase{
		{name: "RecordsKept", rule: "RecordAttempt keeps every record of an update byte for byte, in the order recorded, and only for a stored update", needs: capAdmin, run: historyKept},
		{name: "SurvivesSuccessAndRequeue", rule: "the history survives later attempts, a completion and a requeue, which appends its mark", needs: capAdmin, run: historySurvives},
		{name: "PrunedWithUpdate", rule: "Prune deletes an update's history with its row, and only that", needs: capAdmin, run: historyPruned},
		{name: "RecordedWithSettlement", rule: "a settlement carrying its attempt's record (Settlement.Attempt) appends it, under the settling identity, only when the settlement applies", needs: capAdmin, run: historyWithSettlement},
		{name: "BadRecordRefused", rule: "a record outside AttemptRecord.Validate is refused with intake.ErrInvalidArgument and records nothing", needs: capAdmin, run: historyBadRecord},
		{name: "RecordsCopied", rule: historyCopiesRule, needs: capAdmin, run: historyCopies},
		{name: "RecordTimesKept", rule: recordTimesKeptRule, needs: capAdmin, run: recordTimesKept},
	}
}

// record returns a full record of attempt n of update id, ended with o at
// endMS, whose texts name the attempt.
func record(id int64, n int, claim string, o intake.AttemptOutcome, startMS, endMS int64) intake.AttemptRecord {
	rec := intake.AttemptRecord{
		UpdateID: id, Attempt: n, ClaimID: claim, Process: fmt.Sprintf("proc-%d", n),
		StartedAt: at(startMS), EndedAt: at(endMS), Outcome: o,
	}
	if o != intake.AttemptCompleted {
		rec.Error = fmt.Sprintf("attempt %d: app answered 500 ✗", n)
	}
	rec.Status = 200
	if o == intake.AttemptFailed {
		rec.Status = 500
	}
	rec.Header = http.Header{"Content-Type": {"application/json"}, "Retry-After": {fmt.Sprint(n)}}
	// Bytes a text column would mangle: a NUL, invalid UTF-8, a full-size
	// body on the first attempt.
	rec.Body = append([]byte(fmt.Sprintf(`{"attempt":%d}`, n)), 0, 0xff, 0xfe)
	if n == 1 {
		rec.Body = bytes.Repeat([]byte{'x', 0}, intake.MaxAttemptBody/2)
	}
	return rec
}

func (c *checker) recordAttempt(rec intake.AttemptRecord) bool {
	ok, err := c.admin.RecordAttempt(c.ctx, rec)
	c.failed(fmt.Sprintf("RecordAttempt(%d, attempt %d)", rec.UpdateID, rec.Attempt), err)
	return ok
}

func (c *checker) attempts(id int64) []intake.AttemptRecord {
	recs, err := c.admin.Attempts(c.ctx, id)
	c.failed(fmt.Sprintf("Attempts(%d)", id), err)
	return recs
}

// sameRecord describes how got differs from want, or returns "".
func sameRecord(got, want intake.AttemptRecord) string {
	var d []string
	diff := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s %v, want %v", field, g, w)) }
	if got.UpdateID != want.UpdateID {
		diff("UpdateID", got.UpdateID, want.UpdateID)
	}
	if got.Attempt != want.Attempt {
		diff("Attempt", got.Attempt, want.Attempt)
	}
	if got.ClaimID != want.ClaimID {
		diff("ClaimID", fmt.Sprintf("%q", got.ClaimID), fmt.Sprintf("%q", want.ClaimID))
	}
	if got.Process != want.Process {
		diff("Process", fmt.Sprintf("%q", got.Process), fmt.Sprintf("%q", want.Process))
	}
	if !got.StartedAt.Equal(want.StartedAt) {
		diff("StartedAt", offset(got.StartedAt), offset(want.StartedAt))
	}
	if !got.EndedAt.Equal(want.EndedAt) {
		diff("EndedAt", offset(got.EndedAt), offset(want.EndedAt))
	}
	if got.Outcome != want.Outcome {
		diff("Outcome", got.Outcome, want.Outcome)
	}
	if got.Error != want.Error {
		diff("Error", fmt.Sprintf("%q", got.Error), fmt.Sprintf("%q", want.Error))
	}
	if got.Status != want.Status {
		diff("Status", got.Status, want.Status)
	}
	if !maps.EqualFunc(got.Header, want.Header, slices.Equal) {
		diff("Header", got.Header, want.Header)
	}
	if !bytes.Equal(got.Body, want.Body) {
		diff("Body", fmt.Sprintf("%d bytes %.40q", len(got.Body), got.Body), fmt.Sprintf("%d bytes %.40q", len(want.Body), want.Body))
	}
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprint(d)
}

// expectHistory reports every way update id's history differs from want.
func (c *checker) expectHistory(when string, id int64, want []intake.AttemptRecord) {
	got := c.attempts(id)
	if len(got) != len(want) {
		var outcomes []string
		for _, r := range got {
			outcomes = append(outcomes, fmt.Sprintf("%d:%s", r.Attempt, r.Outcome))
		}
		c.errorf("%s: Attempts(%d) listed %d records %v, want %d", when, id, len(got), outcomes, len(want))
		return
	}
	for i := range want {
		if d := sameRecord(got[i], want[i]); d != "" {
			c.errorf("%s: Attempts(%d) record %d: %s", when, id, i, d)
		}
	}
}

// historyKept: records are kept whole and in order; a record for an update
// without a row reports false and is not kept; the records Attempts
// returns are the caller's.
func historyKept(c *checker) {
	c.mustAdd(1, 0)
	c.mustAdd(2, 0)
	want := []intake.AttemptRecord{
		record(1, 1, "c1", intake.AttemptFailed, 0, 10),
		record(1, 2, "c2", intake.AttemptLeaseLost, 20, 30),
		record(1, 3, "c3", intake.AttemptStale, 40, 50),
		record(1, 4, "c4", intake.AttemptCompleted, 60, 70),
	}
	// Recorded out of attempt order: the order recorded is what counts.
	want[1], want[2] = want[2], want[1]
	other := record(2, 1, "d1", intake.AttemptCrashed, 5, 6)
	for i, rec := range want {
		if !c.recordAttempt(rec) {
			c.fatalf("RecordAttempt(1, attempt %d) reported false for a stored update", rec.Attempt)
		}
		if i == 1 && !c.recordAttempt(other) {
			c.fatalf("RecordAttempt(2, attempt 1) reported false for a stored update")
		}
	}
	if c.recordAttempt(record(9, 1, "e1", intake.AttemptFailed, 0, 1)) {
		c.errorf("RecordAttempt(9, attempt 1) reported true for an update with no row")
	}
	if recs := c.attempts(9); len(recs) != 0 {
		c.errorf("Attempts(9) listed %d records of an update with no row, want none", len(recs))
	}
	c.expectHistory("after four records of update 1", 1, want)
	c.expectHistory("after one record of update 2", 2, []intake.AttemptRecord{other})
	got := c.attempts(1)
	if len(got) > 0 && len(got[0].Body) > 0 {
		got[0].Body[0] ^= 0xff
		got[0].Header.Set("Content-Type", "changed")
		c.expectHistory("after the caller changed the body and header Attempts returned", 1, want)
	}
}

// historySurvives: the records of failed attempts stay through a
// completion and a requeue; the requeue appends its mark (attempt 0, the
// row's last claim id, at the requeue's time), and the attempts after it
// are recorded after it.
func historySurvives(c *checker) {
	c.mustAdd(1, 0)
	claimOf := func(n int, nowMS int64) string {
		return c.mustClaimOwned(1, claimOpts(nowMS, nowMS+100, 5), n).ClaimID
	}
	settle := func(n int, claim string, s intake.Settlement) {
		if !c.settleOwned(intake.Identity{UpdateID: 1, Attempt: n, ClaimID: claim}, s) {
			c.fatalf("the settlement of attempt %d as %s was refused", n, s.State)
		}
	}
	var want []intake.AttemptRecord
	c1 := claimOf(1, 0)
	settle(1, c1, failedAt(10, 20, "one"))
	want = append(want, record(1, 1, c1, intake.AttemptFailed, 0, 10))
	c.recordAttempt(want[0])
	c2 := claimOf(2, 20)
	settle(2, c2, abandoned(30, "two"))
	want = append(want, record(1, 2, c2, intake.AttemptFailed, 20, 30))
	c.recordAttempt(want[1])
	ok, err := c.admin.Requeue(c.ctx, 1, at(40))
	c.failed("Requeue(1, at 40ms)", err)
	if !ok {
		c.fatalf("Requeue(1, at 40ms) of an abandoned row reported false")
	}
	mark := intake.AttemptRecord{UpdateID: 1, Attempt: 0, Outcome: intake.AttemptRequeued, StartedAt: at(40), EndedAt: at(40), ClaimID: c2}
	want = append(want, mark)
	c.expectHistory("after two failed attempts and a requeue", 1, want)
	c3 := claimOf(1, 50)
	settle(1, c3, completed(60))
	want = append(want, record(1, 1, c3, intake.AttemptCompleted, 50, 60))
	c.recordAttempt(want[3])
	c.expectHistory("after the requeued update completed", 1, want)
	// A Requeue refused (a completed row) leaves no mark.
	if ok, err := c.admin.Requeue(c.ctx, 1, at(70)); err != nil || ok {
		c.errorf("Requeue(1, at 70ms) of a completed row = %v, %v; want false, nil", ok, err)
	}
	c.expectHistory("after a refused requeue", 1, want)
}

// historyPruned: pruning an update deletes its history, and only its
// history; the same update id added again starts with none.
func historyPruned(c *checker) {
	for _, id := range []int64{1, 2} {
		c.mustAdd(id, 0)
		c.mustClaim(id, claimOpts(0, 100, defaultMax), 1)
	}
	c.settle(1, 1, completed(10))
	c.settle(2, 1, completed(30))
	r1 := record(1, 1, "c1", intake.AttemptCompleted, 0, 10)
	r2 := record(2, 1, "c2", intake.AttemptCompleted, 0, 30)
	c.recordAttempt(r1)
	c.recordAttempt(r2)
	// Update 3 was requeued, which leaves its mark in the history, and
	// completed after: the mark goes with the rest.
	c.mustAdd(3, 0)
	c.mustClaim(3, claimOpts(0, 100, defaultMax), 1)
	c.settle(3, 1, abandoned(5, "gave up"))
	if ok, err := c.admin.Requeue(c.ctx, 3, at(6)); err != nil || !ok {
		c.fatalf("Requeue(3) of an abandoned row = %v, %v; want true", ok, err)
	}
	c.mustClaim(3, claimOpts(7, 100, defaultMax), 1)
	c.settle(3, 1, completed(12))
	if recs := c.attempts(3); len(recs) == 0 {
		c.errorf("Attempts(3) after a requeue listed no record; want the requeue's mark")
	}
	if n := c.prune(20); n != 2 {
		c.fatalf("Prune(before 20ms) deleted %d rows, want 2 (updates 1 and 3, settled at 10 and 12ms)", n)
	}
	for _, id := range []int64{1, 3} {
		if recs := c.attempts(id); len(recs) != 0 {
			c.errorf("Attempts(%d) listed %d records after update %d was pruned, want none", id, len(recs), id)
		}
	}
	c.expectHistory("after update 1 was pruned", 2, []intake.AttemptRecord{r2})
	c.mustAdd(1, 40)
	if recs := c.attempts(1); len(recs) != 0 {
		c.errorf("Attempts(1) listed %d records after update 1 was pruned and added again, want none", len(recs))
	}
}

// withRecord returns s carrying rec, the attempt's record.
func withRecord(s intake.Settlement, rec intake.AttemptRecord) intake.Settlement {
	s.Attempt = &rec
	return s
}

// historyWithSettlement: a record that rides on a settlement is kept like
// one RecordAttempt keeps, with the identity's update, attempt and claim
// id whatever the record says, in the order recorded with the others; a
// refused settlement (a stale identity, a lapsed lease, an attempt settled
// already) records nothing; an invalid record refuses the settlement
// itself.
func historyWithSettlement(c *checker) {
	c.mustAdd(1, 0)
	// The record names another update, attempt and claim: the identity's
	// are what a store keeps.
	wrong := func(rec intake.AttemptRecord) intake.AttemptRecord {
		rec.UpdateID, rec.Attempt, rec.ClaimID = 99, 7, "not-the-claim"
		return rec
	}
	id1 := c.mustClaimOwned(1, claimOpts(0, 100, 5), 1)
	stale := id1
	stale.ClaimID += "-stale"
	if ok, err := c.store.Settle(c.ctx, stale, withRecord(failedAt(10, 20, "one"), record(1, 1, stale.ClaimID, intake.AttemptFailed, 0, 10))); err != nil || ok {
		c.errorf("Settle with a stale claim id and a record = %v, %v; want false, nil", ok, err)
	}
	bad := record(1, 1, id1.ClaimID, intake.AttemptFailed, 0, 10)
	bad.Outcome = "lost"
	if ok, err := c.store.Settle(c.ctx, id1, withRecord(failedAt(10, 20, "one"), bad)); !errors.Is(err, intake.ErrInvalidArgument) || ok {
		c.errorf("Settle with an invalid record = %v, %v; want false and an error wrapping intake.ErrInvalidArgument", ok, err)
	}
	c.expectHistory("after a stale settlement and one with an invalid record", 1, nil)
	first := record(1, 1, id1.ClaimID, intake.AttemptFailed, 0, 10)
	if !c.settleOwned(id1, withRecord(failedAt(10, 20, "one"), wrong(first))) {
		c.fatalf("the settlement of attempt 1 as failed, with its record, was refused")
	}
	// The same attempt settled again: refused, and not recorded twice.
	if ok, err := c.store.Settle(c.ctx, id1, withRecord(failedAt(11, 20, "again"), first)); err != nil || ok {
		c.errorf("a second Settle of attempt 1 = %v, %v; want false, nil", ok, err)
	}
	c.expectHistory("after attempt 1 failed with its record", 1, []intake.AttemptRecord{first})
	id2 := c.mustClaimOwned(1, claimOpts(20, 30, 5), 2)
	// Its lease ended at 30ms: a settlement at 31ms is refused.
	if ok, err := c.store.Settle(c.ctx, id2, withRecord(completed(31), record(1, 2, id2.ClaimID, intake.AttemptCompleted, 20, 31))); err != nil || ok {
		c.errorf("Settle after the lease ended, with a record = %v, %v; want false, nil", ok, err)
	}
	c.expectHistory("after a settlement past its lease", 1, []intake.AttemptRecord{first})
	id3 := c.mustClaimOwned(1, claimOpts(40, 140, 5), 3)
	third := record(1, 3, id3.ClaimID, intake.AttemptCompleted, 40, 50)
	if !c.settleOwned(id3, withRecord(completed(50), wrong(third))) {
		c.fatalf("the settlement of attempt 3 as completed, with its record, was refused")
	}
	c.expectHistory("after attempt 3 completed with its record", 1, []intake.AttemptRecord{first, third})
	// Attempt 2's handler returns only now, and its record comes after
	// the completion's: the order recorded, even where a store keeps a
	// completing record apart from the others.
	late := record(1, 2, id2.ClaimID, intake.AttemptLeaseLost, 20, 60)
	if !c.recordAttempt(late) {
		c.fatalf("RecordAttempt(1, attempt 2) after the update completed reported false")
	}
	c.expectHistory("after attempt 2's record came in after the completion", 1, []intake.AttemptRecord{first, third, late})
}

// historyBadRecord: invalid records are refused and record nothing.
func historyBadRecord(c *checker) {
	c.mustAdd(1, 0)
	good := record(1, 1, "c1", intake.AttemptFailed, 0, 10)
	bad := map[string]func(*intake.AttemptRecord){
		"outcome lost":               func(r *intake.AttemptRecord) { r.Outcome = "lost" },
		"attempt -1":                 func(r *intake.AttemptRecord) { r.Attempt = -1 },
		"no EndedAt":                 func(r *intake.AttemptRecord) { r.EndedAt = time.Time{} },
		"body over MaxAttemptBody":   func(r *intake.AttemptRecord) { r.Body = make([]byte, intake.MaxAttemptBody+1) },
		"error over MaxAttemptError": func(r *intake.AttemptRecord) { r.Error = string(make([]byte, intake.MaxAttemptError+1)) },
	}
	for _, name := range slices.Sorted(maps.Keys(bad)) {
		rec := good
		bad[name](&rec)
		ok, err := c.admin.RecordAttempt(c.ctx, rec)
		if !errors.Is(err, intake.ErrInvalidArgument) {
			c.errorf("RecordAttempt with %s = %v, %v; want an error wrapping intake.ErrInvalidArgument", name, ok, err)
		}
	}
	if recs := c.attempts(1); len(recs) != 0 {
		c.errorf("Attempts(1) listed %d records after only invalid ones were offered, want none", len(recs))
	}
}
