package storetest

import (
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// searchPageRule is the rule of searchPage.
const searchPageRule = "a Search page holds the newest rows its filters select, up to its limit: rows a filter drops never take its places"

// searchPage: Search selects rows by state, unacknowledged exhaustion,
// crashes, chat and text, and cuts its page after selecting, never before,
// so a page of a filter is the newest rows that pass it. A store that took
// the newest rows first (a LIMIT before the conditions) and then dropped
// those a filter rejects lists fewer, or none, while older matching rows
// exist. Update 1 (chat "x", its body holding "needle") failed, 2 is an
// unacknowledged exhaustion, 3 is processing (taken over from a lapsed
// process, so crashed once, in a store with heartbeats), 4 completed and
// 5 to 8 are pending, all newer than the others. Every filter, with a
// limit of 1 and of 2, and with a cursor, lists the first of the rows it
// selects.
func searchPage(c *checker) {
	ok, err := c.store.Add(c.ctx, intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1,"text":"needle"}`), ReceivedAt: at(0), Chat: "x"})
	c.failed(`Add(1, chat "x")`, err)
	if !ok {
		c.fatalf(`Add(1, chat "x") of a new update id reported false`)
	}
	for id := int64(2); id <= 8; id++ {
		c.mustAdd(id, 0)
	}
	c.mustClaim(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(1, 1, failedAt(10, 1000, "boom")) {
		c.fatalf("Settle(1, attempt 1, failed at 10ms) of a live lease reported false")
	}
	two := c.mustClaimOwned(2, claimOpts(0, 100, defaultMax), 1)
	if !c.exhaust(two, 10, "gave up") {
		c.fatalf("Exhaust(%s, at 10ms) of a live lease reported false", fmtID(two))
	}
	if c.process != nil {
		// Update 3 is claimed by a process whose heartbeat lapses at 5ms
		// and taken over at 10ms: a crash.
		for i, p := range []struct {
			id      string
			untilMS int64
		}{{"storetest-search-dead", 5}, {"storetest-search-live", 100_000}} {
			ok, err := c.process.Register(c.ctx, p.id, at(p.untilMS))
			c.failed(fmt.Sprintf("Register(%q)", p.id), err)
			if !ok {
				c.fatalf("Register(%q) of a new process id reported false", p.id)
			}
			nowMS := int64(10 * i)
			_, ok, err = c.process.ClaimAs(c.ctx, 3, claimOpts(nowMS, 1000, 5), intake.ProcessClaim{Process: p.id})
			c.failed(fmt.Sprintf("ClaimAs(3, now %dms, process %q)", nowMS, p.id), err)
			if !ok {
				c.fatalf("ClaimAs(3, now %dms, process %q) reported false; want attempt %d", nowMS, p.id, i+1)
			}
		}
	} else {
		c.mustClaim(3, claimOpts(0, 1000, defaultMax), 1)
	}
	c.mustClaim(4, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(4, 1, completed(10)) {
		c.fatalf("Settle(4, attempt 1, completed at 10ms) of a live lease reported false")
	}
	type query struct {
		what string
		q    intake.SearchQuery
		want []int64 // every row the filter selects, newest first
	}
	queries := []query{
		{"state failed", intake.SearchQuery{State: intake.StateFailed}, []int64{1}},
		{"state abandoned", intake.SearchQuery{State: intake.StateAbandoned}, []int64{2}},
		{"state processing", intake.SearchQuery{State: intake.StateProcessing}, []int64{3}},
		{"state completed", intake.SearchQuery{State: intake.StateCompleted}, []int64{4}},
		{"state pending", intake.SearchQuery{State: intake.StatePending}, []int64{8, 7, 6, 5}},
		{"unacknowledged", intake.SearchQuery{Unacknowledged: true}, []int64{2}},
		{"chat x", intake.SearchQuery{Chat: "x"}, []int64{1}},
		{"text needle", intake.SearchQuery{Text: "needle"}, []int64{1}},
		{"state pending below 7", intake.SearchQuery{State: intake.StatePending, Before: ptr(7)}, []int64{6, 5}},
		{"unacknowledged below 4", intake.SearchQuery{Unacknowledged: true, Before: ptr(4)}, []int64{2}},
	}
	if c.process != nil {
		queries = append(queries, query{"crashed", intake.SearchQuery{Crashed: true}, []int64{3}})
	}
	for _, tc := range queries {
		for _, limit := range []int{1, 2} {
			q := tc.q
			q.Limit = limit
			rows, err := c.admin.Search(c.ctx, q)
			c.failed(fmt.Sprintf("Search(%s, limit %d)", tc.what, limit), err)
			got := make([]int64, len(rows))
			for i, r := range rows {
				got[i] = r.UpdateID
			}
			if want := tc.want[:min(limit, len(tc.want))]; !slices.Equal(got, want) {
				c.errorf("Search(%s, limit %d) = %v; want %v: the page holds the newest rows the filter selects", tc.what, limit, got, want)
			}
		}
	}
}
