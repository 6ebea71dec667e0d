package storetest

import (
	"bytes"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

func batchCases() []testCase {
	return []testCase{
		{name: "AddBatch", rule: "AddBatch reports one result per input, in order, the first duplicate winning", run: addBatch},
		{name: "ConcurrentBatchAddsOneNew", rule: "of concurrent batches adding one update id exactly one is new, and the row is never overwritten", run: concurrentBatchAdds},
		{name: "ConcurrentSettles", rule: "concurrent settlements are each judged on their own identity and lease, and only those that apply change the row and record the attempt", run: concurrentSettles},
		{name: "ConcurrentSettlesKeepOrder", rule: "a record riding on a concurrent settlement goes after the update's earlier records, as it would alone", needs: capAdmin, run: concurrentSettlesKeepOrder},
		{name: "SettledAtSettlementTime", rule: settledAtSettlementRule, run: settledAtSettlementTime},
		{name: "ConcurrentRecordsSurviveRequeue", rule: "a record riding on a concurrent settlement is kept through a requeue and a later completion, as it would be alone", needs: capAdmin, run: concurrentRecordsSurviveRequeue},
		{name: "ConcurrentSettlesOfEndedAttempts", rule: "concurrent settlements of attempts that already ended are refused and change nothing, as they would be alone", run: concurrentSettlesOfEndedAttempts},
	}
}

// addBatch: results are in input order, duplicates within the batch and
// rows already stored report false, the first body wins, and an empty batch
// is no error.
func addBatch(c *checker) {
	c.mustAdd(2, 0)
	in := []intake.AddRequest{
		{Incoming: intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1,"n":"first"}`), ReceivedAt: at(1)}},
		{Incoming: intake.Incoming{UpdateID: 2, Body: []byte(`{"update_id":2,"n":"again"}`), ReceivedAt: at(1)}},
		{Incoming: intake.Incoming{UpdateID: 3, Body: []byte(`{"update_id":3}`), ReceivedAt: at(1)}},
		{Incoming: intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1,"n":"second"}`), ReceivedAt: at(1)}},
		{Incoming: intake.Incoming{UpdateID: 4, Body: []byte(`{"update_id":4}`), ReceivedAt: at(1)}},
	}
	res, err := c.store.AddBatch(c.ctx, in)
	c.failed("AddBatch(5 updates)", err)
	got := make([]bool, len(res))
	for i, r := range res {
		got[i] = r.Added
		if r.Claimed() {
			c.errorf("AddBatch without claims reported update %d recorded claimed (%s)", in[i].UpdateID, fmtID(r.Identity))
		}
	}
	if want := []bool{true, false, true, false, true}; !slices.Equal(got, want) {
		c.errorf("AddBatch([1 2 3 1 4]) with 2 already stored reported %v; want %v", got, want)
	}
	for i := range in {
		in[i].Body[0] = 'X' // the store must have copied
	}
	wantBody := map[int64]string{
		1: `{"update_id":1,"n":"first"}`,
		2: string(body(2)),
		3: `{"update_id":3}`,
		4: `{"update_id":4}`,
	}
	rows := c.due(10, 10, 10)
	if ids := storedIDs(rows); !slices.Equal(ids, []int64{1, 2, 3, 4}) {
		c.errorf("Due after the batch listed %v; want [1 2 3 4]", ids)
	}
	for _, r := range rows {
		if want := wantBody[r.UpdateID]; !bytes.Equal(r.Body, []byte(want)) {
			c.errorf("after the batch, update %d has body %q; want %q", r.UpdateID, r.Body, want)
		}
	}
	if c.add(3, 2) {
		c.errorf("Add(3) after the batch recorded it reported true")
	}
	empty, err := c.store.AddBatch(c.ctx, nil)
	c.failed("AddBatch(no updates)", err)
	if len(empty) != 0 {
		c.errorf("AddBatch(no updates) reported %v; want no results", empty)
	}
	c.mustClaim(4, claimOpts(10, 20, defaultMax), 1)
}
