package storetest

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/tgrelay/tgrelay/intake"
)

// Cursor paging: pagedExhaustions rows listed pageLimit at a time, so the
// second page must be reached through the cursor.
const (
	pagedExhaustions = 150
	pageLimit        = 100
)

func exhaustCases() []testCase {
	return []testCase{
		{name: "CrashOnLastAttempt", rule: "a crash on the last attempt leaves a durable exhaustion until its exact acknowledgement", run: crashOnLastAttempt},
		{name: "TerminalRefusal", rule: "Exhaust turns the exact live claim into an unacknowledged exhaustion", run: terminalRefusal},
		{name: "ExpiredAttemptCannotExhaust", rule: "an expired or stale attempt cannot exhaust", run: expiredCannotExhaust},
		{name: "CursorAfter", rule: "DueExhaustions pages in update id order strictly after its cursor", run: cursorAfter},
		{name: "CursorPastFirstPage", rule: "every exhaustion is reachable through the cursor", run: cursorPastFirstPage},
		{name: "CursorPagesKeepFields", rule: "DueExhaustions reports each exhaustion's identity, body, time and error on every page, after a cursor too", run: cursorPagesKeepFields},
		{name: "CursorPageOfExhaustions", rule: exhaustionPageRule, run: exhaustionPage},
		{name: "ClaimSpendIsAnExhaustion", rule: "a claim that spends a row leaves a visible exhaustion with a claim id", run: claimSpendIsAnExhaustion},
		{name: "AckOnlyUnacknowledged", rule: "only an unacknowledged exhaustion can be acknowledged", run: ackOnlyUnacknowledged},
		{name: "ConcurrentAcks", rule: "of concurrent acknowledgements of one exhaustion exactly one applies", run: concurrentAcks},
		{name: "AckKeepsError", rule: ackKeepsErrorRule, needs: capAdmin, run: ackKeepsError},
		{name: "ListedInUpdateIDOrder", rule: exhaustionOrderRule, run: exhaustionsInUpdateIDOrder},
	}
}

// exhaustionIDs lists the update ids of es.
func exhaustionIDs(es []intake.Exhaustion) []int64 {
	ids := make([]int64, len(es))
	for i, e := range es {
		ids[i] = e.UpdateID
	}
	return ids
}

// crashOnLastAttempt: rule 10, first part. The holder of the last attempt
// disappears; the next claim spends the row into an exhaustion that keeps
// the crashed claim's identity, is never pruned, and is acknowledged once,
// by that identity only.
func crashOnLastAttempt(c *checker) {
	const id = 11
	if !c.addBody(id, []byte(`"crash"`), 0) {
		c.fatalf("Add(%d) of a new update id reported false", id)
	}
	durable := func(nowMS, leaseMS int64) intake.ClaimOpts {
		o := claimOpts(nowMS, leaseMS, 1)
		return o
	}
	crashed := c.mustClaimOwned(id, durable(0, 10), 1)
	if got, ok := c.claimOwned(id, durable(11, 20)); ok {
		c.errorf("a reclaim at 11ms of a row whose one attempt is spent took %s", fmtID(got))
	}
	es := c.dueExhaustions(10, nil)
	if len(es) != 1 {
		c.fatalf("DueExhaustions listed %v after the spend; want update %d", exhaustionIDs(es), id)
	}
	e := es[0]
	if e.Identity != crashed {
		c.errorf("the exhaustion carries %s; want the crashed claim's identity %s", fmtID(e.Identity), fmtID(crashed))
	}
	if !bytes.Equal(e.Body, []byte(`"crash"`)) {
		c.errorf("the exhaustion's body is %q; want %q", e.Body, `"crash"`)
	}
	if e.Error != intake.AttemptsSpentText {
		c.errorf("the exhaustion's error is %q; want %q", e.Error, intake.AttemptsSpentText)
	}
	if !e.ExhaustedAt.Equal(at(11)) {
		c.errorf("the exhaustion's time is %s; want 11ms, the spending claim's now", offset(e.ExhaustedAt))
	}
	if n := c.prune(1000); n != 0 {
		c.errorf("Prune(before 1000ms) deleted %d rows; an unacknowledged exhaustion is never pruned", n)
	}
	if c.ack(wrongClaim(crashed), 20) {
		c.errorf("AcknowledgeExhaustion with a wrong claim id reported true")
	}
	if c.ack(intake.Identity{UpdateID: id, Attempt: 2, ClaimID: crashed.ClaimID}, 20) {
		c.errorf("AcknowledgeExhaustion with attempt 2 (the exhaustion is attempt 1) reported true")
	}
	if !c.ack(crashed, 20) {
		c.fatalf("AcknowledgeExhaustion(%s, at 20ms) with the exact identity reported false", fmtID(crashed))
	}
	if c.ack(crashed, 21) {
		c.errorf("a second AcknowledgeExhaustion with the exact identity reported true")
	}
	if got := exhaustionIDs(c.dueExhaustions(10, nil)); len(got) != 0 {
		c.errorf("DueExhaustions listed %v after the acknowledgement", got)
	}
	if got := c.dueIDs(1000, 1000, 10); len(got) != 0 {
		c.errorf("Due listed %v after the acknowledgement", got)
	}
	if n := c.prune(20); n != 0 {
		c.errorf("Prune(before 20ms) deleted %d rows; the acknowledgement at 20ms is not strictly before", n)
	}
	if n := c.prune(21); n != 1 {
		c.errorf("Prune(before 21ms) deleted %d rows; want 1, acknowledged at 20ms", n)
	}
}

// terminalRefusal: rule 10, second part, and what an exhausted row refuses.
func terminalRefusal(c *checker) {
	const id = 12
	c.mustAdd(id, 0)
	ident := c.mustClaimOwned(id, claimOpts(0, 10, defaultMax), 1)
	if c.exhaust(wrongClaim(ident), 1, "wrong") {
		c.errorf("Exhaust with a wrong claim id reported true")
	}
	if c.exhaust(wrongAttempt(ident), 1, "wrong") {
		c.errorf("Exhaust naming attempt %d with attempt %d's claim id reported true", ident.Attempt+1, ident.Attempt)
	}
	if !c.exhaust(ident, 1, "terminal refusal") {
		c.fatalf("Exhaust(%s, at 1ms) of the live claim reported false", fmtID(ident))
	}
	es := c.dueExhaustions(10, nil)
	switch {
	case len(es) != 1:
		c.errorf("DueExhaustions listed %v; want [%d]", exhaustionIDs(es), id)
	case es[0].Identity != ident:
		c.errorf("the exhaustion carries %s; want %s", fmtID(es[0].Identity), fmtID(ident))
	case es[0].Error != "terminal refusal":
		c.errorf("the exhaustion's error is %q; want %q", es[0].Error, "terminal refusal")
	case !es[0].ExhaustedAt.Equal(at(1)):
		c.errorf("the exhaustion's time is %s; want 1ms", offset(es[0].ExhaustedAt))
	case !bytes.Equal(es[0].Body, body(id)):
		c.errorf("the exhaustion's body is %q; want %q", es[0].Body, body(id))
	}
	if c.exhaust(ident, 2, "again") {
		c.errorf("a second Exhaust of the same claim reported true")
	}
	if c.owns(ident, 2) || c.renewOwned(ident, 20, 2) || c.settleOwned(ident, completed(2)) {
		c.errorf("an exhausted claim still owns, renews or settles its row")
	}
	if got, ok := c.claimOwned(id, claimOpts(100, 200, 5)); ok {
		c.errorf("a claim took the exhausted row (%s)", fmtID(got))
	}
	if got := c.dueIDs(1000, 1000, 10); len(got) != 0 {
		c.errorf("Due listed %v; an exhaustion is not due for handling", got)
	}
	if !c.ack(ident, 3) {
		c.errorf("AcknowledgeExhaustion(%s) reported false", fmtID(ident))
	}
}

// expiredCannotExhaust: rule 10, third part. Exhaust needs a live lease; a
// lapsed attempt can neither exhaust nor block the reclaim, and after the
// reclaim the stale attempt still cannot exhaust.
func expiredCannotExhaust(c *checker) {
	const id = 13
	c.mustAdd(id, 0)
	first := c.mustClaimOwned(id, claimOpts(0, 10, defaultMax), 1)
	c.mustAdd(id+100, 0)
	atEnd := c.mustClaimOwned(id+100, claimOpts(0, 10, defaultMax), 1)
	if !c.exhaust(atEnd, 10, "at the lease end") {
		c.errorf("Exhaust(%s, at 10ms) reported false at exactly the lease end; the lease is live through its end", fmtID(atEnd))
	}
	if c.exhaust(first, 11, "too late") {
		c.errorf("Exhaust(%s, at 11ms) reported true after the lease lapsed at 10ms", fmtID(first))
	}
	second := c.mustClaimOwned(id, claimOpts(11, 50, defaultMax), 2)
	if c.exhaust(first, 12, "stale") {
		c.errorf("the stale first attempt exhausted the row held by %s", fmtID(second))
	}
	if got := exhaustionIDs(c.dueExhaustions(10, nil)); !slices.Equal(got, []int64{id + 100}) {
		c.errorf("DueExhaustions listed %v after refused exhaustions; want only [%d], exhausted at its lease end", got, id+100)
	}
	if !c.owns(second, 12) {
		c.errorf("Owns(%s, at 12ms) = false after the refused exhaustions", fmtID(second))
	}
}

// cursorAfter: rule 10, fourth part, plus order and limit.
func cursorAfter(c *checker) {
	for _, id := range []int64{14, 11, 13, 0, 12} {
		c.mustAdd(id, 0)
	}
	// Update id 0 is an id like any other: After 0 is set, and excludes it.
	idents := map[int64]intake.Identity{}
	for _, id := range []int64{14, 11, 0, 12} {
		ident := c.mustClaimOwned(id, claimOpts(0, 10, defaultMax), 1)
		if !c.exhaust(ident, 1, "terminal") {
			c.fatalf("Exhaust(%s) of a live claim reported false", fmtID(ident))
		}
		idents[id] = ident
	}
	c.mustClaimOwned(13, claimOpts(0, 10, defaultMax), 1) // processing: not listed
	checks := []struct {
		limit int
		after *int64
		want  []int64
	}{
		{10, nil, []int64{0, 11, 12, 14}},
		{10, ptr(12), []int64{14}},
		{2, nil, []int64{0, 11}},
		{1, ptr(11), []int64{12}},
		{10, ptr(14), nil},
		{10, ptr(0), []int64{11, 12, 14}},
	}
	for _, ch := range checks {
		if got := exhaustionIDs(c.dueExhaustions(ch.limit, ch.after)); !slices.Equal(got, ch.want) {
			c.errorf("DueExhaustions(limit %d, after %s) listed %v; want %v", ch.limit, fmtAfter(ch.after), got, ch.want)
		}
	}
	// An acknowledged exhaustion is not due, on any page.
	if !c.ack(idents[12], 2) {
		c.fatalf("AcknowledgeExhaustion(%s) reported false", fmtID(idents[12]))
	}
	for _, ch := range []struct {
		after *int64
		want  []int64
	}{{nil, []int64{0, 11, 14}}, {ptr(0), []int64{11, 14}}, {ptr(11), []int64{14}}} {
		if got := exhaustionIDs(c.dueExhaustions(10, ch.after)); !slices.Equal(got, ch.want) {
			c.errorf("DueExhaustions(after %s) listed %v once 12 was acknowledged; want %v", fmtAfter(ch.after), got, ch.want)
		}
	}
}

// cursorPastFirstPage: more exhaustions than one page; paging with the last
// id of each page reaches every one, in order, each once.
func cursorPastFirstPage(c *checker) {
	var want []int64
	for i := range pagedExhaustions {
		id := int64(1000 + 3*i) // gaps, so "after" is not "after + 1"
		want = append(want, id)
		c.mustAdd(id, 0)
		o := claimOpts(0, 10, 1)
		c.mustClaim(id, o, 1)
		spend := o
		spend.Now, spend.LeaseUntil = at(11), at(20)
		if _, ok := c.claim(id, spend); ok {
			c.fatalf("a claim at 11ms of update %d with its one attempt spent reported true", id)
		}
	}
	var got []int64
	var after *int64
	for page := 0; ; page++ {
		es := c.dueExhaustions(pageLimit, after)
		if len(es) > pageLimit {
			c.fatalf("DueExhaustions(limit %d) returned %d rows", pageLimit, len(es))
		}
		if len(es) == 0 {
			break
		}
		if page > pagedExhaustions/pageLimit+1 {
			c.fatalf("DueExhaustions did not end after %d pages: the cursor does not advance", page)
		}
		got = append(got, exhaustionIDs(es)...)
		after = ptr(es[len(es)-1].UpdateID)
	}
	if !slices.Equal(got, want) {
		c.errorf("paging DueExhaustions by %d reached %d exhaustions (%s); want all %d in update id order", pageLimit, len(got), summarize(got), len(want))
	}
}

// cursorPagesKeepFields: an [intake.Exhaustion] is the row's identity,
// raw body, exhaustion time and final error, whichever page lists it. The
// rows are received, exhausted and failed at distinct times and with
// distinct texts, so a page that reads another column for a field shows.
func cursorPagesKeepFields(c *checker) {
	want := map[int64]intake.Exhaustion{}
	for i, id := range []int64{0, 5, 9} {
		ms := int64(i)
		b := fmt.Appendf(nil, `{"update_id":%d,"page":%d}`, id, i)
		if !c.addBody(id, b, ms) {
			c.fatalf("Add(%d) of a new update id reported false", id)
		}
		ident := c.mustClaimOwned(id, claimOpts(10+ms, 100, defaultMax), 1)
		text := fmt.Sprintf("terminal %d", id)
		if !c.exhaust(ident, 20+ms, text) {
			c.fatalf("Exhaust(%s, at %dms) of a live claim reported false", fmtID(ident), 20+ms)
		}
		want[id] = intake.Exhaustion{Identity: ident, Body: b, ExhaustedAt: at(20 + ms), Error: text}
	}
	var after *int64
	for _, id := range []int64{0, 5, 9} {
		es := c.dueExhaustions(1, after)
		if len(es) != 1 || es[0].UpdateID != id {
			c.fatalf("DueExhaustions(limit 1, after %s) listed %v; want [%d]", fmtAfter(after), exhaustionIDs(es), id)
		}
		got, w := es[0], want[id]
		if got.Identity != w.Identity || !bytes.Equal(got.Body, w.Body) || !got.ExhaustedAt.Equal(w.ExhaustedAt) || got.Error != w.Error {
			c.errorf("DueExhaustions(limit 1, after %s) = %s, body %q, exhausted at %s, error %q; want %s, body %q, exhausted at %s, error %q",
				fmtAfter(after), fmtID(got.Identity), got.Body, offset(got.ExhaustedAt), got.Error,
				fmtID(w.Identity), w.Body, offset(w.ExhaustedAt), w.Error)
		}
		after = ptr(id)
	}
}

// summarize shows the ends of a long id list.
func summarize(ids []int64) string {
	if len(ids) <= 6 {
		return fmt.Sprint(ids)
	}
	return fmt.Sprintf("%v … %v", ids[:3], ids[len(ids)-3:])
}

// claimSpendIsAnExhaustion: rule 10, fifth part. A claim spends into an
// exhaustion that DueExhaustions lists with a claim id, so it can be
// acknowledged.
func claimSpendIsAnExhaustion(c *checker) {
	const id = 15
	c.mustAdd(id, 0)
	o := claimOpts(0, 10, 1)
	c.mustClaim(id, o, 1)
	o.Now, o.LeaseUntil = at(11), at(20)
	if attempt, ok := c.claim(id, o); ok {
		c.errorf("a claim at 11ms with the one attempt spent took attempt %d", attempt)
	}
	e, ok := c.findExhaustion(id)
	if !ok {
		c.fatalf("a claim's spend became an invisible exhaustion: DueExhaustions does not list update %d", id)
	}
	if e.ClaimID == "" || e.Attempt != 1 {
		c.errorf("the claim's exhaustion carries %s; want attempt 1 with a claim id", fmtID(e.Identity))
	}
	if e.Error != intake.AttemptsSpentText || !e.ExhaustedAt.Equal(at(11)) {
		c.errorf("the claim's exhaustion has error %q at %s; want %q at 11ms", e.Error, offset(e.ExhaustedAt), intake.AttemptsSpentText)
	}
	if !c.ack(e.Identity, 12) {
		c.errorf("AcknowledgeExhaustion(%s) of the listed identity reported false", fmtID(e.Identity))
	}
}
