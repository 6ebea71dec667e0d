package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// historyCopiesRule is the rule of historyCopies.
const historyCopiesRule = "an attempt record the store keeps is its own: writing, after the call, into the body or header values of a record passed to RecordAttempt or carried by a Settle, or of one Attempts returned, changes nothing stored"

// historyCopies: the history keeps each record byte for byte until its
// update is pruned, so a store copies a record's body and header values on
// the way in and on the way out, as it copies update bodies. A store that
// copied the header map but kept its value slices, or kept the caller's
// body, would show a record the runner wrote into after recording it (a
// reused buffer) changed. Update 1 gets a record through RecordAttempt
// and another through a failed settlement carrying it; the caller then
// overwrites, in place, every body byte and header value of both, and of
// the records Attempts returned: the history still lists both as they
// were recorded.
func historyCopies(c *checker) {
	c.mustAdd(1, 0)
	direct := record(1, 1, "c1", intake.AttemptLeaseLost, 0, 5)
	want := []intake.AttemptRecord{cloneAttemptRecord(direct)}
	if !c.recordAttempt(direct) {
		c.fatalf("RecordAttempt(1, attempt 1) reported false for a stored update")
	}
	scribbleRecord(&direct)
	c.expectHistory("after the caller wrote into the body and header values of the record it passed to RecordAttempt", 1, want)

	id := c.mustClaimOwned(1, claimOpts(10, 100, defaultMax), 1)
	carried := record(1, id.Attempt, id.ClaimID, intake.AttemptFailed, 10, 20)
	st := failedAt(20, 30, "attempt 1 failed")
	st.Attempt = &carried
	if !c.settleOwned(id, st) {
		c.fatalf("Settle(%s, failed at 20ms) of a live lease reported false", fmtID(id))
	}
	want = append(want, cloneAttemptRecord(carried))
	scribbleRecord(&carried)
	c.expectHistory("after the caller wrote into the body and header values of the record its Settle carried", 1, want)

	got := c.attempts(1)
	for i := range got {
		scribbleRecord(&got[i])
	}
	c.expectHistory("after the caller wrote into the body and header values of the records Attempts returned", 1, want)
}

// cloneAttemptRecord returns rec with its own body and header values.
func cloneAttemptRecord(rec intake.AttemptRecord) intake.AttemptRecord {
	if rec.Body != nil {
		rec.Body = append([]byte(nil), rec.Body...)
	}
	rec.Header = rec.Header.Clone()
	return rec
}

// scribbleRecord overwrites, in place, every byte of rec's body and every
// header value, leaving the slices and the header map where they are.
func scribbleRecord(rec *intake.AttemptRecord) {
	scribble(rec.Body)
	for _, vs := range rec.Header {
		for i := range vs {
			vs[i] = "scribbled"
		}
	}
}
