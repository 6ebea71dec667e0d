package storetest

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/tgrelay/tgrelay/intake"
)

// Concurrency parameters. A store whose check and write are two steps has a
// window of a few microseconds between them; racers released together at a
// barrier, on fresh rows, round after round, hit it in (almost) every run
// while the rounds stay cheap (a few hundred store calls per case).
const (
	// barrierRounds is how many rounds each barrier race runs.
	barrierRounds = 48
	// addRacers is how many goroutines add one update id at once.
	addRacers = 8
	// concurrentFirstID is the first update id the barrier races use.
	concurrentFirstID = 2000
)

// together runs each of fns on its own goroutine and releases them at
// once: every goroutine first reports that it is running, and none calls
// the store before all are, so the calls overlap as closely as the
// scheduler allows. It returns when all have returned; a panic is reported
// as a violation.
func together(c *checker, fns ...func()) {
	var (
		wg      sync.WaitGroup
		running atomic.Int32
		start   = make(chan struct{})
	)
	n := int32(len(fns))
	for _, fn := range fns {
		wg.Go(func() {
			defer c.recoverPanic()
			<-start
			running.Add(1)
			// Spin rather than block, so that the racers on other
			// processors start at once; yield now and then, so that racers
			// still waiting for a processor get one.
			for i := 1; running.Load() < n; i++ {
				if i%(1<<10) == 0 {
					runtime.Gosched()
				}
			}
			fn()
		})
	}
	close(start)
	wg.Wait()
}

// staggered returns the two racers of a round with a delay before one of
// them, alternating between the two: rounds sweep the delay from none up to
// a few microseconds, with or without a yield of the processor first, so
// that some round starts the other call inside the first one's window,
// wherever that window lies, whether the racers run in parallel or take
// turns on one processor.
func staggered(round int, first, second func()) []func() {
	n := 0
	if k := (round / 2) % 13; k > 0 {
		n = 1 << (k - 1)
	}
	yield := round%4 >= 2
	delay := func(fn func()) func() {
		return func() {
			if yield {
				runtime.Gosched()
			}
			spin(n)
			fn()
		}
	}
	if round%2 == 0 {
		return []func(){delay(first), second}
	}
	return []func(){first, delay(second)}
}

// spinSink keeps spin's loop from being optimised away.
var spinSink atomic.Int64

// spin busy-waits for about n tens of nanoseconds.
func spin(n int) {
	for i := range n {
		spinSink.Add(int64(i))
	}
}

// concurrentAdds: of concurrent adds of one update id, exactly one reports
// it new, and the stored row is the one that add recorded: it is never
// overwritten by a later add.
func concurrentAdds(c *checker) {
	for round := range barrierRounds / 4 {
		id := int64(concurrentFirstID + round)
		bodies := make([][]byte, addRacers)
		news := make([]bool, addRacers)
		fns := make([]func(), addRacers)
		for i := range addRacers {
			bodies[i] = fmt.Appendf(nil, `{"update_id":%d,"racer":%d}`, id, i)
			fns[i] = func() {
				ok, err := c.store.Add(c.ctx, intake.Incoming{UpdateID: id, Body: bodies[i], ReceivedAt: at(int64(i))})
				if err != nil {
					c.errorf("a concurrent Add(%d) returned an error: %v", id, err)
				}
				news[i] = ok
			}
		}
		together(c, fns...)
		c.checkOneNew(id, "Add", news, bodies)
	}
}

// concurrentBatchAdds is concurrentAdds through AddBatch: each racer adds
// the same update id inside a batch of its own.
func concurrentBatchAdds(c *checker) {
	for round := range barrierRounds / 4 {
		id := int64(concurrentFirstID + round)
		bodies := make([][]byte, addRacers)
		news := make([]bool, addRacers)
		fns := make([]func(), addRacers)
		for i := range addRacers {
			bodies[i] = fmt.Appendf(nil, `{"update_id":%d,"racer":%d}`, id, i)
			own := int64(concurrentFirstID + 1000 + round*addRacers + i)
			fns[i] = func() {
				res, err := c.store.AddBatch(c.ctx, []intake.AddRequest{
					{Incoming: intake.Incoming{UpdateID: own, Body: body(own), ReceivedAt: at(0)}},
					{Incoming: intake.Incoming{UpdateID: id, Body: bodies[i], ReceivedAt: at(int64(i))}},
				})
				if err != nil || len(res) != 2 {
					c.errorf("a concurrent AddBatch with update %d = %v, %v; want two results", id, res, err)
					return
				}
				if !res[0].Added {
					c.errorf("a concurrent AddBatch reported its own new update %d as not new", own)
				}
				news[i] = res[1].Added
			}
		}
		together(c, fns...)
		c.checkOneNew(id, "AddBatch", news, bodies)
	}
}

// checkOneNew checks the outcome of one round of concurrent adds of id.
func (c *checker) checkOneNew(id int64, call string, news []bool, bodies [][]byte) {
	winner := -1
	n := 0
	for i, ok := range news {
		if ok {
			winner, n = i, n+1
		}
	}
	if n != 1 {
		c.errorf("%d of %d concurrent %s calls of update %d reported it new; exactly one must", n, len(news), call, id)
		if n == 0 {
			return
		}
	}
	stored, found := c.storedBody(id)
	switch {
	case !found:
		c.errorf("after concurrent %s calls update %d is not stored", call, id)
	case n == 1 && !bytes.Equal(stored, bodies[winner]):
		c.errorf("after concurrent %s calls update %d holds body %q; want %q, the body of the one add that reported it new: the row was overwritten", call, id, stored, bodies[winner])
	}
}

// storedBody reads id's body through Get, or else through Due.
func (c *checker) storedBody(id int64) ([]byte, bool) {
	if c.admin != nil {
		row, ok := c.get(id)
		return row.Body, ok
	}
	for _, r := range c.due(0, 1_000_000, 10_000) {
		if r.UpdateID == id {
			return r.Body, true
		}
	}
	return nil, false
}

// settleRacingReclaim: the holder settles at the last millisecond of its
// lease while another worker reclaims the lapsed lease a millisecond later.
// Each is allowed alone; together exactly one may succeed, never both.
func settleRacingReclaim(c *checker) {
	both, neither := 0, 0
	for round := range barrierRounds {
		id := int64(concurrentFirstID + round)
		c.mustAdd(id, 0)
		c.mustClaim(id, claimOpts(0, 100, defaultMax), 1)
		var settled, reclaimed bool
		together(c, staggered(round,
			func() {
				settled = c.raceCall("Settle", id, func() (bool, error) { return c.store.Settle(c.ctx, c.identity(id, 1), completed(100)) })
			},
			func() {
				reclaimed = c.raceCall("Claim", id, func() (bool, error) {
					ident, ok, err := c.store.Claim(c.ctx, id, claimOpts(101, 200, defaultMax))
					if ok {
						c.remember(ident)
					}
					return ok, err
				})
			},
		)...)
		switch {
		case settled && reclaimed:
			both++
		case !settled && !reclaimed:
			neither++
		case reclaimed && !c.renew(id, 2, 300, 150):
			c.errorf("the reclaim of update %d won the race, but its attempt 2 cannot renew its lease", id)
		}
	}
	c.reportRace("Settle(attempt 1, completed at the lease end)", "Claim one millisecond later", both, neither)
}

// settleOwnedRacingReclaim is settleRacingReclaim through identities, and
// Exhaust racing a reclaim too.
func settleOwnedRacingReclaim(c *checker) {
	c.endsRacingReclaim(concurrentFirstID, []raceEnd{
		{"Settle(completed at the lease end)", func(id intake.Identity) (bool, error) {
			return c.store.Settle(c.ctx, id, completed(100))
		}},
		{"Exhaust(at the lease end)", func(id intake.Identity) (bool, error) {
			return c.store.Exhaust(c.ctx, id, at(100), "exhausted")
		}},
	})
}

// raceEnd is a fenced call of a lease's holder, made at the lease's last
// millisecond (100ms) while another worker reclaims the row a millisecond
// later.
type raceEnd struct {
	name string
	call func(intake.Identity) (bool, error)
}

// endsRacingReclaim races each of ends against a reclaim, barrierRounds
// rounds each on fresh rows from firstID: never both may succeed, and
// whichever runs first must.
func (c *checker) endsRacingReclaim(firstID int64, ends []raceEnd) {
	for e, end := range ends {
		both, neither := 0, 0
		for round := range barrierRounds {
			id := firstID + int64(e*barrierRounds+round)
			c.mustAdd(id, 0)
			holder := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
			var settled, reclaimed bool
			var next intake.Identity
			together(c, staggered(round,
				func() { settled = c.raceCall(end.name, id, func() (bool, error) { return end.call(holder) }) },
				func() {
					reclaimed = c.raceCall("Claim", id, func() (bool, error) {
						var ok bool
						var err error
						next, ok, err = c.store.Claim(c.ctx, id, claimOpts(101, 200, defaultMax))
						return ok, err
					})
				},
			)...)
			switch {
			case settled && reclaimed:
				both++
			case !settled && !reclaimed:
				neither++
			case reclaimed && !c.owns(next, 150):
				c.errorf("the reclaim %s won the race, but does not own update %d", fmtID(next), id)
			}
		}
		c.reportRace(end.name, "Claim one millisecond later", both, neither)
	}
}

// raceCall runs one racer's call and reports an error.
func (c *checker) raceCall(what string, id int64, call func() (bool, error)) bool {
	ok, err := call()
	if err != nil {
		c.errorf("a racing %s of update %d returned an error: %v", what, id, err)
	}
	return ok
}

func (c *checker) reportRace(first, second string, both, neither int) {
	if both > 0 {
		c.errorf("%s and %s both succeeded in %d of %d rounds; never both may", first, second, both, barrierRounds)
	}
	if neither > 0 {
		c.errorf("%s and %s both failed in %d of %d rounds; whichever runs first must succeed", first, second, neither, barrierRounds)
	}
}
