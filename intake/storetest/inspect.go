package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// RunInspect checks the inspection reads of an [intake.AdminStore]
// against a fresh store from newStore: Search's order, filters and cursor;
// Replies across updates with their rows, filters, order and cursor;
// Processes with the rows each holds; and HeldBehind. The store must also
// be an [intake.JournalStore] and an [intake.ProcessStore], which the
// fixtures are written through. [Run] runs the same checks as its
// Admin/Inspect case, for a store with all three capabilities.
func RunInspect(t *testing.T, newStore func(t *testing.T) intake.Store) {
	t.Helper()
	st, ok := newStore(t).(inspectStore)
	if !ok {
		t.Fatal("storetest: RunInspect needs an admin, journal and process store")
	}
	inspectReads(t, t.Context(), st)
}

// inspectStore is a store the inspection checks can write their fixture
// through.
type inspectStore interface {
	intake.AdminStore
	intake.JournalStore
	intake.ProcessStore
}

// adminInspect is the Admin/Inspect case: RunInspect's checks inside Run.
func adminInspect(c *checker) {
	inspectReads(caseT{c}, c.ctx, c.store.(inspectStore))
}

// inspectT is what the inspection checks report through: the
// *testing.T of RunInspect, or a case's checker.
type inspectT interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// caseT reports a case's violations through its checker.
type caseT struct{ c *checker }

func (caseT) Helper()                             {}
func (t caseT) Errorf(format string, args ...any) { t.c.errorf(format, args...) }
func (t caseT) Fatalf(format string, args ...any) { t.c.fatalf(format, args...) }

func inspectReads(t inspectT, ctx context.Context, st inspectStore) {
	t0 := time.UnixMilli(1_700_000_000_000).UTC()
	ms := func(n int64) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	must := func(ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("fixture step refused: %v %v", ok, err)
		}
	}
	body := func(id int64) []byte { return fmt.Appendf(nil, `{"update_id":%d,"t":"text-%d"}`, id, id) }
	chat := func(id int64) string { return fmt.Sprint(100 + id%2) }
	// Updates 1..6, chats 101 (odd) and 100 (even); body "text-<id>".
	for id := int64(1); id <= 6; id++ {
		ok, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: body(id), Chat: chat(id), ReceivedAt: ms(id)})
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
	id2, ok, err := st.ClaimAs(ctx, 2, opts(10, 100_000), as("p-live"))
	must(ok, err)
	_, ok, err = st.ClaimAs(ctx, 3, opts(10, 100_000), as("p-dead"))
	must(ok, err)
	_, ok, err = st.ClaimAs(ctx, 4, opts(10, 100_000), as("p-dead"))
	must(ok, err)
	id4, ok, err := st.ClaimAs(ctx, 4, opts(100, 200_000), as("p-live"))
	must(ok, err)
	// 7 and 8 (no chat): exhaustions, 8 acknowledged. 9 and 10 (no chat):
	// pending. 11 (chat 102): failed, its retry far off, its owner p-live
	// still recorded. 12 (chat 102): pending behind it.
	for id := int64(7); id <= 12; id++ {
		c := ""
		if id >= 11 {
			c = "102"
		}
		ok, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: body(id), Chat: c, ReceivedAt: ms(id)})
		must(ok, err)
	}
	for _, id := range []int64{7, 8} {
		ex, ok, err := st.ClaimAs(ctx, id, opts(10, 100_000), as("p-live"))
		must(ok, err)
		must(st.Exhaust(ctx, ex, ms(60), "spent"))
		if id == 8 {
			must(st.AcknowledgeExhaustion(ctx, ex, ms(70)))
		}
	}
	id11, ok, err := st.ClaimAs(ctx, 11, opts(10, 100_000), as("p-live"))
	must(ok, err)
	must(st.Settle(ctx, id11, intake.Settlement{State: intake.StateFailed, At: ms(80), RetryAt: ms(900_000), Error: "later"}))

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
		{"all, newest first", intake.SearchQuery{Limit: 20}, "12,11,10,9,8,7,6,5,4,3,2,1"},
		{"limit", intake.SearchQuery{Limit: 2}, "12,11"},
		{"before", intake.SearchQuery{Before: before(5), Limit: 2}, "4,3"},
		{"state", intake.SearchQuery{State: intake.StateProcessing, Limit: 20}, "4,3,2"},
		{"abandoned", intake.SearchQuery{State: intake.StateAbandoned, Limit: 20}, "8,7"},
		{"unacknowledged", intake.SearchQuery{Unacknowledged: true, Limit: 20}, "7"},
		{"chat", intake.SearchQuery{Chat: "101", Limit: 10}, "5,3,1"},
		{"text", intake.SearchQuery{Text: "text-3", Limit: 10}, "3"},
		{"text at the body's start", intake.SearchQuery{Text: `{"update_id":3,`, Limit: 10}, "3"},
		{"text byte for byte, case included", intake.SearchQuery{Text: "TEXT-3", Limit: 10}, ""},
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
		t.Errorf("Search with Limit 0: no error")
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
		if decided := r.Outcome != intake.CallPending; decided != r.DecidedAt.Equal(ms(30)) || !decided && !r.DecidedAt.IsZero() {
			t.Errorf("Replies: %s entry decided at %v, want %v for a decided entry, the zero time for a pending one", r.Outcome, r.DecidedAt, ms(30))
		}
	}
	if strings.Join(got, ",") != "pending,unknown,answered" {
		t.Errorf("Replies newest first: %v, want pending,unknown,answered", got)
	}
	if rs := replies(intake.ReplyQuery{Outcomes: []intake.CallOutcome{intake.CallUnknown, intake.CallPending}, Limit: 10}); len(rs) != 2 {
		t.Errorf("Replies unknown or pending: %d, want 2", len(rs))
	}
	if rs := replies(intake.ReplyQuery{Outcomes: []intake.CallOutcome{intake.CallUnknown}, Limit: 10}); len(rs) != 1 || rs[0].Outcome != intake.CallUnknown {
		t.Errorf("Replies unknown only: %+v, want the one unknown entry", rs)
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
		t.Errorf("Replies with an invalid outcome: no error")
	}

	// Intents of one millisecond: two occurrences of one call of update
	// 2, and a call of update 4. Replies orders them by the rest of the
	// key, descending.
	for _, j := range []struct {
		id  intake.Identity
		occ int
	}{{id2, 1}, {id4, 1}, {id2, 2}} {
		_, in, err := st.RecordIntent(ctx, j.id, intake.Call{Method: "sendMessage", ParamsHash: "same", Occurrence: j.occ}, ms(200))
		must(in == intake.IntentRecorded, err)
	}
	var keys []string
	for _, r := range replies(intake.ReplyQuery{Since: ms(200), Limit: 10}) {
		keys = append(keys, fmt.Sprintf("%d/%d", r.UpdateID, r.Occurrence))
	}
	if got := strings.Join(keys, ","); got != "4/1,2/2,2/1" {
		t.Errorf("Replies of one millisecond: %s, want 4/1,2/2,2/1 (update id, then occurrence, descending)", got)
	}

	pl, err := st.Processes(ctx, 10)
	if err != nil {
		t.Fatalf("Processes: %v", err)
	}
	var procs []string
	for _, p := range pl.Processes {
		procs = append(procs, p.ID)
	}
	if strings.Join(procs, ",") != "p-dead,p-live" || !pl.Processes[0].Until.Equal(ms(50)) || !pl.Processes[1].Until.Equal(ms(1_000_000)) {
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
		t.Errorf("Processes held: %v, want 4:p-live,3:p-dead,2:p-live (processing rows only)", held)
	}
	if pl, err := st.Processes(ctx, 1); err != nil || len(pl.Processes) != 1 || len(pl.Held) != 1 {
		t.Errorf("Processes limit 1: %+v %v", pl, err)
	}
	if _, err := st.Processes(ctx, 0); !errors.Is(err, intake.ErrInvalidArgument) {
		t.Errorf("Processes limit 0: %v, want an error wrapping intake.ErrInvalidArgument", err)
	}

	// 12 waits for 11, failed; 10 has no chat, so it waits for nothing.
	for id, want := range map[int64]int64{5: 3, 6: 2, 2: 0, 1: 0, 99: 0, 12: 11, 10: 0} {
		first, ok, err := st.HeldBehind(ctx, id)
		if err != nil {
			t.Fatalf("HeldBehind(%d): %v", id, err)
		}
		if ok != (want != 0) || first != want {
			t.Errorf("HeldBehind(%d): %d %v, want %d", id, first, ok, want)
		}
	}
	if !slices.ContainsFunc(all, func(r intake.Reply) bool { return r.Status == 200 }) {
		t.Errorf("Replies: the answered entry lost its status")
	}
}
