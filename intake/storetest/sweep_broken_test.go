package storetest

import (
	"cmp"
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// Broken stores for cases that a rule-by-rule mutation sweep of the three
// stores showed were missing: each breaks one stated rule only at its
// edge, and passed Run before its case.

// duplicateMovesReceipt takes the receipt time of a duplicate Add of a
// pending row as the row's own, as an upsert that refreshes the row would:
// Due judges and reports the row by the duplicate's time.
type duplicateMovesReceipt struct {
	*memstore.Store
	mu    sync.Mutex
	moved map[int64]time.Time
}

func (s *duplicateMovesReceipt) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	ok, err := s.Store.Add(ctx, u)
	if err == nil && !ok {
		s.mu.Lock()
		s.moved[u.UpdateID] = u.ReceivedAt
		s.mu.Unlock()
	}
	return ok, err
}

func (s *duplicateMovesReceipt) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	rows, err := s.Store.Due(ctx, q)
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := rows[:0]
	for _, r := range rows {
		if t, ok := s.moved[r.UpdateID]; ok {
			if t.After(q.PendingBefore) {
				continue
			}
			r.ReceivedAt = t
		}
		kept = append(kept, r)
	}
	return kept, err
}

func TestDuplicateMovesReceiptFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &duplicateMovesReceipt{Store: m, moved: map[int64]time.Time{}}
	}), "Add")
	requireCases(t, res, "Add/DuplicateChangesNothing")
	requireMessage(t, res, "Add/DuplicateChangesNothing", "Due(now 10ms, pending before 0ms) listed []; want [1 2]")
}

// spendsBeforeRetry spends a failed row on its last attempt at any claim,
// its retry due or not, as a claim that checks the attempt ceiling before
// claimability would.
type spendsBeforeRetry struct{ *memstore.Store }

func (s spendsBeforeRetry) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	if row, ok, err := s.Get(ctx, id); err == nil && ok && row.State == intake.StateFailed && row.Attempts >= o.MaxAttempts && row.DueAt.After(o.Now) {
		o.Now = row.DueAt
	}
	return s.Store.Claim(ctx, id, o)
}

func TestSpendsBeforeRetryFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return spendsBeforeRetry{m} }), "Claim")
	requireCases(t, res, "Claim/SpendWaitsForRetry")
	requireMessage(t, res, "Claim/SpendWaitsForRetry", "a claim at 29ms, before the retry at 30ms, spent update 1")
}

// strictIgnoresGrace lists pending rows in strict order, across chats,
// without their pending grace, as a whole strict listing that reads Now
// where it means PendingBefore would (its one-chat form keeps the grace).
type strictIgnoresGrace struct{ *memstore.Store }

func (s strictIgnoresGrace) DueInOrder(ctx context.Context, q intake.DueQuery, chat string) ([]intake.StoredUpdate, error) {
	if chat == "" {
		q.PendingBefore = q.Now
	}
	return s.Store.DueInOrder(ctx, q, chat)
}

func TestStrictIgnoresGraceFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return strictIgnoresGrace{m} }), "ChatOrder")
	requireCasesOr(t, res, []string{"ChatOrder/DueAgreesWithClaims"}, "ChatOrder/DuePendingGrace")
	requireMessage(t, res, "ChatOrder/DuePendingGrace", "within the pending grace")
}

// pagesReadReceipt reports, on every page after a cursor, an exhaustion's
// receipt time as its exhaustion time, as a paged query that selects the
// wrong column would.
type pagesReadReceipt struct{ *memstore.Store }

func (s pagesReadReceipt) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	es, err := s.Store.DueExhaustions(ctx, q)
	if err != nil || q.After == nil {
		return es, err
	}
	for i, e := range es {
		row, ok, err := s.Get(ctx, e.UpdateID)
		if err != nil {
			return nil, err
		}
		if ok {
			es[i].ExhaustedAt = row.ReceivedAt
		}
	}
	return es, nil
}

func TestPagesReadReceiptFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return pagesReadReceipt{m} }), "Exhaust")
	requireCases(t, res, "Exhaust/CursorPagesKeepFields")
	requireMessage(t, res, "Exhaust/CursorPagesKeepFields", "DueExhaustions(limit 1, after 0) =", "exhausted at 1ms", "want", "exhausted at 21ms")
}

// dueByRequeue lists a requeued row only once its requeue time is at or
// before PendingBefore, as a listing that reads a pending row's due time
// where it means its receipt would.
type dueByRequeue struct{ *memstore.Store }

func (s dueByRequeue) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	rows, err := s.Store.Due(ctx, q)
	if err != nil {
		return nil, err
	}
	kept := rows[:0]
	for _, r := range rows {
		row, ok, err := s.Get(ctx, r.UpdateID)
		if err != nil {
			return nil, err
		}
		if ok && row.State == intake.StatePending && row.DueAt.After(q.PendingBefore) {
			continue
		}
		kept = append(kept, r)
	}
	return kept, nil
}

func TestDueByRequeueFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return dueByRequeue{m} }), "Add", "Admin")
	requireCases(t, res, "Admin/RequeuedDueByReceipt")
	requireMessage(t, res, "Admin/RequeuedDueByReceipt", "Due(now 100ms, pending before 50ms) listed [] after update 1, received at 0ms, was requeued at 100ms")
}

// listDropsUnacknowledgedBesideState lists every row of a state when a
// query asks for a state and unacknowledged exhaustions together, as a
// listing that builds one filter or the other would.
type listDropsUnacknowledgedBesideState struct{ *memstore.Store }

func (s listDropsUnacknowledgedBesideState) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	if q.State != "" {
		q.Unacknowledged = false
	}
	return s.Store.List(ctx, q)
}

func TestListDropsUnacknowledgedBesideStateFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return listDropsUnacknowledgedBesideState{m} }), "Admin")
	requireCases(t, res, "Admin/StateAndUnacknowledged", "Admin/ListPageOfMatches")
	requireMessage(t, res, "Admin/StateAndUnacknowledged", "List(state abandoned, unacknowledged) listed [1 2 3]; want [2]")
}

// noProcessKeepsOwner keeps a row's owner when a claim by no process takes
// it over, as a claim that writes the owner only when it names one would:
// the row stays claimable for as long as that owner is lapsed.
type noProcessKeepsOwner struct {
	*memstore.Store
	mu    sync.Mutex
	owner map[int64]string // the owner each row was last claimed by, if any
}

func (s *noProcessKeepsOwner) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.ClaimAs(ctx, id, o, intake.ProcessClaim{})
}

func (s *noProcessKeepsOwner) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.Process == "" {
		p.Process = s.owner[id]
	}
	ident, ok, err := s.Store.ClaimAs(ctx, id, o, p)
	if ok && p.Process != "" {
		s.owner[id] = p.Process
	}
	return ident, ok, err
}

func TestNoProcessKeepsOwnerFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &noProcessKeepsOwner{Store: m, owner: map[int64]string{}}
	}), "Process/TakeoverByNoProcess", "Process/OnlyTheOwnerCounts")
	requireCases(t, res, "Process/TakeoverByNoProcess")
	requireMessage(t, res, "Process/TakeoverByNoProcess", "ClaimAs(1) at 30ms by no process took")
}

// truncatesChat keeps only the first 32 bytes of a chat key, as a column
// too narrow for intake.MaxChatKey would: two chats that share those bytes
// become one.
type truncatesChat struct{ *memstore.Store }

func truncateChat(chat string) string { return chat[:min(len(chat), 32)] }

func (s truncatesChat) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	u.Chat = truncateChat(u.Chat)
	return s.Store.Add(ctx, u)
}

func (s truncatesChat) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	return s.AddBatchAs(ctx, reqs, intake.ProcessClaim{})
}

func (s truncatesChat) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	cp := append([]intake.AddRequest(nil), reqs...)
	for i := range cp {
		cp[i].Chat = truncateChat(cp[i].Chat)
	}
	return s.Store.AddBatchAs(ctx, cp, p)
}

func TestTruncatesChatFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return truncatesChat{m} }), "ChatOrder", "Admin")
	requireCases(t, res, "ChatOrder/LongChatKeys")
	requireMessage(t, res, "ChatOrder/LongChatKeys", "DueInOrder(now 10ms) listed [1]; want [1 2]")
}

// cursorFromNext continues a listing from the id after its cursor,
// inclusive, in wrapping int64 arithmetic: after the largest update id it
// starts again from the lowest.
type cursorFromNext struct{ *memstore.Store }

func (s cursorFromNext) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	if q.After != nil && *q.After+1 < *q.After {
		q.After = nil
	}
	return s.Store.DueExhaustions(ctx, q)
}

func TestCursorFromNextFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return cursorFromNext{m} }), "Add", "Exhaust")
	requireCases(t, res, "Add/LargestUpdateID")
	requireMessage(t, res, "Add/LargestUpdateID", "DueExhaustions(after 9223372036854775807) listed [0 9223372036854775807]; want none")
}

// searchChatPrefix selects, for a Search by chat, every row whose chat
// starts with the one asked for, as a pattern match would.
type searchChatPrefix struct{ *memstore.Store }

func (s searchChatPrefix) Search(ctx context.Context, q intake.SearchQuery) ([]intake.Row, error) {
	if q.Chat == "" {
		return s.Store.Search(ctx, q)
	}
	var out []intake.Row
	for _, chat := range []string{"-100", "-1001", "@a_b", "@axb"} { // the chats the case records
		if !strings.HasPrefix(chat, q.Chat) {
			continue
		}
		rows, err := s.Store.Search(ctx, intake.SearchQuery{Chat: chat, Limit: q.Limit})
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	slices.SortFunc(out, func(a, b intake.Row) int { return cmp.Compare(b.UpdateID, a.UpdateID) })
	return out, nil
}

func TestSearchChatPrefixFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return searchChatPrefix{m} }), "Admin/SearchChatExact")
	requireCases(t, res, "Admin/SearchChatExact")
	requireMessage(t, res, "Admin/SearchChatExact", `Search(chat "-100") listed [2 1]; want [1]`)
}

// processesShareLimit fills the page of held rows only up to what the
// processes left of limit, as a listing that limits the two lists together
// would.
type processesShareLimit struct{ *memstore.Store }

func (s processesShareLimit) Processes(ctx context.Context, limit int) (intake.ProcessList, error) {
	pl, err := s.Store.Processes(ctx, limit)
	if err == nil && len(pl.Held) > limit-len(pl.Processes) {
		pl.Held = pl.Held[:max(limit-len(pl.Processes), 0)]
	}
	return pl, err
}

func TestProcessesShareLimitFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return processesShareLimit{m} }), "Admin/ProcessesByIDEachLimited")
	requireCases(t, res, "Admin/ProcessesByIDEachLimited")
	requireMessage(t, res, "Admin/ProcessesByIDEachLimited", "Processes(limit 3) = processes [p-a p-b p-c], held []; want [p-a p-b p-c] by id and [3 2 1] newest first")
}

// oldestPendingCountsFailed takes a failed row's retry time for the
// oldest pending, as a query over every waiting row would.
type oldestPendingCountsFailed struct{ *memstore.Store }

func (s oldestPendingCountsFailed) Stats(ctx context.Context) (intake.Stats, error) {
	st, err := s.Store.Stats(ctx)
	if err != nil {
		return st, err
	}
	rows, err := s.List(ctx, intake.ListQuery{State: intake.StateFailed, Limit: 1000})
	for _, r := range rows {
		if st.OldestPending.IsZero() || r.DueAt.Before(st.OldestPending) {
			st.OldestPending = r.DueAt
		}
	}
	return st, err
}

func TestOldestPendingCountsFailedFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return oldestPendingCountsFailed{m} }), "Admin/OldestPendingOnlyPending")
	requireCases(t, res, "Admin/OldestPendingOnlyPending")
	requireMessage(t, res, "Admin/OldestPendingOnlyPending", "Stats().OldestPending = 5ms; want 10ms")
}

// renewCheckThenWrite checks the holder's live lease on a read, yields,
// and then reports the renewal done, whatever its write found, as a
// renewal that reads the row and then updates it by update id would.
type renewCheckThenWrite struct{ *memstore.Store }

func (s renewCheckThenWrite) Renew(ctx context.Context, id intake.Identity, until, now time.Time) (bool, error) {
	if held, err := s.Owns(ctx, id, now); err != nil || !held {
		return false, err
	}
	runtime.Gosched()
	_, err := s.Store.Renew(ctx, id, until, now)
	return err == nil, err
}

func TestRenewCheckThenWriteFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return renewCheckThenWrite{m} }))
	requireCases(t, res, "Fence/RenewRacingReclaim")
	requireMessage(t, res, "Fence/RenewRacingReclaim", "Renew(to 300ms, now at the lease end) and Claim one millisecond later both succeeded in ")
}

// ackCheckThenWrite finds the exhaustion on a read, yields, and then
// reports the acknowledgement done, whatever its write found.
type ackCheckThenWrite struct{ *memstore.Store }

func (s ackCheckThenWrite) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	row, ok, err := s.Get(ctx, id.UpdateID)
	if err != nil || !ok || !row.Unacknowledged() || row.Attempts != id.Attempt || row.ClaimID != id.ClaimID {
		return false, err
	}
	runtime.Gosched()
	_, err = s.Store.AcknowledgeExhaustion(ctx, id, at)
	return err == nil, err
}

func TestAckCheckThenWriteFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return ackCheckThenWrite{m} }))
	requireCases(t, res, "Exhaust/ConcurrentAcks")
	requireMessage(t, res, "Exhaust/ConcurrentAcks", "concurrent AcknowledgeExhaustion(", "calls reported true; exactly one must")
}

// requeueCheckThenWrite finds a failed or abandoned row on a read, yields,
// and then reports the requeue done, whatever its write found.
type requeueCheckThenWrite struct{ *memstore.Store }

func (s requeueCheckThenWrite) Requeue(ctx context.Context, id int64, now time.Time) (bool, error) {
	row, ok, err := s.Get(ctx, id)
	if err != nil || !ok || (row.State != intake.StateFailed && row.State != intake.StateAbandoned) {
		return false, err
	}
	runtime.Gosched()
	_, err = s.Store.Requeue(ctx, id, now)
	return err == nil, err
}

func TestRequeueCheckThenWriteFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return requeueCheckThenWrite{m} }))
	requireCases(t, res, "Admin/ConcurrentRequeues")
	requireMessage(t, res, "Admin/ConcurrentRequeues", "concurrent Requeue(", "calls of a failed row reported true; exactly one must")
}

// pruneCountsSelected selects the prunable rows on a read, yields, deletes
// them, and reports how many it selected, whatever its delete found.
type pruneCountsSelected struct{ *memstore.Store }

func (s pruneCountsSelected) Prune(ctx context.Context, before time.Time) (int, error) {
	rows, err := s.List(ctx, intake.ListQuery{Limit: 1 << 20})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range rows {
		if (r.State == intake.StateCompleted || r.State == intake.StateAbandoned) && !r.SettledAt.IsZero() && r.SettledAt.Before(before) {
			n++
		}
	}
	runtime.Gosched()
	_, err = s.Store.Prune(ctx, before)
	return n, err
}

func TestPruneCountsSelectedFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return pruneCountsSelected{m} }))
	requireCases(t, res, "Prune/ConcurrentPrunesCountOnce")
	requireMessage(t, res, "Prune/ConcurrentPrunesCountOnce", "concurrent Prune(before 20ms) calls reported", "rows deleted in all; 2 rows were settled")
}

// outcomeCheckThenWrite finds the pending entry on a read, yields, and
// then reports the outcome recorded, whatever its write found.
type outcomeCheckThenWrite struct{ *memstore.Store }

func (s outcomeCheckThenWrite) RecordOutcome(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	if intake.CheckCallResult(call, res) != nil {
		return s.Store.RecordOutcome(ctx, id, call, res, at)
	}
	es, err := s.Journal(ctx, id.UpdateID)
	if err != nil {
		return false, err
	}
	i := slices.IndexFunc(es, func(e intake.JournalEntry) bool {
		return e.Call == call && e.Outcome == intake.CallPending && e.Attempt == id.Attempt && e.ClaimID == id.ClaimID
	})
	if i < 0 {
		return false, nil
	}
	runtime.Gosched()
	_, err = s.Store.RecordOutcome(ctx, id, call, res, at)
	return err == nil, err
}

func TestOutcomeCheckThenWriteFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return outcomeCheckThenWrite{m} }))
	requireCases(t, res, "Journal/ConcurrentOutcomes")
	requireMessage(t, res, "Journal/ConcurrentOutcomes", "concurrent RecordOutcome calls of one pending intent of update", "reported true; exactly one must")
}

// registered reports whether the store lists process p, and its
// heartbeat's end.
func registered(ctx context.Context, s *memstore.Store, p string) (time.Time, bool, error) {
	list, err := s.Processes(ctx, 1<<20)
	if err != nil {
		return time.Time{}, false, err
	}
	for _, proc := range list.Processes {
		if proc.ID == p {
			return proc.Until, true, nil
		}
	}
	return time.Time{}, false, nil
}

// registerCheckThenWrite finds the process id unused on a read, yields,
// and then reports the registration done, whatever its write found.
type registerCheckThenWrite struct{ *memstore.Store }

func (s registerCheckThenWrite) Register(ctx context.Context, p string, until time.Time) (bool, error) {
	if _, found, err := registered(ctx, s.Store, p); err != nil || found {
		return false, err
	}
	runtime.Gosched()
	_, err := s.Store.Register(ctx, p, until)
	return err == nil, err
}

func TestRegisterCheckThenWriteFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return registerCheckThenWrite{m} }))
	requireCases(t, res, "Process/ConcurrentRegisters")
	requireMessage(t, res, "Process/ConcurrentRegisters", "concurrent Register(", "calls reported true; exactly one must")
}

// leaveCheckThenWrite finds the process on a read, yields, and then
// reports its heartbeat removed, whatever its delete found.
type leaveCheckThenWrite struct{ *memstore.Store }

func (s leaveCheckThenWrite) Leave(ctx context.Context, p string) (bool, error) {
	if _, found, err := registered(ctx, s.Store, p); err != nil || !found {
		return false, err
	}
	runtime.Gosched()
	_, err := s.Store.Leave(ctx, p)
	return err == nil, err
}

func TestLeaveCheckThenWriteFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return leaveCheckThenWrite{m} }))
	requireCases(t, res, "Process/ConcurrentLeaves")
	requireMessage(t, res, "Process/ConcurrentLeaves", "concurrent Leave(", "calls reported true; exactly one must")
}

// reapCountsSelected selects the lapsed heartbeats on a read, yields,
// removes them, and reports how many it selected, whatever its delete
// found.
type reapCountsSelected struct{ *memstore.Store }

func (s reapCountsSelected) Reap(ctx context.Context, now time.Time) (int, error) {
	list, err := s.Processes(ctx, 1<<20)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Processes {
		if p.Until.Before(now) {
			n++
		}
	}
	runtime.Gosched()
	_, err = s.Store.Reap(ctx, now)
	return n, err
}

func TestReapCountsSelectedFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return reapCountsSelected{m} }))
	requireCases(t, res, "Process/ConcurrentReaps")
	requireMessage(t, res, "Process/ConcurrentReaps", "concurrent Reap(now 20ms) calls reported", "heartbeats removed in all; 3 had lapsed")
}

// beatWritesBack finds the heartbeat live on a read, yields, and then
// writes it, as an upsert of the heartbeat's row would: after a leave
// that ran in between, the write puts the heartbeat back.
type beatWritesBack struct{ *memstore.Store }

func (s beatWritesBack) Beat(ctx context.Context, p string, until, now time.Time) (bool, error) {
	end, found, err := registered(ctx, s.Store, p)
	if err != nil || !found || end.Before(now) {
		return false, err
	}
	runtime.Gosched()
	if ok, err := s.Store.Beat(ctx, p, until, now); err != nil || ok {
		return ok, err
	}
	_, err = s.Store.Register(ctx, p, until)
	return err == nil, err
}

func TestBeatWritesBackFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return beatWritesBack{m} }))
	requireCases(t, res, "Process/BeatRacingLeave")
	requireMessage(t, res, "Process/BeatRacingLeave", "a process that left while it beat was live afterwards")
}

// intentOutlivesPrune checks that the identity is admitted on a read,
// yields, and then writes the entry whatever its write found, as an insert
// into a journal table without the admission in its statement would: an
// entry written after its row was pruned outlives the row.
type intentOutlivesPrune struct {
	*memstore.Store
	mu      *sync.Mutex
	orphans map[int64][]intake.JournalEntry
}

func (s intentOutlivesPrune) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	if intake.CheckCall(call) != nil {
		return s.Store.RecordIntent(ctx, id, call, at)
	}
	if ok, err := s.Admits(ctx, id, at); err != nil || !ok {
		return intake.JournalEntry{}, intake.IntentStale, err
	}
	runtime.Gosched()
	e, in, err := s.Store.RecordIntent(ctx, id, call, at)
	if err == nil && in == intake.IntentStale {
		e = intake.JournalEntry{UpdateID: id.UpdateID, Call: call, Attempt: id.Attempt, ClaimID: id.ClaimID,
			Outcome: intake.CallPending, Body: []byte{}, IntendedAt: at}
		s.mu.Lock()
		s.orphans[id.UpdateID] = append(s.orphans[id.UpdateID], e)
		s.mu.Unlock()
		in = intake.IntentRecorded
	}
	return e, in, err
}

func (s intentOutlivesPrune) Journal(ctx context.Context, id int64) ([]intake.JournalEntry, error) {
	es, err := s.Store.Journal(ctx, id)
	s.mu.Lock()
	es = append(es, s.orphans[id]...)
	s.mu.Unlock()
	return es, err
}

func TestIntentOutlivesPruneFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return intentOutlivesPrune{Store: m, mu: new(sync.Mutex), orphans: map[int64][]intake.JournalEntry{}}
	}))
	requireCases(t, res, "Journal/TailIntentRacingPrune")
	requireMessage(t, res, "Journal/TailIntentRacingPrune", "started with a journal entry; the prune takes the journal with the row: update 2")
}
