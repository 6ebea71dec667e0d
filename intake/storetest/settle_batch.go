package storetest

import (
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// Concurrent settlement parameters: settleRounds rounds of settleRows
// rows, three of each kind, all settled at once, so that a store that
// merges concurrent settlements into one statement (as the SQL stores do
// under load) is judged on its merged path, where a fence dropped from the
// statement would otherwise go unseen: one settlement at a time takes the
// single-row path.
const (
	settleRounds  = 4
	settleKinds   = 12 // the kinds of row of concurrentSettles
	settleRows    = 3 * settleKinds
	settleFirstID = 3000
)

// settleCall is one Settle of a concurrent round, and what it must answer.
type settleCall struct {
	id   intake.Identity
	st   intake.Settlement
	want bool // must apply; false: must be refused
	// either marks the two settlements of one row of which exactly one
	// must apply, whichever comes first.
	either bool
	got    bool
}

// concurrentSettles: concurrent settlements are each judged on their own
// identity and lease, as they would be one at a time. Every row of a
// round was claimed at 1ms with a lease to 100ms. Half the rows get two
// settlements at once: its holder's with a stale claim id, a wrong
// attempt, a time past the lease, or a second holder's settlement; the
// other half one, right or wrong, some without a record. Each
// kind of state is settled, with the attempt's record riding on it: a
// refused settlement changes nothing and records nothing.
func concurrentSettles(c *checker) {
	for round := range settleRounds {
		first := int64(settleFirstID + round*settleRows)
		holders := make([]intake.Identity, settleRows)
		for i := range settleRows {
			id := first + int64(i)
			c.mustAdd(id, 0)
			holders[i] = c.mustClaimOwned(id, claimOpts(1, 100, defaultMax), 1)
		}
		// rows[i] are the settlements of row i, made at once with all the
		// others: two for some rows, one for the rest (a store may merge a
		// row's settlement with other rows' only when it is the row's one
		// write in flight).
		rows := make([][]*settleCall, settleRows)
		for i, h := range holders {
			rec := func(o intake.AttemptOutcome, endMS int64) intake.AttemptRecord {
				return record(h.UpdateID, 1, h.ClaimID, o, 1, endMS)
			}
			stale := wrongClaim(h)
			nextAttempt := h
			nextAttempt.Attempt++
			switch i % settleKinds {
			case 0: // completed by its holder (with an error text, which a completion clears); a stale claim id completes too
				done := completed(50)
				done.Error = "not kept: completed"
				rows[i] = []*settleCall{
					{id: h, st: withRecord(done, rec(intake.AttemptCompleted, 50)), want: true},
					{id: stale, st: withRecord(completed(50), rec(intake.AttemptCompleted, 50))}}
			case 1: // failed by its holder; a later attempt abandons it
				rows[i] = []*settleCall{
					{id: h, st: withRecord(failedAt(50, 200, "boom"), rec(intake.AttemptFailed, 50)), want: true},
					{id: nextAttempt, st: withRecord(abandoned(50, "not mine"), rec(intake.AttemptFailed, 50))}}
			case 2: // abandoned by its holder; the holder again, past its lease
				rows[i] = []*settleCall{
					{id: h, st: withRecord(abandoned(50, "gave up"), rec(intake.AttemptFailed, 50)), want: true},
					{id: h, st: withRecord(completed(101), rec(intake.AttemptCompleted, 101))}}
			case 3: // only refusals: past the lease, and a stale claim id
				rows[i] = []*settleCall{
					{id: h, st: withRecord(completed(101), rec(intake.AttemptCompleted, 101))},
					{id: stale, st: withRecord(failedAt(50, 200, "stale"), rec(intake.AttemptFailed, 50))}}
			case 4: // the holder twice: exactly one applies
				rows[i] = []*settleCall{
					{id: h, st: withRecord(completed(50), rec(intake.AttemptCompleted, 50)), either: true},
					{id: h, st: withRecord(failedAt(60, 200, "twice"), rec(intake.AttemptFailed, 60)), either: true}}
			case 5: // at the lease's last instant; a wrong attempt fails it
				rows[i] = []*settleCall{
					{id: h, st: withRecord(completed(100), rec(intake.AttemptCompleted, 100)), want: true},
					{id: nextAttempt, st: withRecord(failedAt(50, 200, "not mine"), rec(intake.AttemptFailed, 50))}}
			case 6: // alone: failed by its holder, without a record
				rows[i] = []*settleCall{{id: h, st: failedAt(50, 300, "alone"), want: true}}
			case 7: // alone: a stale claim id
				rows[i] = []*settleCall{{id: stale, st: withRecord(completed(50), rec(intake.AttemptCompleted, 50))}}
			case 8: // alone: abandoned by its holder
				rows[i] = []*settleCall{{id: h, st: withRecord(abandoned(50, "alone, gave up"), rec(intake.AttemptFailed, 50)), want: true}}
			case 9: // alone: a later attempt
				rows[i] = []*settleCall{{id: nextAttempt, st: withRecord(completed(50), rec(intake.AttemptCompleted, 50))}}
			case 10: // alone: completed by its holder at the lease's last instant, without a record, with an error text a completion clears
				done := completed(100)
				done.Error = "not kept: completed"
				rows[i] = []*settleCall{{id: h, st: done, want: true}}
			case 11: // alone: the holder, past its lease
				rows[i] = []*settleCall{{id: h, st: withRecord(failedAt(101, 300, "late"), rec(intake.AttemptFailed, 101))}}
			}
		}
		settleTogether(c, round, slices.Concat(rows...))
		checkSettleRound(c, round, holders, rows)
	}
}

// checkSettleRound checks what a round of concurrentSettles answered and
// left: each row as the settlement that applied left it (or as its claim
// did), and its history holding that settlement's record alone.
func checkSettleRound(c *checker, round int, holders []intake.Identity, rows [][]*settleCall) {
	applied := map[int64]*settleCall{}
	for _, calls := range rows {
		for _, call := range calls {
			if !call.either && call.got != call.want {
				c.errorf("round %d: concurrent Settle(%s, %s at %s) = %v; want %v", round, fmtID(call.id), call.st.State, offset(call.st.At), call.got, call.want)
			}
			if call.got {
				applied[call.id.UpdateID] = call
			}
		}
		if len(calls) == 2 && calls[0].either && calls[0].got == calls[1].got {
			c.errorf("round %d: two concurrent settlements by the holder %s both reported %v; exactly one must apply", round, fmtID(calls[0].id), calls[0].got)
		}
	}
	for _, h := range holders {
		call := applied[h.UpdateID]
		if got := c.owns(h, 60); got != (call == nil) {
			c.errorf("round %d: after the concurrent settlements Owns(%s, at 60ms) = %v; want %v", round, fmtID(h), got, call == nil)
		}
		if c.admin == nil {
			continue
		}
		want := wantRow{state: intake.StateProcessing, attempts: 1, claimID: h.ClaimID, dueMS: 100, settledMS: -1}
		var history []intake.AttemptRecord
		if call != nil {
			st := call.st
			want.state = st.State
			if st.State != intake.StateCompleted { // a completed row has no error
				want.errText = st.Error
			}
			switch st.State {
			case intake.StateFailed:
				want.dueMS = st.RetryAt.Sub(at(0)).Milliseconds()
			default:
				want.ignoreDue = true
				want.settledMS = st.At.Sub(at(0)).Milliseconds()
			}
			if st.Attempt != nil {
				history = []intake.AttemptRecord{*st.Attempt}
			}
		}
		c.expectRow(fmt.Sprintf("round %d, after the concurrent settlements", round), h.UpdateID, want)
		c.expectHistory(fmt.Sprintf("round %d, after the concurrent settlements", round), h.UpdateID, history)
	}
}

// Parameters of concurrentSettlesKeepOrder: orderRounds rounds of
// orderRows rows, each on its second attempt when settled.
const (
	orderRounds  = 4
	orderRows    = 16
	orderFirstID = 5000
)

// concurrentSettlesKeepOrder: a record that rides on a concurrent
// settlement goes after the records the update already has, as it would
// one settlement at a time. Every row's first attempt failed, one at a
// time, with its record; its second attempt then completes (even rows) or
// fails again (odd rows) with its record, all rows at once, so that a
// store that merges concurrent settlements (as the SQL stores do under
// load, where a completion keeps its record in its row) is judged on its
// merged path: each history must read attempt 1, then attempt 2.
func concurrentSettlesKeepOrder(c *checker) {
	for round := range orderRounds {
		first := int64(orderFirstID + round*orderRows)
		want := make([][]intake.AttemptRecord, orderRows)
		seconds := make([]intake.Identity, orderRows)
		for i := range orderRows {
			id := first + int64(i)
			c.mustAdd(id, 0)
			one := c.mustClaimOwned(id, claimOpts(1, 10, defaultMax), 1)
			rec1 := record(id, 1, one.ClaimID, intake.AttemptFailed, 1, 5)
			if !c.settleOwned(one, withRecord(failedAt(5, 20, "first"), rec1)) {
				c.fatalf("round %d: Settle(%s, failed at 5ms) of a live lease reported false", round, fmtID(one))
			}
			seconds[i] = c.mustClaimOwned(id, claimOpts(20, 100, defaultMax), 2)
			want[i] = []intake.AttemptRecord{rec1}
		}
		calls := make([]*settleCall, orderRows)
		for i, h := range seconds {
			var call settleCall
			if i%2 == 0 {
				rec := record(h.UpdateID, 2, h.ClaimID, intake.AttemptCompleted, 20, 50)
				call = settleCall{id: h, st: withRecord(completed(50), rec), want: true}
			} else {
				rec := record(h.UpdateID, 2, h.ClaimID, intake.AttemptFailed, 20, 50)
				call = settleCall{id: h, st: withRecord(failedAt(50, 300, "second"), rec), want: true}
			}
			want[i] = append(want[i], *call.st.Attempt)
			calls[i] = &call
		}
		settleTogether(c, round, calls)
		for i, call := range calls {
			if !call.got {
				c.errorf("round %d: concurrent Settle(%s, %s at %s) of a live lease = false; want true", round, fmtID(call.id), call.st.State, offset(call.st.At))
				continue
			}
			c.expectHistory(fmt.Sprintf("round %d, after the concurrent settlements of second attempts", round), seconds[i].UpdateID, want[i])
		}
	}
}

// settleTogether makes the settlements of calls at once, released
// together, and records each one's answer in its got.
func settleTogether(c *checker, round int, calls []*settleCall) {
	var fns []func()
	for _, call := range calls {
		fns = append(fns, func() {
			ok, err := c.store.Settle(c.ctx, call.id, call.st)
			if err != nil {
				c.errorf("round %d: a concurrent Settle(%s, %s at %s) returned an error: %v", round, fmtID(call.id), call.st.State, offset(call.st.At), err)
			}
			call.got = ok
		})
	}
	together(c, fns...)
}
