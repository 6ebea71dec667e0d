package storetest

import (
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
