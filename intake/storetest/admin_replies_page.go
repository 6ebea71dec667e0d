package storetest

import (
	"fmt"
	"strings"

	"github.com/tgrelay/tgrelay/intake"
)

// repliesPageRule is the rule of repliesPage.
const repliesPageRule = "a Replies page holds the newest entries its filters select, up to its limit: entries a filter drops never take its places"

// repliesPage: Replies selects entries by outcome, method, chat and intent
// time, and cuts its page after selecting, never before, so a page of a
// filter is the newest entries that pass it. A store that took the newest
// entries first (a LIMIT before the conditions) and then dropped those a
// filter rejects lists fewer, or none, while older matching entries exist.
// Four calls, newest first: update 1's sendPhoto at 40ms (pending), update
// 2's sendMessage at 30ms (unknown), update 2's sendPhoto at 20ms
// (pending) and update 1's sendMessage at 10ms (answered); update 1 is of
// chat "x", update 2 of chat "y". Every filter, with a limit of 1 and of
// 2, and with a cursor, lists the first of the entries it selects.
func repliesPage(c *checker) {
	ids := map[int64]intake.Identity{}
	for id, chat := range map[int64]string{1: "x", 2: "y"} {
		ok, err := c.store.Add(c.ctx, intake.Incoming{UpdateID: id, Body: body(id), ReceivedAt: at(0), Chat: chat})
		c.failed(fmt.Sprintf("Add(%d, chat %q)", id, chat), err)
		if !ok {
			c.fatalf("Add(%d, chat %q) of a new update id reported false", id, chat)
		}
		ids[id] = c.mustClaimOwned(id, claimOpts(0, 1000, defaultMax), 1)
	}
	type entry struct {
		update  int64
		method  string
		atMS    int64
		outcome intake.CallOutcome
	}
	// Oldest first, as recorded; Replies lists them newest first.
	entries := []entry{
		{1, "sendMessage", 10, intake.CallAnswered},
		{2, "sendPhoto", 20, intake.CallPending},
		{2, "sendMessage", 30, intake.CallUnknown},
		{1, "sendPhoto", 40, intake.CallPending},
	}
	for _, e := range entries {
		cl := call(e.method, 1)
		if _, in := c.intent(ids[e.update], cl, e.atMS); in != intake.IntentRecorded {
			c.fatalf("RecordIntent(%s, %s, at %dms) = %s; want recorded", fmtID(ids[e.update]), e.method, e.atMS, in)
		}
		if e.outcome == intake.CallPending {
			continue
		}
		res := intake.CallResult{Outcome: e.outcome, Body: []byte("answer")}
		if e.outcome == intake.CallAnswered {
			res.Status = 200
		}
		ok, err := c.journal.RecordOutcome(c.ctx, ids[e.update], cl, res, at(e.atMS+1))
		c.failed(fmt.Sprintf("RecordOutcome(%s, %s)", fmtID(ids[e.update]), e.method), err)
		if !ok {
			c.fatalf("RecordOutcome(%s, %s) of its pending intent reported false", fmtID(ids[e.update]), e.method)
		}
	}
	name := func(update int64, method string) string { return fmt.Sprintf("%d/%s", update, method) }
	var newest []intake.ReplyKey // the keys, newest first
	listed := func(rs []intake.Reply) string {
		var s []string
		for _, r := range rs {
			s = append(s, name(r.UpdateID, r.Method))
		}
		return "[" + strings.Join(s, " ") + "]"
	}
	all, err := c.admin.Replies(c.ctx, intake.ReplyQuery{Limit: 10})
	c.failed("Replies(limit 10)", err)
	if got := listed(all); got != "[1/sendPhoto 2/sendMessage 2/sendPhoto 1/sendMessage]" {
		c.fatalf("Replies(limit 10) = %s; want [1/sendPhoto 2/sendMessage 2/sendPhoto 1/sendMessage], newest first", got)
	}
	for _, r := range all {
		newest = append(newest, r.Key())
	}
	for _, tc := range []struct {
		what string
		q    intake.ReplyQuery
		want []string // every entry the filter selects, newest first
	}{
		{"method sendMessage", intake.ReplyQuery{Method: "sendMessage"}, []string{"2/sendMessage", "1/sendMessage"}},
		{"chat y", intake.ReplyQuery{Chat: "y"}, []string{"2/sendMessage", "2/sendPhoto"}},
		{"outcome answered", intake.ReplyQuery{Outcomes: []intake.CallOutcome{intake.CallAnswered}}, []string{"1/sendMessage"}},
		{"outcomes answered or unknown", intake.ReplyQuery{Outcomes: []intake.CallOutcome{intake.CallAnswered, intake.CallUnknown}}, []string{"2/sendMessage", "1/sendMessage"}},
		{"intended before 25ms", intake.ReplyQuery{Until: at(25)}, []string{"2/sendPhoto", "1/sendMessage"}},
		{"intended in [10ms, 35ms)", intake.ReplyQuery{Since: at(10), Until: at(35)}, []string{"2/sendMessage", "2/sendPhoto", "1/sendMessage"}},
		{"method sendPhoto of chat x", intake.ReplyQuery{Method: "sendPhoto", Chat: "x"}, []string{"1/sendPhoto"}},
		{"method sendMessage below the newest entry", intake.ReplyQuery{Method: "sendMessage", Before: &newest[0]}, []string{"2/sendMessage", "1/sendMessage"}},
		{"chat x below the second newest entry", intake.ReplyQuery{Chat: "x", Before: &newest[1]}, []string{"1/sendMessage"}},
	} {
		for _, limit := range []int{1, 2} {
			q := tc.q
			q.Limit = limit
			rs, err := c.admin.Replies(c.ctx, q)
			c.failed(fmt.Sprintf("Replies(%s, limit %d)", tc.what, limit), err)
			want := "[" + strings.Join(tc.want[:min(limit, len(tc.want))], " ") + "]"
			if got := listed(rs); got != want {
				c.errorf("Replies(%s, limit %d) = %s; want %s: the page holds the newest entries the filter selects", tc.what, limit, got, want)
			}
		}
	}
}
