package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// RunInspect checks the inspection reads of an [intake.AdminStore]
// against a fresh store from newStore: Search's order, filters and cursor;
// Replies across updates with their rows, filters and cursor; Processes
// with the rows each holds; and HeldBehind. The store must also be an
// [intake.JournalStore] and an [intake.ProcessStore], which the fixtures
// are written through.
func RunInspect(t *testing.T, newStore func(t *testing.T) intake.Store) {
	t.Helper()
	type full interface {
		intake.AdminStore
		intake.JournalStore
		intake.ProcessStore
	}
	st, ok := newStore(t).(full)
	if !ok {
		t.Fatal("storetest: RunInspect needs an admin, journal and process store")
	}
	ctx := t.Context()
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	ms := func(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	must := func(ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("fixture step refused: %v %v", ok, err)
		}
	}
	chat := func(id int64) string { return fmt.Sprint(100 + id%2) }
	// Updates 1..6, chats 101 (odd) and 100 (even); body "text-<id>".
	for id := int64(1); id <= 6; id++ {
		ok, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: fmt.Appendf(nil, `{"update_id":%d,"t":"text-%d"}`, id, id), Chat: chat(id), ReceivedAt: ms(id)})
		must(ok, err)
	}
	must(st.Register(ctx, "p-live", ms(1_000_000)))
	must(st.Register(ctx, "p-dead", ms(50)))
	opts := func(now, until int64) intake.ClaimOpts {
		return intake.ClaimOpts{Now: ms(now), LeaseUntil: ms(until), MaxAttempts: 5}
	}
	as := func(owner string) intake.ProcessClaim { return intake.ProcessClaim{Process: owner, MaxCrashes: 3} }
	// 1: completed, with three journaled calls. 2: processing by p-live.
	// 3: processing by p-dead. 4: taken over from p-dead by p-live (a
	// crash). 5 and 6 pending.
	id1, ok, err := st.ClaimAs(ctx, 1, opts(10, 100_000), as("p-live"))
	must(ok, err)
	for i, o := range []intake.CallOutcome{intake.CallAnswered, intake.CallUnknown, intake.CallPending} {
		call := intake.Call{Method: []string{"sendMessage", "sendPhoto", "sendMessage"}[i], ParamsHash: fmt.Sprint("h", i), Occurrence: 1}
		_, in, err := st.RecordIntent(ctx, id1, call, ms(20+int64(i)))
		must(in == intake.IntentRecorded, err)
		if o != intake.CallPending {
			must(st.RecordOutcome(ctx, id1, call, intake.CallResult{Outcome: o, Status: map[bool]int{true: 200}[o == intake.CallAnswered], Body: []byte("answer")}, ms(30)))
		}
	}
	must(st.Settle(ctx, id1, intake.Settlement{State: intake.StateCompleted, At: ms(40)}))
	_, ok, err = st.ClaimAs(ctx, 2, opts(10, 100_000), as("p-live"))
	must(ok, err)
	_, ok, err = st.ClaimAs(ctx, 3, opts(10, 100_000), as("p-dead"))
	must(ok, err)
	_, ok, err = st.ClaimAs(ctx, 4, opts(10, 100_000), as("p-dead"))
	must(ok, err)
	_, ok, err = st.ClaimAs(ctx, 4, opts(100, 200_000), as("p-live"))
	must(ok, err)

	ids := func(rows []intake.Row) string {
		var s []string
		for _, r := range rows {
			s = append(s, fmt.Sprint(r.UpdateID))
		}
		return strings.Join(s, ",")
	}
	before := func(n int64) *int64 { return &n }
	for _, tc := range []struct {
		name string
		q    intake.SearchQuery
		want string
	}{
		{"all, newest first", intake.SearchQuery{Limit: 10}, "6,5,4,3,2,1"},
		{"limit", intake.SearchQuery{Limit: 2}, "6,5"},
		{"before", intake.SearchQuery{Before: before(5), Limit: 2}, "4,3"},
		{"state", intake.SearchQuery{State: intake.StateProcessing, Limit: 10}, "4,3,2"},
		{"chat", intake.SearchQuery{Chat: "101", Limit: 10}, "5,3,1"},
		{"text", intake.SearchQuery{Text: "text-3", Limit: 10}, "3"},
		{"crashed", intake.SearchQuery{Crashed: true, Limit: 10}, "4"},
		{"nothing", intake.SearchQuery{Text: "absent", Limit: 10}, ""},
	} {
		rows, err := st.Search(ctx, tc.q)
		if err != nil {
			t.Fatalf("Search %s: %v", tc.name, err)
		}
		if got := ids(rows); got != tc.want {
			t.Errorf("Search %s: %s, want %s", tc.name, got, tc.want)
		}
	}
	if _, err := st.Search(ctx, intake.SearchQuery{}); err == nil {
		t.Error("Search with Limit 0: no error")
	}

	replies := func(q intake.ReplyQuery) []intake.Reply {
		t.Helper()
		rs, err := st.Replies(ctx, q)
		if err != nil {
			t.Fatalf("Replies %+v: %v", q, err)
		}
		return rs
	}
	all := replies(intake.ReplyQuery{Limit: 10})
	var got []string
	for _, r := range all {
		got = append(got, string(r.Outcome))
		if r.Row.UpdateID != 1 || r.Row.State != intake.StateCompleted || r.Row.Body != nil || r.Chat != "101" {
			t.Errorf("Replies: row %+v chat %q, want update 1 completed, no body, chat 101", r.Row, r.Chat)
		}
	}
	if strings.Join(got, ",") != "pending,unknown,answered" {
		t.Errorf("Replies newest first: %v, want pending,unknown,answered", got)
	}
	if rs := replies(intake.ReplyQuery{Outcomes: []intake.CallOutcome{intake.CallUnknown, intake.CallPending}, Limit: 10}); len(rs) != 2 {
		t.Errorf("Replies unknown or pending: %d, want 2", len(rs))
	}
	if rs := replies(intake.ReplyQuery{Method: "sendPhoto", Limit: 10}); len(rs) != 1 || rs[0].Outcome != intake.CallUnknown {
		t.Errorf("Replies by method: %+v", rs)
	}
	if rs := replies(intake.ReplyQuery{Chat: "100", Limit: 10}); len(rs) != 0 {
		t.Errorf("Replies of chat 100: %d, want 0", len(rs))
	}
	if rs := replies(intake.ReplyQuery{Since: ms(21), Until: ms(22), Limit: 10}); len(rs) != 1 || rs[0].Method != "sendPhoto" {
		t.Errorf("Replies in [21, 22) ms: %+v", rs)
	}
	k := all[0].Key()
	if rs := replies(intake.ReplyQuery{Before: &k, Limit: 1}); len(rs) != 1 || rs[0].Key() != all[1].Key() {
		t.Errorf("Replies after the cursor: %+v, want the second entry", rs)
	}
	if _, err := st.Replies(ctx, intake.ReplyQuery{Outcomes: []intake.CallOutcome{"bogus"}, Limit: 1}); err == nil {
		t.Error("Replies with an invalid outcome: no error")
	}

	pl, err := st.Processes(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var procs []string
	for _, p := range pl.Processes {
		procs = append(procs, p.ID)
	}
	if strings.Join(procs, ",") != "p-dead,p-live" || !pl.Processes[1].Until.Equal(ms(1_000_000)) {
		t.Errorf("Processes: %+v", pl.Processes)
	}
	var held []string
	for _, h := range pl.Held {
		held = append(held, fmt.Sprintf("%d:%s", h.Row.UpdateID, h.Owner))
		if h.Row.Body != nil {
			t.Errorf("Processes: held row %d carries its body", h.Row.UpdateID)
		}
	}
	if strings.Join(held, ",") != "4:p-live,3:p-dead,2:p-live" {
		t.Errorf("Processes held: %v, want 4:p-live,3:p-dead,2:p-live", held)
	}
	if pl, err := st.Processes(ctx, 1); err != nil || len(pl.Processes) != 1 || len(pl.Held) != 1 {
		t.Errorf("Processes limit 1: %+v %v", pl, err)
	}

	for id, want := range map[int64]int64{5: 3, 6: 2, 2: 0, 1: 0, 99: 0} {
		first, ok, err := st.HeldBehind(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if ok != (want != 0) || first != want {
			t.Errorf("HeldBehind(%d): %d %v, want %d", id, first, ok, want)
		}
	}
	if !slices.ContainsFunc(all, func(r intake.Reply) bool { return r.Status == 200 }) {
		t.Error("Replies: the answered entry lost its status")
	}
}
