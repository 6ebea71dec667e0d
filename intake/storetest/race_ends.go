package storetest

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"

	"github.com/tgrelay/tgrelay/intake"
)

// Races of the calls that end or release something: each may apply once,
// so of racers identical calls released together (see together) exactly
// one applies, and a count sums to what there was. A store that checks in
// one statement and writes in another lets several apply, each reporting
// the write it believes it made. Every case runs fresh rounds, so that
// the window between the two statements is hit in (almost) every run.

// renewRacingReclaim: the holder renews at the last millisecond of its
// lease while another worker reclaims the lapsed lease a millisecond
// later. Whichever runs first wins, never both: a renewal first keeps the
// lease live to 300ms, so the claim finds it live; a claim first leaves
// the holder a stale identity, which can no longer renew. A renewal that
// checks the lease in one statement and extends it in another lets both
// succeed, and tells the holder it keeps a row another claim has taken.
func renewRacingReclaim(c *checker) {
	c.endsRacingReclaim(concurrentFirstID, []raceEnd{{"Renew(to 300ms, now at the lease end)", func(id intake.Identity) (bool, error) {
		return c.store.Renew(c.ctx, id, at(300), at(100))
	}}})
}

// endRounds is how many rounds each race of identical calls runs.
const endRounds = barrierRounds / 4

// winners runs call from racers goroutines released together and returns
// how many reported true. The first error is reported and ends the
// case; panics are reported.
func (c *checker) winners(what string, call func(racer int) (bool, error)) int {
	var n, errs atomic.Int32
	fns := make([]func(), racers)
	for i := range fns {
		fns[i] = func() {
			ok, err := call(i)
			if err != nil {
				if errs.Add(1) == 1 { // one report for the case
					c.errorf("a concurrent %s returned an error: %v", what, err)
				}
				return
			}
			if ok {
				n.Add(1)
			}
		}
	}
	together(c, fns...)
	if errs.Load() > 0 {
		runtime.Goexit() // reported
	}
	return int(n.Load())
}

// concurrentAcks: an exhaustion is acknowledged only once, so of
// identical acknowledgements released together exactly one reports true,
// and the exhaustion is no longer listed.
func concurrentAcks(c *checker) {
	for round := range endRounds {
		id := int64(concurrentFirstID + round)
		c.mustAdd(id, 0)
		holder := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		if !c.exhaust(holder, 50, "exhausted") {
			c.fatalf("Exhaust(%s, at 50ms) of a live claim reported false", fmtID(holder))
		}
		if n := c.winners(fmt.Sprintf("AcknowledgeExhaustion(%s, at 60ms)", fmtID(holder)), func(int) (bool, error) {
			return c.store.AcknowledgeExhaustion(c.ctx, holder, at(60))
		}); n != 1 {
			c.errorf("round %d: %d of %d concurrent AcknowledgeExhaustion(%s) calls reported true; exactly one must", round, n, racers, fmtID(holder))
		}
		if _, ok := c.findExhaustion(id); ok {
			c.errorf("round %d: update %d is still listed as unacknowledged after concurrent acknowledgements", round, id)
		}
	}
}

// concurrentRequeues: a requeue takes only a failed or abandoned row, and
// the row it leaves is pending, so of identical requeues released together
// exactly one reports true, and the history holds exactly one requeue
// mark for it.
func concurrentRequeues(c *checker) {
	for round := range endRounds {
		id := int64(concurrentFirstID + round)
		c.mustAdd(id, 0)
		holder := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		if !c.settleOwned(holder, failedAt(50, 10_000, "boom")) {
			c.fatalf("Settle(%s, failed at 50ms) of a live claim reported false", fmtID(holder))
		}
		if n := c.winners(fmt.Sprintf("Requeue(%d, now 60ms)", id), func(int) (bool, error) {
			return c.admin.Requeue(c.ctx, id, at(60))
		}); n != 1 {
			c.errorf("round %d: %d of %d concurrent Requeue(%d) calls of a failed row reported true; exactly one must", round, n, racers, id)
		}
		marks := 0
		for _, rec := range c.attempts(id) {
			if rec.Outcome == intake.AttemptRequeued {
				marks++
			}
		}
		if marks != 1 {
			c.errorf("round %d: after concurrent requeues the history of update %d holds %d requeue marks; want 1", round, id, marks)
		}
	}
}

// sumOf runs call from racers goroutines released together and returns
// the sum of the counts they reported. The first error is reported and ends
// the case; panics are reported.
func (c *checker) sumOf(what string, call func() (int, error)) int {
	var sum, errs atomic.Int64
	fns := make([]func(), racers)
	for i := range fns {
		fns[i] = func() {
			n, err := call()
			if err != nil {
				if errs.Add(1) == 1 { // one report for the case
					c.errorf("a concurrent %s returned an error: %v", what, err)
				}
				return
			}
			sum.Add(int64(n))
		}
	}
	together(c, fns...)
	if errs.Load() > 0 {
		runtime.Goexit() // reported
	}
	return int(sum.Load())
}

// prunedPerRound is how many settled rows each round of concurrent prunes
// finds.
const prunedPerRound = 2

// concurrentPrunes: Prune reports how many rows it deleted, and a row is
// deleted once, so the counts of concurrent prunes sum to the rows there
// were to prune.
func concurrentPrunes(c *checker) {
	for round := range endRounds {
		for k := range prunedPerRound {
			id := int64(concurrentFirstID + round*prunedPerRound + k)
			c.mustAdd(id, 0)
			c.mustClaim(id, claimOpts(0, 100, defaultMax), 1)
			if !c.settle(id, 1, completed(10)) {
				c.fatalf("Settle(%d, attempt 1, completed at 10ms) of a live claim reported false", id)
			}
		}
		if n := c.sumOf("Prune(before 20ms)", func() (int, error) { return c.store.Prune(c.ctx, at(20)) }); n != prunedPerRound {
			c.errorf("round %d: concurrent Prune(before 20ms) calls reported %d rows deleted in all; %d rows were settled", round, n, prunedPerRound)
		}
	}
}

// concurrentOutcomes: an outcome applies only while its entry is pending,
// so of outcomes of one intent released together exactly one reports
// true, and the entry holds that one's answer.
func concurrentOutcomes(c *checker) {
	cl := call("sendMessage", 1)
	for round := range endRounds {
		id := int64(concurrentFirstID + round)
		c.mustAdd(id, 0)
		holder := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		c.mustIntent(holder, cl, 10, intake.IntentRecorded)
		var winner atomic.Int32
		winner.Store(-1)
		if n := c.winners(fmt.Sprintf("RecordOutcome(%s, sendMessage #1)", fmtID(holder)), func(i int) (bool, error) {
			ok, err := c.journal.RecordOutcome(c.ctx, holder, cl, answered(fmt.Sprintf(`{"racer":%d}`, i)), at(20))
			if ok {
				winner.Store(int32(i))
			}
			return ok, err
		}); n != 1 {
			c.errorf("round %d: %d of %d concurrent RecordOutcome calls of one pending intent of update %d reported true; exactly one must", round, n, racers, id)
			continue
		}
		want := fmt.Sprintf(`{"racer":%d}`, winner.Load())
		for _, e := range c.entries(id) {
			if e.Call == cl && string(e.Body) != want {
				c.errorf("round %d: the entry of update %d holds answer %s; want %s, the answer of the one outcome that reported true", round, id, e.Body, want)
			}
		}
	}
}

// concurrentRegisters: a process id is registered once, so of identical
// registrations released together exactly one reports true.
func concurrentRegisters(c *checker) {
	for round := range endRounds {
		p := fmt.Sprintf("racer-%d", round)
		if n := c.winners(fmt.Sprintf("Register(%q, until 1000ms)", p), func(int) (bool, error) {
			return c.process.Register(c.ctx, p, at(1000))
		}); n != 1 {
			c.errorf("round %d: %d of %d concurrent Register(%q) calls reported true; exactly one must", round, n, racers, p)
		}
	}
}

// concurrentLeaves: Leave reports whether it removed a heartbeat, and a
// heartbeat is removed once, so of identical leaves released together
// exactly one reports true.
func concurrentLeaves(c *checker) {
	for round := range endRounds {
		p := fmt.Sprintf("leaver-%d", round)
		c.mustRegister(p, 1000)
		if n := c.winners(fmt.Sprintf("Leave(%q)", p), func(int) (bool, error) {
			return c.process.Leave(c.ctx, p)
		}); n != 1 {
			c.errorf("round %d: %d of %d concurrent Leave(%q) calls reported true; exactly one must", round, n, racers, p)
		}
	}
}

// reapedPerRound is how many lapsed heartbeats each round of concurrent
// reaps finds.
const reapedPerRound = 3

// concurrentReaps: Reap reports how many heartbeats it removed, and a
// heartbeat is removed once, so the counts of concurrent reaps sum to the
// heartbeats that had lapsed.
func concurrentReaps(c *checker) {
	for round := range endRounds {
		for k := range reapedPerRound {
			c.mustRegister(fmt.Sprintf("lapsed-%d-%d", round, k), 10)
		}
		if n := c.sumOf("Reap(now 20ms)", func() (int, error) { return c.process.Reap(c.ctx, at(20)) }); n != reapedPerRound {
			c.errorf("round %d: concurrent Reap(now 20ms) calls reported %d heartbeats removed in all; %d had lapsed", round, n, reapedPerRound)
		}
	}
}

// beatLeaveRounds is how many rounds BeatRacingLeave runs: half of the
// barrier races', as each round makes several writes besides the race.
const beatLeaveRounds = barrierRounds / 2

// beatRacingLeave: the owner renews its heartbeat while it leaves. In
// either order the leave removes the heartbeat (a beat first only extends
// it), and nothing revives it: afterwards the process is not live, so a
// further beat is refused and the row it held is claimable at once. A
// beat that checks the heartbeat in one statement and writes it in another
// writes it back after the leave.
func beatRacingLeave(c *checker) {
	revived := 0
	for round := range beatLeaveRounds {
		id := int64(concurrentFirstID + round)
		p := fmt.Sprintf("leaving-%d", round)
		c.mustRegister(p, 1000)
		c.mustAdd(id, 0)
		c.mustClaimAs(id, owned(0, 100_000, defaultMax, p), 1)
		var left bool
		together(c, staggered(round,
			func() {
				c.raceCall("Beat", id, func() (bool, error) { return c.process.Beat(c.ctx, p, at(2000), at(500)) })
			},
			func() {
				left = c.raceCall("Leave", id, func() (bool, error) { return c.process.Leave(c.ctx, p) })
			},
		)...)
		if !left {
			c.errorf("round %d: Leave(%q) of a live process racing its Beat reported false; it removes the heartbeat in either order", round, p)
			continue
		}
		beat := c.beat(p, 3000, 600)
		_, took := c.claimAs(id, owned(600, 700, defaultMax, ""))
		if beat || !took {
			revived++
		}
	}
	if revived > 0 {
		c.errorf("in %d of %d rounds a process that left while it beat was live afterwards (a later Beat applied, or its row was not claimable): its heartbeat was written back after the leave", revived, beatLeaveRounds)
	}
}

// intentPruneRounds is how many rounds TailIntentRacingPrune runs.
const intentPruneRounds = barrierRounds / 2

// tailIntentRacingPrune: the tail of a completed update records intents
// while the update is pruned. In either order the prune takes the journal
// with the row (an intent after it is stale), so the update id recorded
// again starts with an empty journal. An intent whose admission is
// checked in one statement and whose entry is written in another leaves
// an entry that outlives its row.
func tailIntentRacingPrune(c *checker) {
	var outlived []string
	for round := range intentPruneRounds {
		id := int64(concurrentFirstID + round)
		c.mustAdd(id, 0)
		tail := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		if !c.settleOwned(tail, completed(10)) {
			c.fatalf("Settle(%s, completed at 10ms) of a live claim reported false", fmtID(tail))
		}
		// Several intents of the tail (one call each) and one prune, all
		// released together: the prune lands inside some intent's window.
		var pruned, errs atomic.Int64
		fns := []func(){func() {
			n, err := c.store.Prune(c.ctx, at(20))
			if err != nil {
				errs.Add(1)
				c.errorf("a racing Prune(before 20ms) returned an error: %v", err)
			}
			pruned.Add(int64(n))
		}}
		for k := range racers - 1 {
			cl := call("sendMessage", k+1)
			fns = append(fns, func() {
				if _, _, err := c.journal.RecordIntent(c.ctx, tail, cl, at(20)); err != nil {
					errs.Add(1)
					c.errorf("a racing RecordIntent(%s) returned an error: %v", fmtID(tail), err)
				}
			})
		}
		together(c, fns...)
		if errs.Load() > 0 {
			runtime.Goexit() // reported
		}
		if n := pruned.Load(); n != 1 {
			c.fatalf("round %d: Prune(before 20ms) racing intents deleted %d rows; want 1, the completed update %d", round, n, id)
		}
		c.mustAdd(id, 30)
		if es := c.entries(id); len(es) > 0 {
			e := es[0]
			outlived = append(outlived, fmt.Sprintf("update %d: %d entries, the first %s #%d pending by attempt %d, claim %q", id, len(es), e.Method, e.Occurrence, e.Attempt, e.ClaimID))
		}
	}
	if len(outlived) > 0 {
		c.errorf("in %d of %d rounds the update id recorded again after a prune that raced intents of its tail started with a journal entry; the prune takes the journal with the row: %s", len(outlived), intentPruneRounds, strings.Join(outlived, "; "))
	}
}
