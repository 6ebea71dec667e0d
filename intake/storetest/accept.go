package storetest

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tgrelay/tgrelay/intake"
)

func addCases() []testCase {
	return []testCase{
		{name: "OneRecordPerUpdateID", rule: "one record per update id", run: addOnce},
		{name: "BodiesRoundTrip", rule: "bodies are stored byte for byte", run: bodiesRoundTrip},
		{name: "EmptyBodies", rule: "an empty or nil body is stored like any other, alone or in a batch", run: emptyBodies},
		{name: "UpdateIDRange", rule: "update ids 0 and 2^40 round-trip", run: updateIDRange},
		{name: "LargestUpdateID", rule: "update id 2^63-1 is stored like any other, and a cursor at it ends a listing", run: largestUpdateID},
		{name: "PendingGrace", rule: "a pending row is due once received at or before PendingBefore", run: pendingGrace},
		{name: "ConcurrentAddsOneNew", rule: "of concurrent adds of one update id exactly one is new, and the row is never overwritten", run: concurrentAdds},
		{name: "ReadsReturnPrivateBodies", rule: "every read returns bodies the caller may modify without changing the store", run: readsReturnPrivateBodies},
		{name: "DueReportsReceipt", rule: "Due reports each row's receipt time, whatever its state", run: dueReportsReceipt},
		{name: "DuplicateChangesNothing", rule: "a duplicate Add or AddBatch changes nothing: body, receipt time and chat stay the first", run: duplicateChangesNothing},
		{name: "HealthyWhileServing", rule: healthyRule, needs: capHealth, run: healthyWhileServing},
	}
}

// addOnce: rule 1. A new id is recorded once; a second Add of the same id,
// whatever its body and whatever the row's state, reports false and keeps
// the first body.
func addOnce(c *checker) {
	if !c.add(1, 0) {
		c.errorf("Add(1) of a new update id reported false")
	}
	if c.addBody(1, []byte(`{"update_id":1,"other":true}`), 1) {
		c.errorf("a second Add(1), with another body, reported true while the row is pending")
	}
	rows := c.due(10, 10, 10)
	if len(rows) != 1 || rows[0].UpdateID != 1 {
		c.fatalf("Due(now 10ms) listed %v; want exactly update 1", storedIDs(rows))
	}
	if !bytes.Equal(rows[0].Body, body(1)) {
		c.errorf("after a duplicate Add the body is %q; want the first body %q", rows[0].Body, body(1))
	}
	c.mustClaim(1, claimOpts(10, 100, defaultMax), 1)
	if c.add(1, 11) {
		c.errorf("Add(1) reported true while the row is processing")
	}
	if !c.settle(1, 1, completed(20)) {
		c.fatalf("Settle(1, attempt 1, completed at 20ms) of a live lease reported false")
	}
	if c.add(1, 21) {
		c.errorf("Add(1) reported true while the row is completed and not yet pruned")
	}
}

// duplicateChangesNothing: Add reports false and changes nothing for a
// stored update id, and AddBatch does as Add; bodies are not compared. So a
// duplicate neither fills a stored empty body, nor moves the receipt time
// that the pending grace and Due's ReceivedAt read, nor gives a row without
// a chat the duplicate's chat (which would make a [intake.ChatOrderStore]
// hold the chat's later rows behind it).
func duplicateChangesNothing(c *checker) {
	if !c.addBody(1, []byte{}, 0) {
		c.fatalf("Add(1) of a new update id, with an empty body, reported false")
	}
	c.mustAdd(2, 0)
	dup := func(id, receivedMS int64) intake.Incoming {
		return intake.Incoming{UpdateID: id, Body: fmt.Appendf(nil, `{"update_id":%d,"duplicate":true}`, id), ReceivedAt: at(receivedMS), Chat: "dup"}
	}
	for _, id := range []int64{1, 2} {
		ok, err := c.store.Add(c.ctx, dup(id, 5))
		c.failed(fmt.Sprintf("Add(%d), a duplicate", id), err)
		if ok {
			c.errorf("a duplicate Add(%d), received at 5ms with chat %q, reported true", id, "dup")
		}
	}
	res, err := c.store.AddBatch(c.ctx, []intake.AddRequest{{Incoming: dup(1, 6)}, {Incoming: dup(2, 6)}})
	c.failed("AddBatch(duplicates of 1 and 2)", err)
	for i, r := range res {
		if r.Added {
			c.errorf("AddBatch of the duplicates of 1 and 2, received at 6ms, reported request %d added", i)
		}
	}
	want := map[int64][]byte{1: {}, 2: body(2)}
	rows := c.due(10, 0, 10)
	if got := storedIDs(rows); !slices.Equal(got, []int64{1, 2}) {
		c.errorf("Due(now 10ms, pending before 0ms) listed %v; want [1 2], both received at 0ms whatever their duplicates said", got)
	}
	for _, r := range rows {
		if !bytes.Equal(r.Body, want[r.UpdateID]) {
			c.errorf("after duplicates, Due returned update %d's body %q; want the first body %q", r.UpdateID, r.Body, want[r.UpdateID])
		}
		if !r.ReceivedAt.Equal(at(0)) {
			c.errorf("after duplicates received at 5ms and 6ms, Due reported update %d received at %s; want the first receipt, 0ms", r.UpdateID, offset(r.ReceivedAt))
		}
	}
	if c.admin != nil {
		for id, b := range want {
			row, ok := c.get(id)
			switch {
			case !ok:
				c.errorf("Get(%d) found no row", id)
			case !bytes.Equal(row.Body, b) || !row.ReceivedAt.Equal(at(0)) || !row.DueAt.Equal(at(0)):
				c.errorf("after duplicates, Get(%d) = body %q, received at %s, due at %s; want body %q, both times 0ms",
					id, row.Body, offset(row.ReceivedAt), offset(row.DueAt), b)
			}
		}
	}
	if c.order == nil {
		return
	}
	// Rows 1 and 2 were recorded without a chat, so they hold no chat
	// back: a later row of chat "dup" is the lowest unsettled row of its
	// chat.
	c.addChat(3, "dup", 0)
	if got := c.strictDue(10, 10, 10, "dup"); !slices.Equal(got, []int64{3}) {
		c.errorf("DueInOrder(chat %q) listed %v; want [3]: updates 1 and 2 have no chat, whatever their duplicates said", "dup", got)
	}
	c.expectStrict(3, 10, 100, true, `updates 1 and 2 were recorded without a chat; their duplicates with chat "dup" must not have given them one`)
}

// bigBody is a JSON body of exactly 1 MiB.
func bigBody() []byte {
	const size = 1 << 20
	head, tail := `{"update_id":4,"text":"`, `"}`
	return []byte(head + strings.Repeat("ж1", (size-len(head)-len(tail))/3) + tail + strings.Repeat(" ", (size-len(head)-len(tail))%3))
}

// bodiesRoundTrip: bodies come back byte for byte, from every listing, and
// neither the caller's slice nor a returned slice aliases the stored body.
func bodiesRoundTrip(c *checker) {
	bodies := map[int64][]byte{
		1: []byte("{\"update_id\":1,\"message\":{\"text\":\"héllo wörld — 你好 — مرحبا — 🌍🚀 — e\u0301 — \u200d\"}}"),
		2: []byte(`{"update_id":2,"message":{"text":"quotes \" backslash \\ escapes \u0000 \n \t \u2028 \ud83d\ude00"}}`),
		3: []byte("{\n  \"update_id\" : 3 ,\r\n\t\"spaced\": [ 1 , 2 ]\n}\n"),
		4: bigBody(),
		// Bytes no JSON decoder would accept, as a webhook's scanner may
		// still take them: invalid UTF-8 in strings, kept as they came.
		5: []byte("{\"update_id\":5,\"message\":{\"chat\":{\"id\":\"\xff\xfe\"},\"text\":\"\xc3\x28 \xed\xa0\x80\"}}"),
	}
	if n := len(bodies[4]); n != 1<<20 {
		c.fatalf("internal: big body has %d bytes", n)
	}
	for _, id := range []int64{1, 2, 3, 4, 5} {
		in := bytes.Clone(bodies[id])
		if !c.addBody(id, in, 0) {
			c.fatalf("Add(%d) of a new update id reported false", id)
		}
		// The store must have copied what it keeps.
		for i := range in {
			in[i] = 'X'
		}
	}
	compare := func(where string, id int64, got []byte) {
		if want := bodies[id]; !bytes.Equal(got, want) {
			c.errorf("%s returned the body of update %d changed: %s", where, id, describeDiff(got, want))
		}
	}
	rows := c.due(0, 0, 10)
	if got := storedIDs(rows); !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		c.fatalf("Due listed %v; want [1 2 3 4 5]", got)
	}
	for _, r := range rows {
		compare("Due", r.UpdateID, r.Body)
		for i := range r.Body {
			r.Body[i] = 'Y'
		}
	}
	for _, r := range c.due(0, 0, 10) {
		compare("Due, after the caller wrote into an earlier result,", r.UpdateID, r.Body)
	}
	if c.admin != nil {
		for id := range bodies {
			row, ok := c.get(id)
			if !ok {
				c.errorf("Get(%d) found no row", id)
				continue
			}
			compare("Get", id, row.Body)
		}
	}
	for _, id := range []int64{1, 4} {
		ident := c.mustClaimOwned(id, claimOpts(0, 10, defaultMax), 1)
		if !c.exhaust(ident, 1, "body check") {
			c.fatalf("Exhaust(%s, at 1ms) of a live claim reported false", fmtID(ident))
		}
		if e, ok := c.findExhaustion(id); !ok {
			c.errorf("DueExhaustions did not list exhausted update %d", id)
		} else {
			compare("DueExhaustions", id, e.Body)
		}
	}
}

// describeDiff says how got differs from want, briefly.
func describeDiff(got, want []byte) string {
	n := min(len(got), len(want))
	i := 0
	for i < n && got[i] == want[i] {
		i++
	}
	end := min(i+16, len(got))
	return fmt.Sprintf("%d bytes, want %d; first difference at byte %d (got %q)", len(got), len(want), i, got[i:end])
}

func storedIDs(rows []intake.StoredUpdate) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.UpdateID
	}
	return ids
}

// updateIDRange: the smallest update id and a large one (2^40, beyond 32
// bits) are stored, ordered, claimed and reported exactly.
func updateIDRange(c *checker) {
	const big = int64(1) << 40
	for _, id := range []int64{big, 0, 5} {
		c.mustAdd(id, 0)
	}
	rows := c.due(0, 0, 10)
	if got := storedIDs(rows); !slices.Equal(got, []int64{0, 5, big}) {
		c.fatalf("Due listed %v; want [0 5 %d] in update id order", got, big)
	}
	for _, r := range rows {
		if !bytes.Equal(r.Body, body(r.UpdateID)) {
			c.errorf("Due returned the body of update %d as %q; want %q", r.UpdateID, r.Body, body(r.UpdateID))
		}
	}
	c.mustClaim(big, claimOpts(0, 10, defaultMax), 1)
	if !c.settle(big, 1, failedAt(1, 20, "retry")) {
		c.errorf("Settle(%d, attempt 1, failed at 1ms) of a live lease reported false", big)
	}
	if got := c.dueIDs(20, 0, 10); !slices.Equal(got, []int64{0, 5, big}) {
		c.errorf("Due(now 20ms) listed %v; want [0 5 %d] (the failed row is due at 20ms)", got, big)
	}
	for _, ident := range []intake.Identity{
		c.mustClaimOwned(0, claimOpts(20, 30, defaultMax), 1),
		c.mustClaimOwned(big, claimOpts(20, 30, defaultMax), 2),
	} {
		if !c.owns(ident, 25) {
			c.errorf("Owns(%s, at 25ms) = false for the holder of a lease to 30ms", fmtID(ident))
		}
	}
	if c.admin != nil {
		for _, id := range []int64{0, big} {
			if row, ok := c.get(id); !ok || row.UpdateID != id {
				c.errorf("Get(%d) = row of update %d, %v; want update %d", id, row.UpdateID, ok, id)
			}
		}
	}
}

// largestUpdateID: an update id is any non-negative int64, the largest
// included, and a cursor continues strictly after its id. So with update
// 2^63-1 stored and exhausted, DueExhaustions and, for an
// [intake.AdminStore], List after it list nothing (a cursor must not wrap
// around to the lowest ids), and Search before it lists the rest.
func largestUpdateID(c *checker) {
	const largest = int64(math.MaxInt64)
	for _, id := range []int64{largest, 0, 5} {
		c.mustAdd(id, 0)
	}
	if got := c.dueIDs(0, 0, 10); !slices.Equal(got, []int64{0, 5, largest}) {
		c.errorf("Due listed %v; want [0 5 %d] in update id order", got, largest)
	}
	for _, id := range []int64{largest, 0} {
		ident := c.mustClaimOwned(id, claimOpts(0, 10, defaultMax), 1)
		if !c.exhaust(ident, 1, "terminal") {
			c.fatalf("Exhaust(%s) of a live claim reported false", fmtID(ident))
		}
	}
	if got := exhaustionIDs(c.dueExhaustions(10, ptr(5))); !slices.Equal(got, []int64{largest}) {
		c.errorf("DueExhaustions(after 5) listed %v; want [%d]", got, largest)
	}
	if got := exhaustionIDs(c.dueExhaustions(10, ptr(largest))); len(got) != 0 {
		c.errorf("DueExhaustions(after %d) listed %v; want none: nothing comes after the largest update id", largest, got)
	}
	if c.admin == nil {
		return
	}
	rows, err := c.admin.List(c.ctx, intake.ListQuery{After: ptr(largest), Limit: 10})
	c.failed(fmt.Sprintf("List(after %d)", largest), err)
	if got := rowIDs(rows); len(got) != 0 {
		c.errorf("List(after %d) listed %v; want none: nothing comes after the largest update id", largest, got)
	}
	rows, err = c.admin.Search(c.ctx, intake.SearchQuery{Before: ptr(largest), Limit: 10})
	c.failed(fmt.Sprintf("Search(before %d)", largest), err)
	if got := rowIDs(rows); !slices.Equal(got, []int64{5, 0}) {
		c.errorf("Search(before %d) listed %v; want [5 0]", largest, got)
	}
	if row, ok := c.get(largest); !ok || row.UpdateID != largest || row.State != intake.StateAbandoned {
		c.errorf("Get(%d) = update %d, state %s, found %v; want the abandoned row", largest, row.UpdateID, row.State, ok)
	}
}

// pendingGrace: Due lists a pending row only once received at or before
// PendingBefore (inclusive, to the millisecond), but Claim takes a pending
// row at any time.
func pendingGrace(c *checker) {
	c.mustAdd(1, 7)
	if got := c.dueIDs(100, 6, 10); len(got) != 0 {
		c.errorf("Due(pending before 6ms) listed %v; update 1 was received at 7ms", got)
	}
	if got := c.dueIDs(100, 7, 10); !slices.Equal(got, []int64{1}) {
		c.errorf("Due(pending before 7ms) listed %v; want [1], received at exactly 7ms", got)
	}
	if attempt, ok := c.claim(1, claimOpts(0, 10, defaultMax)); !ok || attempt != 1 {
		c.errorf("Claim(1, now 0ms) of a pending row received at 7ms = attempt %d, %v; want attempt 1 (a pending row is always claimable)", attempt, ok)
	}
}

// emptyBodies: Add and AddBatch record a nil and an empty body as the
// empty body, and a batch with one records the rest of it too.
func emptyBodies(c *checker) {
	if !c.addBody(1, nil, 0) {
		c.fatalf("Add(1) with a nil body reported false")
	}
	if !c.addBody(2, []byte{}, 0) {
		c.fatalf("Add(2) with an empty body reported false")
	}
	res, err := c.store.AddBatch(c.ctx, []intake.AddRequest{
		{Incoming: intake.Incoming{UpdateID: 3, Body: nil, ReceivedAt: at(0)}},
		{Incoming: intake.Incoming{UpdateID: 4, Body: body(4), ReceivedAt: at(0)}},
	})
	c.failed("AddBatch([3 with a nil body, 4])", err)
	if len(res) != 2 || !res[0].Added || !res[1].Added {
		c.errorf("AddBatch([3 with a nil body, 4]) answered %+v; want both added", res)
	}
	rows := c.due(0, 0, 10)
	if got := storedIDs(rows); !slices.Equal(got, []int64{1, 2, 3, 4}) {
		c.fatalf("Due listed %v; want [1 2 3 4]", got)
	}
	for _, r := range rows {
		if want := map[int64][]byte{4: body(4)}[r.UpdateID]; !bytes.Equal(r.Body, want) {
			c.errorf("Due returned update %d with body %q; want %q", r.UpdateID, r.Body, want)
		}
	}
}
