package storetest

import (
	"github.com/tgrelay/tgrelay/intake"
)

// recordTimesKeptRule is the rule of recordTimesKept.
const recordTimesKeptRule = "a record riding on a completion keeps its own start and end, not the settlement's time, alone or concurrent"

// recordTimesKept: a record riding on a settlement
// ([intake.Settlement.Attempt]) is kept byte for byte, its times
// included, which need not be the settlement's. Update 1 is completed
// alone at 50ms with the record of an attempt that started at 10ms and
// ended at 40ms, then updates 2 to 17 the same way all at once, so that a
// store that merges concurrent settlements (and keeps a completion's
// record in its row) is judged on its merged path too. Each history must
// read that record exactly. (History/RecordedWithSettlement's records end
// when their settlements are made, so a store that stored the
// settlement's time as the record's end passed it.)
func recordTimesKept(c *checker) {
	recs := map[int64]intake.AttemptRecord{}
	last := completeAloneThenTogether(c, func(h intake.Identity) intake.Settlement {
		rec := record(h.UpdateID, h.Attempt, h.ClaimID, intake.AttemptCompleted, 10, 40)
		recs[h.UpdateID] = rec
		return withRecord(completed(50), rec)
	})
	for id := int64(1); id <= last; id++ {
		c.expectHistory("after a completion at 50ms with the record of an attempt from 10ms to 40ms", id, []intake.AttemptRecord{recs[id]})
	}
}
