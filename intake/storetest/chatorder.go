package storetest

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tgrelay/tgrelay/intake"
)

// The ChatOrder group checks an [intake.ChatOrderStore]: through
// ClaimInOrder only a chat's lowest unsettled row is claimable, and never
// while another row of the chat holds a live lease; DueInOrder lists only
// such rows, and, given a chat, only that chat's.

const (
	// strictMax is the attempt ceiling of the cases' strict claims, high
	// enough that no case spends a row unless it means to.
	strictMax = 5
)

func chatOrderCases() []testCase {
	return []testCase{
		{name: "OnlyLowestUnsettledClaimable", rule: "under strict chat order a row is claimable only when no earlier row of its chat is pending, processing or failed",
			needs: capChatOrder, run: chatOrderLowestOnly},
		{name: "SettledReleasesChat", rule: "a completed or abandoned row releases its chat, a failed one holds it until it is settled for good",
			needs: capChatOrder, run: chatOrderRelease},
		{name: "ExhaustionReleasesChat", rule: "an exhaustion, acknowledged or not, releases its chat",
			needs: capChatOrder, run: chatOrderExhaustion},
		{name: "LiveLeaseHoldsLateEarlier", rule: "an earlier row recorded after a later one of its chat was claimed waits while that one's lease is live",
			needs: capChatOrder, run: chatOrderLateEarlier},
		{name: "NotStrictIgnoresChat", rule: "Claim and Due ignore the chat; only ClaimInOrder and DueInOrder keep order",
			needs: capChatOrder, run: chatOrderNotStrict},
		{name: "DueListsOnlyClaimable", rule: "a strict listing skips rows held back by their chat, so they cannot fill a page, and Chat lists one chat",
			needs: capChatOrder, run: chatOrderDue},
		{name: "DueBoundaries", rule: "a strict listing, whole or of one chat, lists a processing row once its lease has ended (not at its end) and a failed row from its retry time on",
			needs: capChatOrder, run: chatOrderDueBoundaries},
		{name: "DuePendingGrace", rule: "a strict listing, whole or of one chat, lists a pending row once it was received at or before PendingBefore, and failed and lapsed rows by Now",
			needs: capChatOrder, run: chatOrderDuePendingGrace},
		{name: "DueListsLapsedOwners", rule: "a strict listing lists a processing row whose owner lapsed, as a strict claim takes it",
			needs: capChatOrder | capProcess, run: chatOrderDueLapsed},
		{name: "DueJudgesLeasesAtNow", rule: "a strict listing judges a later row's lease at its Now, whatever its PendingBefore, as a strict claim at that Now does",
			needs: capChatOrder, run: chatOrderDueLeaseAtNow},
		{name: "LongChatKeys", rule: "chat keys of up to intake.MaxChatKey bytes are kept whole: chats that differ only in their last byte are two chats",
			needs: capChatOrder, run: chatOrderLongKeys},
		{name: "ConcurrentClaimsOfOneChat", rule: "of a claim of a chat's later row and an earlier row added and claimed at the same time, exactly one wins",
			needs: capChatOrder, run: chatOrderRaceWide},
	}
}

// addChat records id with its standard body in chat (empty: none).
func (c *checker) addChat(id int64, chat string, receivedMS int64) {
	ok, err := c.store.Add(c.ctx, intake.Incoming{UpdateID: id, Body: body(id), ReceivedAt: at(receivedMS), Chat: chat})
	c.failed(fmt.Sprintf("Add(%d, chat %q)", id, chat), err)
	if !ok {
		c.fatalf("Add(%d, chat %q) of a new update id reported false", id, chat)
	}
}

// strictOpts are the claimOpts of a strict claim.
func strictOpts(nowMS, leaseMS int64, max int) intake.ClaimOpts {
	return claimOpts(nowMS, leaseMS, max)
}

// claimInOrder is ClaimInOrder by no process, remembering the identity for
// renew and settle.
func (c *checker) claimInOrder(id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	ident, ok, err := c.order.ClaimInOrder(c.ctx, id, o, intake.ProcessClaim{})
	if ok {
		c.remember(ident)
	}
	return ident, ok, err
}

// strictClaim claims id in strict order and reports whether it was taken.
func (c *checker) strictClaim(id int64, nowMS, leaseMS int64, max int) (int, bool) {
	ident, ok, err := c.claimInOrder(id, strictOpts(nowMS, leaseMS, max))
	c.failed(fmt.Sprintf("ClaimInOrder(%d, now %dms)", id, nowMS), err)
	return ident.Attempt, ok
}

// expectStrict claims id in strict order and reports a violation unless the
// outcome is want; why explains the expectation.
func (c *checker) expectStrict(id int64, nowMS, leaseMS int64, want bool, why string) int {
	attempt, ok := c.strictClaim(id, nowMS, leaseMS, strictMax)
	if ok != want {
		c.errorf("ClaimInOrder(%d, now %dms) = attempt %d, %v; want %v: %s", id, nowMS, attempt, ok, want, why)
	}
	return attempt
}

// strictDue lists in strict order, optionally one chat's rows.
func (c *checker) strictDue(nowMS, pendingBeforeMS int64, limit int, chat string) []int64 {
	rows, err := c.order.DueInOrder(c.ctx, intake.DueQuery{Now: at(nowMS), PendingBefore: at(pendingBeforeMS), Limit: limit}, chat)
	c.failed(fmt.Sprintf("DueInOrder(now %dms, chat %q)", nowMS, chat), err)
	return storedIDs(rows)
}

// chatOrderLowestOnly: of chat "a" only the lowest pending row is
// claimable; another chat's rows and rows without a chat are not held; a
// pending or processing earlier row holds the chat; a refused claim spends
// nothing.
func chatOrderLowestOnly(c *checker) {
	c.addChat(1, "a", 0)
	c.addChat(2, "a", 0)
	c.addChat(3, "b", 0)
	c.addChat(4, "", 0)
	c.addChat(5, "", 0)
	c.expectStrict(2, 10, 100, false, "row 1 of its chat is pending")
	c.expectStrict(3, 10, 100, true, "it is the only row of chat b")
	c.expectStrict(5, 10, 100, true, "a row without a chat is never held back")
	c.expectStrict(4, 10, 100, true, "a row without a chat is never held back")
	c.expectStrict(1, 10, 100, true, "it is the lowest row of chat a")
	c.expectStrict(2, 20, 200, false, "row 1 of its chat is processing")
	// Row 2's refusals spent nothing: once row 1 completes it gets attempt 1.
	if !c.settle(1, 1, completed(30)) {
		c.fatalf("Settle(1, attempt 1, completed at 30ms) under a live lease reported false")
	}
	if attempt := c.expectStrict(2, 40, 400, true, "row 1 of its chat completed"); attempt != 1 {
		c.errorf("Claim(2) after two refusals for order got attempt %d; want 1: a refusal spends no attempt", attempt)
	}
}

// chatOrderRelease: a failed row holds its chat even after its retry is
// due; once it completes the next row is claimable; an abandoned row
// releases too; a lapsed lease on an earlier processing row still holds.
func chatOrderRelease(c *checker) {
	for id := int64(1); id <= 4; id++ {
		c.addChat(id, "a", 0)
	}
	c.expectStrict(1, 10, 100, true, "it is the lowest row of chat a")
	if !c.settle(1, 1, failedAt(20, 50, "boom")) {
		c.fatalf("Settle(1, attempt 1, failed at 20ms) under a live lease reported false")
	}
	c.expectStrict(2, 30, 300, false, "row 1 of its chat failed and waits for its retry")
	c.expectStrict(2, 60, 600, false, "row 1 of its chat failed (its retry is due)")
	c.expectStrict(1, 60, 600, true, "its retry is due and it is the lowest row of its chat")
	c.expectStrict(2, 700, 800, false, "row 1 of its chat is processing, even with its lease lapsed")
	c.expectStrict(1, 700, 800, true, "its lease lapsed at 600ms")
	if !c.settle(1, 3, completed(710)) {
		c.fatalf("Settle(1, attempt 3, completed at 710ms) under a live lease reported false")
	}
	c.expectStrict(2, 720, 900, true, "row 1 of its chat completed")
	if !c.settle(2, 1, abandoned(730, "given up")) {
		c.fatalf("Settle(2, attempt 1, abandoned at 730ms) under a live lease reported false")
	}
	c.expectStrict(4, 740, 900, false, "row 3 of its chat is pending")
	c.expectStrict(3, 740, 900, true, "rows 1 and 2 of its chat are settled")
}

// chatOrderExhaustion: an unacknowledged exhaustion (Exhaust, or a claim
// that spends a row) releases its chat.
func chatOrderExhaustion(c *checker) {
	c.addChat(1, "a", 0)
	c.addChat(2, "a", 0)
	c.addChat(3, "a", 0)
	o := strictOpts(10, 100, 1)
	id, ok, err := c.claimInOrder(1, o)
	c.failed("ClaimInOrder(1)", err)
	if !ok {
		c.fatalf("ClaimInOrder(1, now 10ms) of the lowest row of its chat reported false")
	}
	c.expectStrict(2, 20, 200, false, "row 1 of its chat is processing")
	if !c.exhaust(id, 30, "poisoned") {
		c.fatalf("Exhaust(%s, at 30ms) under a live lease reported false", fmtID(id))
	}
	o = strictOpts(40, 400, 1)
	id2, ok, err := c.claimInOrder(2, o)
	c.failed("ClaimInOrder(2)", err)
	if !ok {
		c.errorf("ClaimInOrder(2, now 40ms) = false after row 1 of its chat was exhausted; an exhaustion releases its chat")
		return
	}
	c.expectStrict(3, 50, 500, false, "row 2 of its chat is processing")
	// Row 2's lease lapses on its last attempt: the next claim spends it
	// into an unacknowledged exhaustion, which releases the chat too.
	o = strictOpts(410, 900, 1)
	if _, ok, err := c.claimInOrder(2, o); err != nil || ok {
		c.fatalf("ClaimInOrder(2, now 410ms, MaxAttempts 1) = %v, %v; want false (spent), no error", ok, err)
	}
	if _, found := c.findExhaustion(id2.UpdateID); !found {
		c.errorf("row 2, spent by a claim, is not listed as an exhaustion")
	}
	c.expectStrict(3, 420, 900, true, "rows 1 and 2 of its chat are exhaustions")
}

// chatOrderLateEarlier: row 2 of chat a is claimed; row 1 of the chat
// arrives late. Row 1 waits while row 2's lease is live, and is claimable
// once it lapsed; row 2 is then held by row 1.
func chatOrderLateEarlier(c *checker) {
	c.addChat(2, "a", 0)
	c.expectStrict(2, 10, 100, true, "it is the only row of chat a")
	c.addChat(1, "a", 20)
	c.expectStrict(1, 30, 300, false, "row 2 of its chat is processing under a live lease")
	c.expectStrict(1, 100, 300, false, "row 2's lease is live through its end, 100ms")
	c.expectStrict(1, 101, 300, true, "row 2's lease lapsed at 100ms")
	c.expectStrict(2, 102, 300, false, "row 1 of its chat is processing")
}

// chatOrderDueLeaseAtNow: a strict listing judges the live lease of a
// later row of the chat at q.Now, not at q.PendingBefore (which a sweep
// sets earlier, by the pending grace). Row 2 of chat a is claimed to 50ms,
// then the earlier row 1 is recorded: row 1 is held at 40ms, however late
// PendingBefore, and listed at 60ms, however early PendingBefore (it was
// received at 0ms), as strict claims at those times agree.
func chatOrderDueLeaseAtNow(c *checker) {
	c.addChat(2, "a", 0)
	c.expectStrict(2, 0, 50, true, "it is the only row of chat a")
	c.addChat(1, "a", 0)
	for _, chat := range []string{"", "a"} {
		if ids := c.strictDue(40, 55, 10, chat); len(ids) != 0 {
			c.errorf("DueInOrder(now 40ms, pending before 55ms, chat %q) listed %v; want none: row 2 of chat a is processing under a lease live at 40ms (to 50ms)", chat, ids)
		}
		if ids := c.strictDue(60, 45, 10, chat); !slices.Equal(ids, []int64{1}) {
			c.errorf("DueInOrder(now 60ms, pending before 45ms, chat %q) listed %v; want [1]: row 2's lease ended at 50ms, and row 1 (received at 0ms) holds row 2 back", chat, ids)
		}
	}
	c.expectStrict(1, 40, 300, false, "row 2 of its chat is processing under a lease live at 40ms")
	c.expectStrict(1, 60, 300, true, "row 2's lease ended at 50ms")
}

// chatOrderNotStrict: outside ClaimInOrder and DueInOrder the chat changes
// nothing.
func chatOrderNotStrict(c *checker) {
	c.addChat(1, "a", 0)
	c.addChat(2, "a", 0)
	c.mustClaim(2, claimOpts(10, 100, defaultMax), 1)
	c.mustClaim(1, claimOpts(10, 100, defaultMax), 1)
	c.addChat(3, "a", 0)
	if ids := c.dueIDs(20, 20, 10); !slices.Equal(ids, []int64{3}) {
		c.errorf("Due(now 20ms) listed %v; want [3]: Due ignores the chat", ids)
	}
}

// chatOrderDue: a strict listing lists a chat's lowest unsettled row only
// (once claimable), rows of other chats and without a chat, whatever the
// number of held rows before them; Chat narrows it to one chat.
func chatOrderDue(c *checker) {
	c.addChat(1, "a", 0)
	for id := int64(2); id <= 40; id++ {
		c.addChat(id, "a", 0)
	}
	c.addChat(41, "b", 0)
	c.addChat(42, "", 0)
	c.addChat(43, "b", 0)
	c.addChat(44, "c", 50) // pending, received after the listing's bound
	if ids := c.strictDue(10, 10, 5, ""); !slices.Equal(ids, []int64{1, 41, 42}) {
		c.errorf("DueInOrder(now 10ms, limit 5) listed %v; want [1 41 42]: rows 2-40 and 43 are held by rows 1 and 41, 44 is too fresh", ids)
	}
	if ids := c.strictDue(10, 10, 5, "b"); !slices.Equal(ids, []int64{41}) {
		c.errorf("DueInOrder(now 10ms, chat b) listed %v; want [41]", ids)
	}
	c.expectStrict(1, 20, 100, true, "it is the lowest row of chat a")
	if ids := c.strictDue(30, 30, 5, "a"); len(ids) != 0 {
		c.errorf("DueInOrder(now 30ms, chat a) listed %v while row 1 of chat a is processing; want none", ids)
	}
	if !c.settle(1, 1, completed(40)) {
		c.fatalf("Settle(1, attempt 1, completed at 40ms) under a live lease reported false")
	}
	if ids := c.strictDue(50, 50, 1, "a"); !slices.Equal(ids, []int64{2}) {
		c.errorf("DueInOrder(now 50ms, chat a, limit 1) after row 1 completed listed %v; want [2]", ids)
	}
	// PendingBefore is inclusive: row 44, received at 50ms, is listed at
	// 50ms and not at 49ms.
	if ids := c.strictDue(50, 50, 10, ""); !slices.Equal(ids, []int64{2, 41, 42, 44}) {
		c.errorf("DueInOrder(now 50ms, pending before 50ms) listed %v; want [2 41 42 44]: row 44 was received at 50ms", ids)
	}
	if ids := c.strictDue(50, 50, 10, "c"); !slices.Equal(ids, []int64{44}) {
		c.errorf("DueInOrder(now 50ms, pending before 50ms, chat c) listed %v; want [44], received at 50ms", ids)
	}
	if ids := c.strictDue(50, 49, 10, "c"); len(ids) != 0 {
		c.errorf("DueInOrder(now 50ms, pending before 49ms, chat c) listed %v; want none: row 44 was received at 50ms", ids)
	}
	if ids := c.strictDue(60, 60, 10, ""); !slices.Equal(ids, []int64{2, 41, 42, 44}) {
		c.errorf("DueInOrder(now 60ms) listed %v; want [2 41 42 44]", ids)
	}
}

// chatOrderDueBoundaries: the strict listing's time bounds, as Due's: a
// lease is live through its end inclusive, a retry is due at its time.
func chatOrderDueBoundaries(c *checker) {
	c.addChat(1, "a", 0)
	c.addChat(2, "b", 0)
	c.expectStrict(1, 0, 10, true, "it is the lowest row of chat a")
	c.expectStrict(2, 0, 10, true, "it is the lowest row of chat b")
	if !c.settle(2, 1, failedAt(5, 30, "retry later")) {
		c.fatalf("Settle(2, attempt 1, failed at 5ms, retry at 30ms) reported false")
	}
	for _, chat := range []string{"", "a"} {
		if ids := c.strictDue(10, 10, 10, chat); slices.Contains(ids, 1) {
			c.errorf("DueInOrder(now 10ms, chat %q) listed %v at exactly row 1's lease end; the lease is live through its end", chat, ids)
		}
		if ids := c.strictDue(11, 11, 10, chat); !slices.Contains(ids, 1) {
			c.errorf("DueInOrder(now 11ms, chat %q) listed %v; want row 1, whose lease ended at 10ms", chat, ids)
		}
	}
	for _, chat := range []string{"", "b"} {
		if ids := c.strictDue(29, 29, 10, chat); slices.Contains(ids, 2) {
			c.errorf("DueInOrder(now 29ms, chat %q) listed %v; row 2's retry is at 30ms", chat, ids)
		}
		if ids := c.strictDue(30, 30, 10, chat); !slices.Contains(ids, 2) {
			c.errorf("DueInOrder(now 30ms, chat %q) listed %v at exactly row 2's retry time; want row 2", chat, ids)
		}
	}
}

// chatOrderDuePendingGrace: DueInOrder is Due listing only rows a strict
// claim at Now could take, and Due lists a pending row only once it was
// received at or before PendingBefore (the pending grace gives the process
// that recorded a row the first chance at it), and the other rows as
// claimable at Now. A strict listing, whole or of one chat, keeps the
// grace for pending rows, with a chat and without, and judges a failed
// row's retry and a lapsed lease at Now, not at PendingBefore.
func chatOrderDuePendingGrace(c *checker) {
	c.addChat(3, "b", 0)
	c.addChat(4, "c", 0)
	c.expectStrict(3, 0, 5, true, "it is the lowest row of chat b")
	c.expectStrict(4, 0, 12, true, "it is the lowest row of chat c")
	if !c.settle(3, 1, failedAt(1, 15, "retry at 15ms")) {
		c.fatalf("Settle(3, attempt 1, failed at 1ms, retry at 15ms) of a live lease reported false")
	}
	c.addChat(1, "a", 10)
	c.addChat(2, "", 10)
	for chat, want := range map[string][]int64{"": {3, 4}, "a": nil, "b": {3}, "c": {4}} {
		if ids := c.strictDue(20, 9, 10, chat); !slices.Equal(ids, want) {
			c.errorf("DueInOrder(now 20ms, pending before 9ms, chat %q) listed %v; want %v: rows 1 and 2 were received at 10ms, within the pending grace, row 3's retry at 15ms and row 4's lease end at 12ms are before now", chat, ids, want)
		}
	}
	if ids := c.strictDue(20, 10, 10, ""); !slices.Equal(ids, []int64{1, 2, 3, 4}) {
		c.errorf("DueInOrder(now 20ms, pending before 10ms) listed %v; want [1 2 3 4], rows 1 and 2 received at exactly 10ms", ids)
	}
	if ids := c.strictDue(20, 10, 10, "a"); !slices.Equal(ids, []int64{1}) {
		c.errorf("DueInOrder(now 20ms, pending before 10ms, chat %q) listed %v; want [1], received at exactly 10ms", "a", ids)
	}
}

// chatOrderLongKeys: a ChatOrderStore must keep an [intake.Incoming.Chat]
// of up to [intake.MaxChatKey] bytes, so two keys of that length that
// differ only in their last byte name two chats: neither holds the other's
// rows, in claims, in listings or, for an [intake.AdminStore], in a search
// by chat.
func chatOrderLongKeys(c *checker) {
	prefix := strings.Repeat("7", intake.MaxChatKey-1)
	a, b := prefix+"a", prefix+"b"
	c.addChat(1, a, 0)
	c.addChat(2, b, 0)
	c.addChat(3, a, 0)
	if ids := c.strictDue(10, 10, 10, ""); !slices.Equal(ids, []int64{1, 2}) {
		c.errorf("DueInOrder(now 10ms) listed %v; want [1 2]: updates 1 and 2 are the lowest rows of two chats of %d bytes", ids, intake.MaxChatKey)
	}
	if ids := c.strictDue(10, 10, 10, b); !slices.Equal(ids, []int64{2}) {
		c.errorf("DueInOrder(now 10ms, chat %q) listed %v; want [2]", b, ids)
	}
	c.expectStrict(2, 10, 100, true, fmt.Sprintf("its chat of %d bytes differs from update 1's in its last byte", intake.MaxChatKey))
	c.expectStrict(3, 10, 100, false, "update 1 of its chat is pending")
	if c.admin == nil {
		return
	}
	rows, err := c.admin.Search(c.ctx, intake.SearchQuery{Chat: a, Limit: 10})
	c.failed("Search(chat of update 1)", err)
	if got := rowIDs(rows); !slices.Equal(got, []int64{3, 1}) {
		c.errorf("Search(chat %q) listed %v; want [3 1]", a, got)
	}
}

// chatOrderDueLapsed: a row claimed in order by a process whose heartbeat
// then lapsed is listed by DueInOrder, with and without its chat, before
// its lease ends, and a strict claim takes it over.
func chatOrderDueLapsed(c *checker) {
	c.mustRegister("p", 50)
	c.addChat(1, "a", 0)
	c.addChat(2, "a", 0)
	o := owned(0, 10_000, defaultMax, "p")
	if _, ok, err := c.order.ClaimInOrder(c.ctx, 1, o.opts, o.p); err != nil || !ok {
		c.fatalf("ClaimInOrder(1, now 0ms, as p) = %v, %v; want it taken", ok, err)
	}
	if ids := c.strictDue(40, 40, 10, ""); len(ids) != 0 {
		c.errorf("DueInOrder(now 40ms) listed %v while row 1's owner and lease are live; want none", ids)
	}
	for _, chat := range []string{"", "a"} {
		if ids := c.strictDue(100, 100, 10, chat); !slices.Equal(ids, []int64{1}) {
			c.errorf("DueInOrder(now 100ms, chat %q) listed %v after row 1's owner lapsed at 50ms; want [1]", chat, ids)
		}
	}
	o = owned(100, 20_000, defaultMax, "q")
	if _, ok, err := c.order.ClaimInOrder(c.ctx, 1, o.opts, o.p); err != nil || !ok {
		c.errorf("ClaimInOrder(1, now 100ms, as q) of the row it listed = %v, %v; want it taken over", ok, err)
	}
}
