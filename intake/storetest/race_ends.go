package storetest

import (
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
