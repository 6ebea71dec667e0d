package storetest

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

func adminCases() []testCase {
	return []testCase{
		{name: "GetFields", rule: "Get shows the row as the contract defines its fields", needs: capAdmin, run: adminGet},
		{name: "ListFiltersAndCursor", rule: "List filters by state and pages in update id order after its cursor", needs: capAdmin, run: adminList},
		{name: "StateAndUnacknowledged", rule: "List and Search asked for abandoned rows that are unacknowledged select only unacknowledged exhaustions", needs: capAdmin, run: stateAndUnacknowledged},
		{name: "Requeue", rule: "Requeue restarts only failed and abandoned rows, under a new claim id", needs: capAdmin, run: adminRequeue},
		{name: "ConcurrentRequeues", rule: "of concurrent requeues of one failed row exactly one applies, and the history marks it once", needs: capAdmin, run: concurrentRequeues},
		{name: "Stats", rule: "Stats counts rows by state and finds the oldest pending", needs: capAdmin, run: adminStats},
		{name: "RequeuedDueByReceipt", rule: "a requeued row is a pending row: Due lists it by its receipt time, whatever the requeue time", needs: capAdmin, run: requeuedDueByReceipt},
		{name: "OldestPendingSinceRequeue", rule: "Stats' oldest pending is when the row became pending, its requeue included", needs: capAdmin, run: oldestPendingSinceRequeue},
		{name: "SearchChatExact", rule: "Search by chat selects rows whose stored chat is exactly the chat: not a prefix, not a pattern", needs: capAdmin | capChatOrder, run: searchChatExact},
		{name: "ProcessesByIDEachLimited", rule: "Processes lists registered processes by id and processing rows newest first, at most limit of each", needs: capAdmin | capProcess, run: processesByIDEachLimited},
		{name: "OldestPendingOnlyPending", rule: "Stats' oldest pending reads pending rows only, and is the zero time when none is pending", needs: capAdmin, run: oldestPendingOnlyPending},
		{name: "RequeueKeepsClaimID", rule: requeueKeepsClaimRule, needs: capAdmin, run: requeueKeepsClaimID},
		{name: "CompletionClearsError", rule: completionClearsErrorRule, needs: capAdmin, run: completionClearsError},
		{name: "Inspect", rule: "Search, Replies, Processes and HeldBehind select, order and page as the contract says", needs: capAdmin | capJournal | capProcess, run: adminInspect},
		{name: "RepliesPageOfMatches", rule: repliesPageRule, needs: capAdmin | capJournal, run: repliesPage},
		{name: "SearchPageOfMatches", rule: searchPageRule, needs: capAdmin, run: searchPage},
		{name: "ListPageOfMatches", rule: listPageRule, needs: capAdmin, run: listPage},
	}
}

// wantRow is what a case expects of a row.
type wantRow struct {
	state             intake.State
	attempts          int
	claimID           string
	ignoreClaim       bool // the claim id is not compared (a base store's claim)
	ignoreDue         bool // DueAt is not compared (the contract leaves it open)
	receivedMS, dueMS int64
	settledMS         int64 // -1: the zero time
	errText           string
	unacknowledged    bool
}

func (c *checker) expectRow(when string, id int64, w wantRow) {
	row, ok := c.get(id)
	if !ok {
		c.errorf("%s: Get(%d) found no row", when, id)
		return
	}
	var diffs []string
	diff := func(field string, got, want any) {
		diffs = append(diffs, fmt.Sprintf("%s %v, want %v", field, got, want))
	}
	if row.UpdateID != id {
		diff("UpdateID", row.UpdateID, id)
	}
	if row.State != w.state {
		diff("State", row.State, w.state)
	}
	if row.Attempts != w.attempts {
		diff("Attempts", row.Attempts, w.attempts)
	}
	if !w.ignoreClaim && row.ClaimID != w.claimID {
		diff("ClaimID", fmt.Sprintf("%q", row.ClaimID), fmt.Sprintf("%q", w.claimID))
	}
	if !row.ReceivedAt.Equal(at(w.receivedMS)) {
		diff("ReceivedAt", offset(row.ReceivedAt), offset(at(w.receivedMS)))
	}
	if !w.ignoreDue && !row.DueAt.Equal(at(w.dueMS)) {
		diff("DueAt", offset(row.DueAt), offset(at(w.dueMS)))
	}
	if w.settledMS < 0 && !row.SettledAt.IsZero() {
		diff("SettledAt", offset(row.SettledAt), "zero time")
	} else if w.settledMS >= 0 && !row.SettledAt.Equal(at(w.settledMS)) {
		diff("SettledAt", offset(row.SettledAt), offset(at(w.settledMS)))
	}
	if row.Error != w.errText {
		diff("Error", fmt.Sprintf("%q", row.Error), fmt.Sprintf("%q", w.errText))
	}
	if row.Unacknowledged() != w.unacknowledged {
		diff("Unacknowledged()", row.Unacknowledged(), w.unacknowledged)
	}
	if !bytes.Equal(row.Body, body(id)) {
		diff("Body", fmt.Sprintf("%q", row.Body), fmt.Sprintf("%q", body(id)))
	}
	for _, d := range diffs {
		c.errorf("%s: Get(%d): %s", when, id, d)
	}
}

// claimFor claims id, ending the case unless it gets attempt attempt, and
// returns the claim id.
func (c *checker) claimFor(id int64, o intake.ClaimOpts, attempt int) (claimID string) {
	return c.mustClaimOwned(id, o, attempt).ClaimID
}

// adminGet: Get of a missing row, then of one row through its life.
func adminGet(c *checker) {
	if row, ok := c.get(1); ok {
		c.errorf("Get(1) of a missing row found %+v", row)
	}
	c.mustAdd(1, 5)
	c.expectRow("pending", 1, wantRow{state: intake.StatePending, receivedMS: 5, dueMS: 5, settledMS: -1})
	claim := c.claimFor(1, claimOpts(6, 20, defaultMax), 1)
	c.expectRow("processing", 1, wantRow{state: intake.StateProcessing, attempts: 1, claimID: claim, receivedMS: 5, dueMS: 20, settledMS: -1})
	if !c.settle(1, 1, failedAt(7, 30, "boom")) {
		c.fatalf("Settle(1, attempt 1, failed at 7ms) reported false for the holder")
	}
	c.expectRow("failed", 1, wantRow{state: intake.StateFailed, attempts: 1, claimID: claim, receivedMS: 5, dueMS: 30, settledMS: -1, errText: "boom"})
	claim = c.claimFor(1, claimOpts(30, 40, defaultMax), 2)
	c.expectRow("claimed again after its failure", 1, wantRow{state: intake.StateProcessing, attempts: 2, claimID: claim, receivedMS: 5, dueMS: 40, settledMS: -1})
	if !c.settle(1, 2, completed(31)) {
		c.fatalf("Settle(1, attempt 2, completed at 31ms) reported false for the holder")
	}
	c.expectRow("completed", 1, wantRow{state: intake.StateCompleted, attempts: 2, claimID: claim, receivedMS: 5, ignoreDue: true, settledMS: 31})
	c.mustAdd(2, 5)
	claim = c.claimFor(2, claimOpts(6, 20, defaultMax), 1)
	if !c.settle(2, 1, abandoned(8, "gave up")) {
		c.fatalf("Settle(2, attempt 1, abandoned at 8ms) reported false for the holder")
	}
	c.expectRow("abandoned", 2, wantRow{state: intake.StateAbandoned, attempts: 1, claimID: claim, receivedMS: 5, ignoreDue: true, settledMS: 8, errText: "gave up"})
	c.mustAdd(3, 5)
	ident := c.mustClaimOwned(3, claimOpts(6, 20, defaultMax), 1)
	if !c.exhaust(ident, 9, "terminal") {
		c.fatalf("Exhaust(%s, at 9ms) reported false for the holder", fmtID(ident))
	}
	c.expectRow("exhausted", 3, wantRow{state: intake.StateAbandoned, attempts: 1, claimID: ident.ClaimID, receivedMS: 5, dueMS: 9, settledMS: -1, errText: "terminal", unacknowledged: true})
	// Missing ids between, below and above stored ones.
	c.mustAdd(5, 5)
	for _, id := range []int64{0, 4, 6} {
		if row, ok := c.get(id); ok {
			c.errorf("Get(%d), missing beside rows 1, 2, 3 and 5, found %+v", id, row)
		}
	}
}

func rowIDs(rows []intake.Row) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.UpdateID
	}
	return ids
}

// adminList: one row per state and an exhaustion (rowPerState), listed
// with each filter, then paged.
func adminList(c *checker) {
	rowPerState(c)
	pending, abandonedIDs := []int64{1}, []int64{5, 6}
	list := func(q intake.ListQuery) []int64 {
		rows, err := c.admin.List(c.ctx, q)
		c.failed(fmt.Sprintf("List(%+v)", q), err)
		if len(rows) > q.Limit {
			c.errorf("List(limit %d) returned %d rows", q.Limit, len(rows))
		}
		return rowIDs(rows)
	}
	checks := []struct {
		what string
		q    intake.ListQuery
		want []int64
	}{
		{"all", intake.ListQuery{Limit: 10}, []int64{1, 2, 3, 4, 5, 6}},
		{"pending", intake.ListQuery{State: intake.StatePending, Limit: 10}, pending},
		{"processing", intake.ListQuery{State: intake.StateProcessing, Limit: 10}, []int64{2}},
		{"failed", intake.ListQuery{State: intake.StateFailed, Limit: 10}, []int64{3}},
		{"completed", intake.ListQuery{State: intake.StateCompleted, Limit: 10}, []int64{4}},
		{"abandoned", intake.ListQuery{State: intake.StateAbandoned, Limit: 10}, abandonedIDs},
		{"first page of 4", intake.ListQuery{Limit: 4}, []int64{1, 2, 3, 4}},
		{"after 4", intake.ListQuery{After: ptr(4), Limit: 4}, []int64{5, 6}},
		{"after 6", intake.ListQuery{After: ptr(6), Limit: 4}, nil},
		{"pending after 1", intake.ListQuery{State: intake.StatePending, After: ptr(1), Limit: 10}, pending[1:]},
	}
	checks = append(checks, struct {
		what string
		q    intake.ListQuery
		want []int64
	}{"unacknowledged", intake.ListQuery{Unacknowledged: true, Limit: 10}, []int64{6}})
	for _, ch := range checks {
		if got := list(ch.q); !slices.Equal(got, ch.want) {
			c.errorf("List(%s) listed %v; want %v", ch.what, got, ch.want)
		}
	}
}

// stateAndUnacknowledged: Unacknowledged selects only unacknowledged
// exhaustions, and [intake.ListQuery.Validate] allows it beside State
// abandoned, so the two filters together select what Unacknowledged alone
// does: neither an abandoned row settled by its attempt nor an
// acknowledged exhaustion, both abandoned too.
func stateAndUnacknowledged(c *checker) {
	for id := int64(1); id <= 3; id++ {
		c.mustAdd(id, 0)
	}
	c.mustClaim(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(1, 1, abandoned(1, "given up")) {
		c.fatalf("Settle(1, attempt 1, abandoned at 1ms) of a live lease reported false")
	}
	for _, id := range []int64{2, 3} {
		ident := c.mustClaimOwned(id, claimOpts(0, 100, defaultMax), 1)
		if !c.exhaust(ident, 1, "exhausted") {
			c.fatalf("Exhaust(%s, at 1ms) of a live claim reported false", fmtID(ident))
		}
		if id == 3 && !c.ack(ident, 2) {
			c.fatalf("AcknowledgeExhaustion(%s, at 2ms) of an unacknowledged exhaustion reported false", fmtID(ident))
		}
	}
	rows, err := c.admin.List(c.ctx, intake.ListQuery{State: intake.StateAbandoned, Limit: 10})
	c.failed("List(state abandoned)", err)
	if got := rowIDs(rows); !slices.Equal(got, []int64{1, 2, 3}) {
		c.errorf("List(state abandoned) listed %v; want [1 2 3]", got)
	}
	rows, err = c.admin.List(c.ctx, intake.ListQuery{State: intake.StateAbandoned, Unacknowledged: true, Limit: 10})
	c.failed("List(state abandoned, unacknowledged)", err)
	if got := rowIDs(rows); !slices.Equal(got, []int64{2}) {
		c.errorf("List(state abandoned, unacknowledged) listed %v; want [2]: 1 was settled abandoned, 3's exhaustion acknowledged", got)
	}
	rows, err = c.admin.Search(c.ctx, intake.SearchQuery{State: intake.StateAbandoned, Unacknowledged: true, Limit: 10})
	c.failed("Search(state abandoned, unacknowledged)", err)
	if got := rowIDs(rows); !slices.Equal(got, []int64{2}) {
		c.errorf("Search(state abandoned, unacknowledged) listed %v; want [2]: 1 was settled abandoned, 3's exhaustion acknowledged", got)
	}
}

// searchChatExact: [intake.SearchQuery.Chat] selects rows whose stored
// chat is exactly Chat. Chat keys are ids as JSON text and channel
// usernames, so one key can be another's prefix ("-100" of "-1001"), and a
// username can hold a character that a pattern reads as a wildcard
// ("_"); neither selects the other's rows.
func searchChatExact(c *checker) {
	for id, chat := range map[int64]string{1: "-100", 2: "-1001", 3: "@a_b", 4: "@axb", 5: ""} {
		c.addChat(id, chat, 0)
	}
	for chat, want := range map[string][]int64{"-100": {1}, "-1001": {2}, "@a_b": {3}, "@axb": {4}} {
		rows, err := c.admin.Search(c.ctx, intake.SearchQuery{Chat: chat, Limit: 10})
		c.failed(fmt.Sprintf("Search(chat %q)", chat), err)
		if got := rowIDs(rows); !slices.Equal(got, want) {
			c.errorf("Search(chat %q) listed %v; want %v, the one row of exactly that chat", chat, got, want)
		}
	}
}

// processesByIDEachLimited: [intake.AdminStore.Processes] lists the
// registered processes by id and the processing rows, newest update first,
// each with the process that holds it, at most limit of each: the two
// lists are limited apart. The processes' heartbeats end in the reverse of
// their id order, so an order by heartbeat shows.
func processesByIDEachLimited(c *checker) {
	c.mustRegister("p-a", 300)
	c.mustRegister("p-b", 200)
	c.mustRegister("p-c", 100)
	for id := int64(1); id <= 3; id++ {
		c.mustAdd(id, 0)
		c.mustClaimAs(id, owned(0, 1000, defaultMax, "p-a"), 1)
	}
	c.mustAdd(4, 0)
	for _, limit := range []int{3, 2} {
		pl, err := c.admin.Processes(c.ctx, limit)
		c.failed(fmt.Sprintf("Processes(limit %d)", limit), err)
		var procs []string
		for _, p := range pl.Processes {
			procs = append(procs, p.ID)
		}
		var held []int64
		for _, h := range pl.Held {
			held = append(held, h.Row.UpdateID)
			if h.Owner != "p-a" {
				c.errorf("Processes(limit %d) shows update %d held by %q; want p-a", limit, h.Row.UpdateID, h.Owner)
			}
		}
		wantProcs, wantHeld := []string{"p-a", "p-b", "p-c"}[:limit], []int64{3, 2, 1}[:limit]
		if !slices.Equal(procs, wantProcs) || !slices.Equal(held, wantHeld) {
			c.errorf("Processes(limit %d) = processes %v, held %v; want %v by id and %v newest first, at most %d of each", limit, procs, held, wantProcs, wantHeld, limit)
		}
	}
}

// oldestPendingOnlyPending: [intake.Stats.OldestPending] is when the
// longest-waiting pending row became pending, or the zero time when none
// is pending. A failed row waiting for its retry is not pending, however
// early its retry time, nor is a processing row.
func oldestPendingOnlyPending(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 100, defaultMax), 1)
	if !c.settle(1, 1, failedAt(1, 5, "retry at 5ms")) {
		c.fatalf("Settle(1, attempt 1, failed at 1ms, retry at 5ms) of a live lease reported false")
	}
	c.mustAdd(2, 10)
	stats := func() intake.Stats {
		st, err := c.admin.Stats(c.ctx)
		c.failed("Stats", err)
		return st
	}
	if st := stats(); !st.OldestPending.Equal(at(10)) {
		c.errorf("Stats().OldestPending = %s; want 10ms, the receipt of update 2, the one pending row (update 1 failed, its retry at 5ms)", offset(st.OldestPending))
	}
	c.mustClaim(2, claimOpts(20, 100, defaultMax), 1)
	if st := stats(); !st.OldestPending.IsZero() {
		c.errorf("Stats().OldestPending = %s with no row pending (1 failed, 2 processing); want the zero time", offset(st.OldestPending))
	}
}

// requeuedDueByReceipt: Due lists the pending rows received at or before
// PendingBefore, and Requeue makes a row pending, due at once. So a row
// received at 0ms and requeued at 100ms is listed by a sweep at 100ms whose
// pending grace ends at 50ms, as it is by a strict listing; its requeue
// time is not a second receipt.
func requeuedDueByReceipt(c *checker) {
	c.mustAdd(1, 0)
	c.mustClaim(1, claimOpts(0, 10, defaultMax), 1)
	if !c.settle(1, 1, failedAt(1, 1000, "boom")) {
		c.fatalf("Settle(1, attempt 1, failed at 1ms) of a live lease reported false")
	}
	ok, err := c.admin.Requeue(c.ctx, 1, at(100))
	c.failed("Requeue(1, now 100ms)", err)
	if !ok {
		c.fatalf("Requeue(1, now 100ms) of a failed row reported false")
	}
	if got := c.dueIDs(100, 50, 10); !slices.Equal(got, []int64{1}) {
		c.errorf("Due(now 100ms, pending before 50ms) listed %v after update 1, received at 0ms, was requeued at 100ms; want [1]", got)
	}
	if c.order != nil {
		if got := c.strictDue(100, 50, 10, ""); !slices.Equal(got, []int64{1}) {
			c.errorf("DueInOrder(now 100ms, pending before 50ms) listed %v after update 1, received at 0ms, was requeued at 100ms; want [1]", got)
		}
	}
}

// adminRequeue: only failed and abandoned rows (an unacknowledged exhaustion
// included) go back to pending; the next claim is attempt 1 under a new
// claim id, and no earlier identity adopts the row.
func adminRequeue(c *checker) {
	requeue := func(id int64, nowMS int64) bool {
		ok, err := c.admin.Requeue(c.ctx, id, at(nowMS))
		c.failed(fmt.Sprintf("Requeue(%d)", id), err)
		return ok
	}
	for id := int64(1); id <= 5; id++ {
		c.mustAdd(id, 0)
	}
	claims := map[int64]string{}
	for _, id := range []int64{2, 3, 4, 5} {
		claims[id] = c.claimFor(id, claimOpts(0, 100, defaultMax), 1)
	}
	for id, s := range map[int64]intake.Settlement{3: failedAt(1, 50, "x"), 4: completed(1), 5: abandoned(1, "y")} {
		if !c.settle(id, 1, s) {
			c.fatalf("Settle(%d, attempt 1, %s) reported false for the holder", id, s.State)
		}
	}
	for id, what := range map[int64]string{99: "a missing row", 1: "a pending row", 2: "a processing row", 4: "a completed row"} {
		if requeue(id, 10) {
			c.errorf("Requeue of %s (update %d) reported true", what, id)
		}
	}
	c.expectRow("after a refused requeue", 2, wantRow{state: intake.StateProcessing, attempts: 1, claimID: claims[2], dueMS: 100, settledMS: -1})
	for _, id := range []int64{3, 5} {
		if !requeue(id, 10) {
			c.errorf("Requeue of update %d reported false", id)
			continue
		}
		row, ok := c.get(id)
		if !ok || row.State != intake.StatePending || row.Attempts != 0 || row.Error != "" || !row.SettledAt.IsZero() || !row.DueAt.Equal(at(10)) {
			c.errorf("after Requeue(%d, now 10ms), Get = state %s, attempts %d, error %q, settled %s, due %s, found %v; want pending, 0, no error, zero time, 10ms",
				id, row.State, row.Attempts, row.Error, offset(row.SettledAt), offset(row.DueAt), ok)
		}
		if requeue(id, 11) {
			c.errorf("a second Requeue(%d) of the now pending row reported true", id)
		}
		newClaim := c.claimFor(id, claimOpts(12, 100, defaultMax), 1)
		if newClaim == claims[id] {
			c.errorf("the claim of the requeued update %d reused the claim id %q", id, newClaim)
		}
	}
	c.mustAdd(6, 0)
	ident := c.mustClaimOwned(6, claimOpts(0, 100, defaultMax), 1)
	if !c.exhaust(ident, 1, "z") {
		c.fatalf("Exhaust(%s) reported false for the holder", fmtID(ident))
	}
	if !requeue(6, 10) {
		c.fatalf("Requeue of an unacknowledged exhaustion reported false")
	}
	if _, ok := c.findExhaustion(6); ok {
		c.errorf("DueExhaustions still lists update 6 after it was requeued")
	}
	if c.ack(ident, 11) {
		c.errorf("the exhausted identity %s acknowledged the requeued row", fmtID(ident))
	}
	fresh := c.mustClaimOwned(6, claimOpts(12, 100, defaultMax), 1)
	if fresh.ClaimID == ident.ClaimID {
		c.errorf("the claim of the requeued exhaustion reused the claim id %q", ident.ClaimID)
	}
	if c.owns(ident, 13) || c.settleOwned(ident, completed(13)) {
		c.errorf("the identity %s from before the requeue owns or settles the requeued row, claimed as %s", fmtID(ident), fmtID(fresh))
	}
}

// adminStats: the counts per state, the unacknowledged count and the oldest
// pending receipt time, before and after changes.
func adminStats(c *checker) {
	stats := func(when string) intake.Stats {
		st, err := c.admin.Stats(c.ctx)
		c.failed("Stats ("+when+")", err)
		return st
	}
	st := stats("empty")
	for _, s := range []intake.State{intake.StatePending, intake.StateProcessing, intake.StateFailed, intake.StateCompleted, intake.StateAbandoned} {
		if st.Count[s] != 0 {
			c.errorf("Stats of an empty store counts %d %s rows", st.Count[s], s)
		}
	}
	if st.Unacknowledged != 0 || !st.OldestPending.IsZero() {
		c.errorf("Stats of an empty store: unacknowledged %d, oldest pending %s; want 0 and the zero time", st.Unacknowledged, offset(st.OldestPending))
	}
	for id, received := range map[int64]int64{1: 30, 2: 10, 3: 20, 4: 0, 5: 0, 6: 0, 7: 0} {
		c.mustAdd(id, received)
	}
	c.mustClaim(4, claimOpts(0, 100, defaultMax), 1) // processing
	for _, id := range []int64{5, 6, 7} {
		c.mustClaim(id, claimOpts(0, 100, defaultMax), 1)
	}
	for id, s := range map[int64]intake.Settlement{5: failedAt(1, 50, "x"), 6: completed(1), 7: abandoned(1, "y")} {
		if !c.settle(id, 1, s) {
			c.fatalf("Settle(%d, attempt 1, %s) reported false for the holder", id, s.State)
		}
	}
	want := map[intake.State]int{intake.StatePending: 3, intake.StateProcessing: 1, intake.StateFailed: 1, intake.StateCompleted: 1, intake.StateAbandoned: 1}
	wantUnack := 0
	c.mustAdd(8, 0)
	ident := c.mustClaimOwned(8, claimOpts(0, 100, defaultMax), 1)
	if !c.exhaust(ident, 1, "z") {
		c.fatalf("Exhaust(%s) reported false for the holder", fmtID(ident))
	}
	want[intake.StateAbandoned], wantUnack = 2, 1
	st = stats("one row per state")
	for s, n := range want {
		if st.Count[s] != n {
			c.errorf("Stats counts %d %s rows; want %d", st.Count[s], s, n)
		}
	}
	if st.Unacknowledged != wantUnack {
		c.errorf("Stats counts %d unacknowledged exhaustions; want %d", st.Unacknowledged, wantUnack)
	}
	if !st.OldestPending.Equal(at(10)) {
		c.errorf("Stats.OldestPending is %s; want 10ms, the earliest receipt among the pending rows 1, 2, 3", offset(st.OldestPending))
	}
	c.mustClaim(2, claimOpts(40, 100, defaultMax), 1)
	if st = stats("after claiming the oldest pending"); !st.OldestPending.Equal(at(20)) || st.Count[intake.StatePending] != 2 {
		c.errorf("after the oldest pending row was claimed, Stats has oldest pending %s and %d pending; want 20ms and 2", offset(st.OldestPending), st.Count[intake.StatePending])
	}
}

// rowPerState records updates 1 to 6, one in each state a row can be in:
// 1 pending, 2 processing (leased until 100ms), 3 failed (due again at
// 50ms), 4 completed, 5 abandoned by its attempt and 6 an unacknowledged
// exhaustion.
func rowPerState(c *checker) {
	for id := int64(1); id <= 6; id++ {
		c.mustAdd(id, 0)
	}
	for _, id := range []int64{2, 3, 4, 5} {
		c.mustClaim(id, claimOpts(0, 100, defaultMax), 1)
	}
	settles := map[int64]intake.Settlement{3: failedAt(1, 50, "x"), 4: completed(1), 5: abandoned(1, "y")}
	for _, id := range []int64{3, 4, 5} {
		if !c.settle(id, 1, settles[id]) {
			c.fatalf("Settle(%d, attempt 1, %s) reported false for the holder", id, settles[id].State)
		}
	}
	six := c.mustClaimOwned(6, claimOpts(0, 100, defaultMax), 1)
	if !c.exhaust(six, 1, "z") {
		c.fatalf("Exhaust(%s) reported false for the holder", fmtID(six))
	}
}
