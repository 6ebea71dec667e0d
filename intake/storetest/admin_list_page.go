package storetest

import (
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// listPageRule is the rule of listPage.
const listPageRule = "a List page holds the first rows its filters select after its cursor, up to its limit: rows a filter drops never take its places"

// listPage: List selects rows by state and unacknowledged exhaustion and
// cuts its page after selecting, never before, so a page of a filter is
// the lowest update ids that pass it. A store that took the first rows
// first (a LIMIT before the conditions) and then dropped those a filter
// rejects lists fewer, or none, while later matching rows exist. Update 1
// is pending, 2 processing, 3 failed, 4 completed, 5 abandoned by its
// attempt and 6 an unacknowledged exhaustion; every filter, with a limit
// of 1 and of 2, and with a cursor, lists the first of the rows it
// selects.
func listPage(c *checker) {
	rowPerState(c)
	for _, tc := range []struct {
		what string
		q    intake.ListQuery
		want []int64 // every row the filter selects, in update id order
	}{
		{"state processing", intake.ListQuery{State: intake.StateProcessing}, []int64{2}},
		{"state failed", intake.ListQuery{State: intake.StateFailed}, []int64{3}},
		{"state completed", intake.ListQuery{State: intake.StateCompleted}, []int64{4}},
		{"state abandoned", intake.ListQuery{State: intake.StateAbandoned}, []int64{5, 6}},
		{"unacknowledged", intake.ListQuery{Unacknowledged: true}, []int64{6}},
		{"state abandoned and unacknowledged", intake.ListQuery{State: intake.StateAbandoned, Unacknowledged: true}, []int64{6}},
		{"state abandoned after 1", intake.ListQuery{State: intake.StateAbandoned, After: ptr(1)}, []int64{5, 6}},
		{"unacknowledged after 2", intake.ListQuery{Unacknowledged: true, After: ptr(2)}, []int64{6}},
	} {
		for _, limit := range []int{1, 2} {
			q := tc.q
			q.Limit = limit
			rows, err := c.admin.List(c.ctx, q)
			c.failed(fmt.Sprintf("List(%s, limit %d)", tc.what, limit), err)
			if got, want := rowIDs(rows), tc.want[:min(limit, len(tc.want))]; !slices.Equal(got, want) {
				c.errorf("List(%s, limit %d) = %v; want %v: the page holds the first rows the filter selects", tc.what, limit, got, want)
			}
		}
	}
}
