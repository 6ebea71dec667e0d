package storetest

import (
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
)

// More cases of [intake.ChatOrderStore]: the chat of rows recorded through
// the batch adds, strict listings that agree with strict claims, a refusal
// for order that spends nothing, and strict claims of one chat racing.

const (
	// chatRaceFirstID is the first update id of the wide chat order race.
	chatRaceFirstID = 5000
	// chatRacePairs is how many chats race at once in each round of the
	// wide chat order race: two racers each, all released together.
	chatRacePairs = 8
	// chatRaceRounds is how many rounds the wide chat order race runs.
	chatRaceRounds = barrierRounds / 2
)

func chatOrderPromiseCases() []testCase {
	return []testCase{
		{name: "BatchAddsKeepChat", rule: "rows recorded through AddBatch, claimed or not, keep their chat, as rows recorded through Add do",
			needs: capChatOrder, run: chatOrderBatchAdds},
		{name: "DueAgreesWithClaims", rule: "a strict listing lists exactly the rows a strict claim at the same time takes",
			needs: capChatOrder, run: chatOrderDueAgrees},
		{name: "OrderRefusalSpendsNothing", rule: "a strict claim refused for order changes nothing, even for a row at its attempt limit",
			needs: capChatOrder, run: chatOrderRefusalSpendsNothing},
		{name: "PruneKeepsChatHeld", rule: pruneKeepsChatHeldRule, needs: capChatOrder, run: chatOrderPruneKeepsHeld},
		{name: "DueChatPage", rule: chatDuePageRule, needs: capChatOrder, run: chatOrderDueChatPage},
	}
}

// chatOrderBatchAdds: rows of one chat recorded in one AddBatch, claimed
// or not, are held in order like rows recorded one Add at a time.
func chatOrderBatchAdds(c *checker) {
	req := func(id int64, chat string, o *intake.ClaimOpts) intake.AddRequest {
		r := addReq(id, 0, o)
		r.Chat = chat
		return r
	}
	added := c.addClaimed(req(1, "a", nil), req(2, "a", nil), req(3, "", nil))
	for i, r := range added {
		if !r.Added || r.Claimed() {
			c.fatalf("result %d of AddBatch([1 2 3]) of new update ids = added %v, claimed %v; want added, not claimed", i, r.Added, r.Claimed())
		}
	}
	c.expectStrict(2, 10, 100, false, "row 1 of its chat a, recorded by the same AddBatch, is pending")
	if ids := c.strictDue(10, 10, 10, "a"); !slices.Equal(ids, []int64{1}) {
		c.errorf("DueInOrder(now 10ms, chat a) after AddBatch listed %v; want [1]: the batch recorded rows 1 and 2 in chat a", ids)
	}
	res := c.addClaimed(
		req(11, "b", claimPtr(0, 100, strictMax)), req(12, "b", nil),
		req(21, "c", nil), req(22, "c", nil),
	)
	if !c.checkClaimedResult(res[0], 11) {
		return
	}
	c.expectStrict(12, 10, 100, false, "row 11 of its chat b, recorded claimed by the same AddBatch, is processing")
	c.expectStrict(22, 10, 100, false, "row 21 of its chat c, recorded by the same AddBatch, is pending")
	if ids := c.strictDue(10, 10, 10, "b"); len(ids) != 0 {
		c.errorf("DueInOrder(now 10ms, chat b) listed %v; want none: row 11 of chat b, recorded claimed, is processing", ids)
	}
	if ids := c.strictDue(10, 10, 10, "c"); !slices.Equal(ids, []int64{21}) {
		c.errorf("DueInOrder(now 10ms, chat c) listed %v; want [21]", ids)
	}
	if !c.settleOwned(res[0].Identity, completed(20)) {
		c.fatalf("Settle(%s, completed at 20ms) of a claimed add reported false", fmtID(res[0].Identity))
	}
	c.expectStrict(12, 30, 100, true, "row 11 of its chat completed")
}

// chatOrderDueAgrees builds chats in every state a strict claim decides
// on, then, at one time, checks that the strict listing is the expected
// one and that it agrees with strict claims: every row it leaves out is
// refused, every row it lists is taken.
func chatOrderDueAgrees(c *checker) {
	// Chat a: row 2 claimed under a live lease, row 1 recorded late.
	c.addChat(2, "a", 0)
	c.expectStrict(2, 10, 200, true, "it is the only row of chat a")
	c.addChat(1, "a", 20)
	// Chat a2: row 4 claimed, its lease lapsed at 100ms; row 3 recorded late.
	c.addChat(4, "a2", 0)
	c.expectStrict(4, 10, 100, true, "it is the only row of chat a2")
	c.addChat(3, "a2", 20)
	// Chat b: row 10 failed, retry at 200ms; chat b2: row 12 failed, retry
	// at 100ms.
	for _, r := range []struct {
		id      int64
		chat    string
		retryMS int64
	}{{10, "b", 200}, {12, "b2", 100}} {
		c.addChat(r.id, r.chat, 0)
		c.addChat(r.id+1, r.chat, 0)
		c.expectStrict(r.id, 10, 100, true, "it is the lowest row of its chat")
		if !c.settle(r.id, 1, failedAt(20, r.retryMS, "boom")) {
			c.fatalf("Settle(%d, attempt 1, failed at 20ms) under a live lease reported false", r.id)
		}
	}
	// Chat c: row 20 claimed, its lease lapsed at 30ms.
	c.addChat(20, "c", 0)
	c.addChat(21, "c", 0)
	c.expectStrict(20, 10, 30, true, "it is the lowest row of chat c")
	// Chats d and e: the first row completed, abandoned.
	for _, r := range []struct {
		id   int64
		chat string
		end  intake.Settlement
	}{{30, "d", completed(20)}, {40, "e", abandoned(20, "given up")}} {
		c.addChat(r.id, r.chat, 0)
		c.addChat(r.id+1, r.chat, 0)
		c.expectStrict(r.id, 10, 100, true, "it is the lowest row of its chat")
		if !c.settle(r.id, 1, r.end) {
			c.fatalf("Settle(%d, attempt 1, %s at 20ms) under a live lease reported false", r.id, r.end.State)
		}
	}
	// No chat: never held.
	c.addChat(50, "", 0)
	c.addChat(51, "", 0)

	all := []int64{1, 2, 3, 4, 10, 11, 12, 13, 20, 21, 30, 31, 40, 41, 50, 51}
	chatOf := map[int64]string{1: "a", 2: "a", 3: "a2", 4: "a2", 10: "b", 11: "b", 12: "b2", 13: "b2", 20: "c", 21: "c", 30: "d", 31: "d", 40: "e", 41: "e", 50: "", 51: ""}
	want := []int64{3, 12, 20, 31, 41, 50, 51}
	listed := c.strictDue(150, 150, 100, "")
	if !slices.Equal(listed, want) {
		c.errorf("DueInOrder(now 150ms) listed %v; want %v: 1 waits for 2's live lease, 2 and 4 for the earlier 1 and 3, "+
			"10 for its retry at 200ms and 11 for 10, 13 for 12, 21 for 20; 3, 12 (retry due), 20 (lease lapsed), 31, 41 (their chats released), 50 and 51 (no chat) are claimable",
			listed, want)
	}
	if page := c.strictDue(150, 150, 3, ""); !slices.Equal(page, listed[:min(3, len(listed))]) {
		c.errorf("DueInOrder(now 150ms, limit 3) listed %v; want %v, the first page of the full listing", page, listed[:min(3, len(listed))])
	}
	for _, chat := range []string{"a", "a2", "b", "b2", "c", "d", "e"} {
		var of []int64
		for _, id := range listed {
			if chatOf[id] == chat {
				of = append(of, id)
			}
		}
		if got := c.strictDue(150, 150, 100, chat); !slices.Equal(got, of) {
			c.errorf("DueInOrder(now 150ms, chat %q) listed %v; want %v, the rows of chat %q in the full strict listing", chat, got, of, chat)
		}
	}
	// A refused strict claim changes nothing, so the rows left out are
	// tried first; then each listed row, the only one of its chat.
	for _, id := range all {
		if slices.Contains(listed, id) {
			continue
		}
		if attempt, ok := c.strictClaim(id, 150, 1000, strictMax); ok {
			c.errorf("ClaimInOrder(%d, now 150ms) took attempt %d, but DueInOrder(now 150ms) did not list it: listing and claim disagree", id, attempt)
		}
	}
	for _, id := range listed {
		if _, ok := c.strictClaim(id, 150, 1000, strictMax); !ok {
			c.errorf("ClaimInOrder(%d, now 150ms) was refused, but DueInOrder(now 150ms) listed it: listing and claim disagree", id)
		}
	}
}

// chatOrderRefusalSpendsNothing: a row at its attempt limit whose retry is
// due (row 2) or whose lease lapsed (row 12), held back by an earlier row
// of its chat recorded late, is refused for order by strict claims at its
// limit, by no process or by one, and stays exactly as it was: not
// abandoned, not an exhaustion; a takeover from a lapsed owner refused
// for order counts no crash. Once its chat is free the same claim spends
// it.
func chatOrderRefusalSpendsNothing(c *checker) {
	c.addChat(2, "a", 0)
	c.mustClaim(2, claimOpts(0, 10, 1), 1)
	if !c.settle(2, 1, failedAt(5, 20, "boom")) {
		c.fatalf("Settle(2, attempt 1, failed at 5ms) under a live lease reported false")
	}
	c.addChat(1, "a", 6)
	c.addChat(12, "b", 0)
	c.mustClaim(12, claimOpts(0, 10, 1), 1)
	c.addChat(11, "b", 6)

	variants := []struct {
		name string
		p    intake.ProcessClaim
	}{{"ClaimInOrder", intake.ProcessClaim{}}}
	if c.process != nil {
		c.mustRegister("refused", 1_000_000)
		variants = append(variants, struct {
			name string
			p    intake.ProcessClaim
		}{`ClaimInOrder(process "refused")`, intake.ProcessClaim{Process: "refused", MaxCrashes: 1}})
	}
	for _, v := range variants {
		for _, id := range []int64{2, 12} {
			_, ok, err := c.order.ClaimInOrder(c.ctx, id, strictOpts(30, 100, 1), v.p)
			c.failed(fmt.Sprintf("%s(%d, now 30ms, MaxAttempts 1)", v.name, id), err)
			if ok {
				c.errorf("%s(%d, now 30ms) took the row; an earlier row of its chat is pending", v.name, id)
			}
		}
	}
	if ids := c.dueIDs(30, 30, 10); !slices.Equal(ids, []int64{1, 2, 11, 12}) {
		c.errorf("Due(now 30ms) after strict claims refused for order listed %v; want [1 2 11 12]: a refusal for order spends nothing", ids)
	}
	if c.admin != nil {
		if row, ok := c.get(2); !ok || row.State != intake.StateFailed || row.Attempts != 1 || row.Error != "boom" || !row.DueAt.Equal(at(20)) || !row.SettledAt.IsZero() {
			c.errorf("Get(2) after strict claims refused for order = %s, attempts %d, error %q, due %s, settled %s; want failed, 1, \"boom\", due 20ms, not settled: the refusal changed the row",
				row.State, row.Attempts, row.Error, offset(row.DueAt), offset(row.SettledAt))
		}
		if row, ok := c.get(12); !ok || row.State != intake.StateProcessing || row.Attempts != 1 || !row.DueAt.Equal(at(10)) {
			c.errorf("Get(12) after strict claims refused for order = %s, attempts %d, due %s; want processing, 1, due 10ms (its lapsed lease): the refusal changed the row",
				row.State, row.Attempts, offset(row.DueAt))
		}
	}
	if es := c.dueExhaustions(10, nil); len(es) != 0 {
		c.errorf("DueExhaustions after strict claims refused for order listed update %d; a refusal for order spends nothing", es[0].UpdateID)
	}
	if c.process != nil {
		// A takeover from a lapsed owner refused for order counts no crash.
		c.mustRegister("gone", 25)
		c.mustRegister("here", 1_000_000)
		c.addChat(32, "c", 0)
		// Its lease ends at 35ms: a live lease of a later row holds row 31
		// back however dead its owner, so it must end before 31 can run.
		c.mustClaimAs(32, owned(0, 35, 1, "gone"), 1)
		c.addChat(31, "c", 6)
		strictTakeover := func(nowMS int64) (intake.Identity, bool) {
			o := withCrashes(owned(nowMS, 200_000, 1, "here"), 2)
			ident, ok, err := c.order.ClaimInOrder(c.ctx, 32, o.opts, o.p)
			c.failed(fmt.Sprintf(`ClaimInOrder(32, now %dms, process "here")`, nowMS), err)
			if ok {
				c.remember(ident)
			}
			return ident, ok
		}
		for range 2 {
			if id, ok := strictTakeover(30); ok {
				c.errorf(`ClaimInOrder(32, now 30ms, process "here") took %s from its lapsed owner; an earlier row of its chat is pending`, fmtID(id))
			}
		}
		if c.admin != nil {
			if row, _ := c.get(32); row.State != intake.StateProcessing || row.Attempts != 1 || row.Crashes != 0 {
				c.errorf("Get(32) after strict takeovers refused for order = %s, attempts %d, crashes %d; want processing, 1, 0: a refusal for order counts no crash",
					row.State, row.Attempts, row.Crashes)
			}
		}
		c.expectStrict(31, 40, 100, true, "it is the lowest row of chat c")
		if !c.settle(31, 1, completed(50)) {
			c.fatalf("Settle(31, attempt 1, completed at 50ms) under a live lease reported false")
		}
		if id, ok := strictTakeover(60); !ok || id.Attempt != 2 {
			c.errorf(`ClaimInOrder(32, now 60ms, process "here", MaxAttempts 1, MaxCrashes 2) = %s, %v once its chat was free; `+
				"want attempt 2: the refusals for order counted no crash, so this takeover is its first", fmtID(id), ok)
		}
	}
	// Free the chats; now the same claims spend the rows.
	for _, id := range []int64{1, 11} {
		c.expectStrict(id, 40, 100, true, "it is the lowest row of its chat")
		if !c.settle(id, 1, completed(50)) {
			c.fatalf("Settle(%d, attempt 1, completed at 50ms) under a live lease reported false", id)
		}
	}
	for _, id := range []int64{2, 12} {
		if attempt, ok := c.strictClaim(id, 60, 100, 1); ok {
			c.errorf("ClaimInOrder(%d, now 60ms, MaxAttempts 1) took attempt %d; its one attempt is spent", id, attempt)
		}
	}
	if ids := c.dueIDs(60, 60, 10); len(ids) != 0 {
		c.errorf("Due(now 60ms) listed %v; want none: rows 2 and 12 were spent once their chats were free", ids)
	}
}

// chatOrderRaceWide: in each round chatRacePairs fresh chats race at once,
// all their racers released together: in each chat row id+1 is pending;
// one racer adds row id of the chat (an earlier update arriving late) and
// claims it, while another claims row id+1, both in strict order. Whatever
// the interleaving exactly one claim of each chat wins: a claim that checks
// the chat and takes the row in two steps, or that does not see a
// concurrent claim of the chat, lets both win. Racing many chats at once
// makes many windows per barrier, and the delays before one racer or the
// other, a yield of the processor or not and then a spin from none to about
// a hundred and fifty microseconds (a database's round trip), differ per
// chat, so that some pair straddles the window wherever it lies, whether
// the racers run in parallel or take turns on one processor.
func chatOrderRaceWide(c *checker) {
	bad := 0
	for round := range chatRaceRounds {
		var (
			mu  sync.Mutex
			won = map[string][]int64{}
			fns []func()
		)
		claim := func(chat string, id int64) {
			_, ok, err := c.order.ClaimInOrder(c.ctx, id, strictOpts(10, 100, strictMax), intake.ProcessClaim{})
			if err != nil {
				c.errorf("a concurrent ClaimInOrder(%d) returned an error: %v", id, err)
				return
			}
			if ok {
				mu.Lock()
				won[chat] = append(won[chat], id)
				mu.Unlock()
			}
		}
		chats := make([]string, chatRacePairs)
		for p := range chatRacePairs {
			id := int64(chatRaceFirstID + 2*(round*chatRacePairs+p))
			chat := fmt.Sprintf("race-%d-%d", round, p)
			chats[p] = chat
			c.addChat(id+1, chat, 0)
			k := round*chatRacePairs + p
			delay := func(mine int, fn func()) func() {
				return func() {
					if k%2 == mine {
						if k%4 >= 2 {
							runtime.Gosched()
						}
						spin(1 << (k / 4 % 15))
					}
					fn()
				}
			}
			fns = append(fns,
				delay(0, func() {
					ok, err := c.store.Add(c.ctx, intake.Incoming{UpdateID: id, Body: body(id), ReceivedAt: at(5), Chat: chat})
					if err != nil || !ok {
						c.errorf("Add(%d, chat %q) = %v, %v; want true, no error", id, chat, ok, err)
						return
					}
					claim(chat, id)
				}),
				delay(1, func() { claim(chat, id+1) }),
			)
		}
		together(c, fns...)
		for _, chat := range chats {
			if w := won[chat]; len(w) != 1 {
				bad++
				if bad <= 3 {
					slices.Sort(w)
					c.errorf("round %d: strict claims of two rows of chat %q, the earlier added at the same time, took %v; exactly one must win", round, chat, w)
				}
			}
		}
	}
	if bad > 3 {
		c.errorf("in %d of %d chats strict claims of one chat did not take exactly one row", bad, chatRaceRounds*chatRacePairs)
	}
}
