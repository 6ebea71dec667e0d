package storetest

import (
	"fmt"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
)

// Race parameters: racers goroutines claim the same row at once, released
// together at a barrier (see together), in raceRounds rounds on fresh rows:
// a claim that checks and then writes in two steps, even with a window of a
// few microseconds, lets two racers win in some round of (almost) every
// run. The attempt ceiling is high enough that a non-atomic store lets
// every racer win, not just the first few.
const (
	racers       = 8
	raceRounds   = barrierRounds
	raceFirstID  = 600
	raceMaxTries = racers
)

func raceCases() []testCase {
	return []testCase{
		{name: "Claim", rule: "of concurrent claims exactly one takes the update", run: raceClaim},
		{name: "ClaimsBesideListings", rule: "a claim takes a claimable row while Due lists the rows at the same time", run: raceClaimsBesideDue},
	}
}

// race runs claim from racers goroutines released together, and returns the
// attempt (or identity) each winner got. Errors and panics are reported.
func race[T any](c *checker, what string, id int64, claim func() (T, bool, error)) []T {
	var (
		mu      sync.Mutex
		winners []T
	)
	fns := make([]func(), racers)
	for i := range fns {
		fns[i] = func() {
			v, ok, err := claim()
			if err != nil {
				c.errorf("a concurrent %s of update %d returned an error: %v", what, id, err)
				return
			}
			if ok {
				mu.Lock()
				winners = append(winners, v)
				mu.Unlock()
			}
		}
	}
	together(c, fns...)
	return winners
}

// raceClaim: rule 6.
func raceClaim(c *checker) {
	for round := range raceRounds {
		id := int64(raceFirstID + round)
		c.mustAdd(id, 0)
		won := race(c, "fenced claim", id, func() (intake.Identity, bool, error) {
			return c.store.Claim(c.ctx, id, claimOpts(1, 100, raceMaxTries))
		})
		if len(won) != 1 {
			var ids []string
			for _, w := range won {
				ids = append(ids, fmtID(w))
			}
			c.errorf("%d of %d concurrent fenced claims took update %d (%v); exactly one must", len(won), racers, id, ids)
			continue
		}
		w := won[0]
		if w.Attempt != 1 || w.UpdateID != id || w.ClaimID == "" {
			c.errorf("the one concurrent fenced claim of update %d got %s; want attempt 1 with a claim id", id, fmtID(w))
		}
		if !c.owns(w, 50) {
			c.errorf("Owns(%s, at 50ms) = false for the winner of the race", fmtID(w))
		}
	}
}

// besideDueRows is how many rows ClaimsBesideListings claims, one after
// another, while Due lists them over and over.
const besideDueRows = 300

// raceClaimsBesideDue: a sweep's listing is no reason for a claim to fail.
// A store whose listing locks the rows it reads, however briefly, and
// whose claim then reports a locked row as not claimable, loses claims
// here that nobody else took.
func raceClaimsBesideDue(c *checker) {
	for id := int64(1); id <= besideDueRows; id++ {
		c.mustAdd(id, 0)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// Deferred, so that the listers stop when a claim's error ends the case.
	defer func() {
		close(stop)
		wg.Wait()
	}()
	// The claims start once both listers run, so that they overlap even
	// when a store answers claims faster than a goroutine starts.
	running := make(chan struct{}, 2)
	for range 2 {
		// Bounded, not until the claims end: a lister that never blocks
		// would stop a fake clock (testing/synctest) from advancing.
		wg.Go(func() {
			running <- struct{}{}
			for range besideDueRows {
				select {
				case <-stop:
					return
				case <-c.ctx.Done():
					return
				default:
				}
				_, err := c.store.Due(c.ctx, intake.DueQuery{Now: at(10), PendingBefore: at(10), Limit: besideDueRows})
				if err != nil {
					c.errorf("Due(now 10ms) beside the claims returned an error: %v", err)
					return
				}
			}
		})
	}
	<-running
	<-running
	var lost []int64
	for id := int64(1); id <= besideDueRows; id++ {
		if attempt, ok := c.claim(id, claimOpts(10, 10_000, defaultMax)); !ok || attempt != 1 {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		c.errorf("%d of %d claims of pending rows nobody else claimed failed while Due listed beside them: %s", len(lost), besideDueRows, fmtIDs(lost))
	}
}

// fmtIDs shows at most ten ids of ids.
func fmtIDs(ids []int64) string {
	if len(ids) > 10 {
		return fmt.Sprintf("%v and %d more", ids[:10], len(ids)-10)
	}
	return fmt.Sprint(ids)
}
