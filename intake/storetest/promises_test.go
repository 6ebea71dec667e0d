package storetest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// Broken stores for the promises the cases in *_promises.go check: each is
// memstore with one documented promise broken, and each test proves the
// suite fails it in the cases that check that promise, and only there.

// claimAddLastRepeatWins records an update id repeated within a batch as
// its last request asks, and answers for it at its first request.
type claimAddLastRepeatWins struct{ *memstore.Store }

func (s claimAddLastRepeatWins) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	first := map[int64]int{}
	var kept []intake.AddRequest
	for _, r := range reqs {
		if j, ok := first[r.UpdateID]; ok {
			kept[j] = r
			continue
		}
		first[r.UpdateID] = len(kept)
		kept = append(kept, r)
	}
	res, err := s.Store.AddBatch(ctx, kept)
	if err != nil {
		return nil, err
	}
	out := make([]intake.AddResult, len(reqs))
	seen := map[int64]bool{}
	for i, r := range reqs {
		if !seen[r.UpdateID] {
			seen[r.UpdateID] = true
			out[i] = res[first[r.UpdateID]]
		}
	}
	return out, nil
}

func TestClaimAddLastRepeatWinsFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return claimAddLastRepeatWins{m} }), "ClaimOnAdd")
	requireCases(t, res, "ClaimOnAdd/DuplicateNeitherAddedNorClaimed", "ClaimOnAdd/RepeatedInBatch")
	requireMessage(t, res, "ClaimOnAdd/RepeatedInBatch", "result 0 of AddBatch([1 pending, 1 claimed", "want added with no identity")
	requireMessage(t, res, "ClaimOnAdd/RepeatedInBatch", "at 51ms) = true; the first request of update 2 claimed it to 50ms")
	requireMessage(t, res, "ClaimOnAdd/RepeatedInBatch", `holds body "{\"update_id\":2,\"again\":true}"`)
}

// claimAddCheckThenWrite decides that an update id is new on a read and
// then writes it blindly after a yield: every racer that read it missing
// reports it recorded, under an identity of its own.
type claimAddCheckThenWrite struct{ *memstore.Store }

var racyClaimIDs atomic.Int64

func (s claimAddCheckThenWrite) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	fresh := make([]bool, len(reqs))
	seen := map[int64]bool{}
	for i, r := range reqs {
		_, found, err := s.Get(ctx, r.UpdateID)
		if err != nil {
			return nil, err
		}
		fresh[i] = !found && !seen[r.UpdateID]
		seen[r.UpdateID] = true
	}
	runtime.Gosched()
	res, err := s.Store.AddBatch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for i, r := range reqs {
		if fresh[i] && !res[i].Added {
			res[i].Added = true
			if r.Claim != nil {
				res[i].Identity = intake.Identity{UpdateID: r.UpdateID, Attempt: 1, ClaimID: fmt.Sprintf("storetest-racy-%d", racyClaimIDs.Add(1))}
			}
		}
	}
	return res, nil
}

// TestRacyClaimedAddFails: run it with -count=10 to measure the catch rate
// of a check-then-write claimed add.
func TestRacyClaimedAddFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return claimAddCheckThenWrite{m} }), "ClaimOnAdd/ConcurrentClaimedAdds")
	requireCases(t, res, "ClaimOnAdd/ConcurrentClaimedAdds")
	requireMessage(t, res, "ClaimOnAdd/ConcurrentClaimedAdds", "concurrent AddBatch calls of update", "reported it added; exactly one must")
}

// batchForgetsChat keeps the chat of rows recorded by Add only: rows
// recorded through AddBatch are unordered.
type batchForgetsChat struct{ *memstore.Store }

func (s batchForgetsChat) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	cp := append([]intake.AddRequest(nil), reqs...)
	for i := range cp {
		cp[i].Chat = ""
	}
	return s.Store.AddBatch(ctx, cp)
}

// claimedBatchForgetsChat keeps no chat for the rows of a batch that holds
// a claimed request, claimed or not; a batch without one keeps its chats.
type claimedBatchForgetsChat struct{ *memstore.Store }

func (s claimedBatchForgetsChat) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	if !slices.ContainsFunc(reqs, func(r intake.AddRequest) bool { return r.Claim != nil }) {
		return s.Store.AddBatch(ctx, reqs)
	}
	cp := append([]intake.AddRequest(nil), reqs...)
	for i := range cp {
		cp[i].Chat = ""
	}
	return s.Store.AddBatch(ctx, cp)
}

func TestBatchAddsForgetChatFail(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return batchForgetsChat{m} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/BatchAddsKeepChat")
	requireMessage(t, res, "ChatOrder/BatchAddsKeepChat", "ClaimInOrder(2, now 10ms) = attempt 1, true; want false: row 1 of its chat a, recorded by the same AddBatch")

	res = check(t.Context(), factory(func(m *memstore.Store) intake.Store { return claimedBatchForgetsChat{m} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/BatchAddsKeepChat")
	requireMessage(t, res, "ChatOrder/BatchAddsKeepChat", "ClaimInOrder(12, now 10ms) = attempt 1, true; want false: row 11 of its chat b, recorded claimed")
	requireMessage(t, res, "ChatOrder/BatchAddsKeepChat", "ClaimInOrder(22, now 10ms) = attempt 1, true; want false: row 21 of its chat c")
}

// chatBook is memstore with its own record of each row's chat, for the
// broken stores below that decide chat order themselves, from reads.
type chatBook struct {
	*memstore.Store
	mu    *sync.Mutex
	chats map[int64]string
}

func newChatBook(m *memstore.Store) chatBook {
	return chatBook{Store: m, mu: new(sync.Mutex), chats: map[int64]string{}}
}

func (s chatBook) note(id int64, chat string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats[id] = chat
}

func (s chatBook) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	ok, err := s.Store.Add(ctx, u)
	if ok {
		s.note(u.UpdateID, u.Chat)
	}
	return ok, err
}

func (s chatBook) noteAdded(reqs []intake.AddRequest, res []intake.AddResult) {
	for i, r := range res {
		if r.Added && i < len(reqs) {
			s.note(reqs[i].UpdateID, reqs[i].Chat)
		}
	}
}

func (s chatBook) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	res, err := s.Store.AddBatch(ctx, reqs)
	s.noteAdded(reqs, res)
	return res, err
}

func (s chatBook) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	res, err := s.Store.AddBatchAs(ctx, reqs, p)
	s.noteAdded(reqs, res)
	return res, err
}

// inOrder is the contract's chat order rule decided from reads of the
// rows, in a step of its own: no other row of id's chat is unsettled with
// a lower id and, with leaseRule, none is processing under a lease live at
// now.
func (s chatBook) inOrder(ctx context.Context, id int64, now time.Time, leaseRule bool) (bool, error) {
	s.mu.Lock()
	chat := s.chats[id]
	var others []int64
	for oid, ch := range s.chats {
		if ch == chat && oid != id {
			others = append(others, oid)
		}
	}
	s.mu.Unlock()
	if chat == "" {
		return true, nil
	}
	for _, oid := range others {
		row, ok, err := s.Get(ctx, oid)
		if err != nil {
			return false, err
		}
		if !ok {
			continue
		}
		unsettled := row.State == intake.StatePending || row.State == intake.StateProcessing || row.State == intake.StateFailed
		if oid < id && unsettled {
			return false, nil
		}
		if leaseRule && row.State == intake.StateProcessing && !row.DueAt.Before(now) {
			return false, nil
		}
	}
	return true, nil
}

// strictDueLeaseBlind lists in strict order by the chat's lowest unsettled
// row alone: it forgets that a live lease of a later row of the chat holds
// an earlier one back, which strict claims remember.
type strictDueLeaseBlind struct{ chatBook }

func (s strictDueLeaseBlind) DueInOrder(ctx context.Context, q intake.DueQuery, only string) ([]intake.StoredUpdate, error) {
	if q.Validate() != nil {
		return s.Store.DueInOrder(ctx, q, only)
	}
	rows, err := s.Store.Due(ctx, intake.DueQuery{Now: q.Now, PendingBefore: q.PendingBefore, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	var out []intake.StoredUpdate
	for _, r := range rows {
		s.mu.Lock()
		chat := s.chats[r.UpdateID]
		s.mu.Unlock()
		if only != "" && chat != only {
			continue
		}
		ok, err := s.inOrder(ctx, r.UpdateID, q.Now, false)
		if err != nil {
			return nil, err
		}
		if ok && len(out) < q.Limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func TestStrictDueLeaseBlindFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return strictDueLeaseBlind{newChatBook(m)} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/DueAgreesWithClaims", "ChatOrder/DueJudgesLeasesAtNow")
	requireMessage(t, res, "ChatOrder/DueAgreesWithClaims", "DueInOrder(now 150ms) listed [1 3 12 20 31 41 50 51]; want [3 12 20 31 41 50 51]")
	requireMessage(t, res, "ChatOrder/DueAgreesWithClaims", "ClaimInOrder(1, now 150ms) was refused, but DueInOrder(now 150ms) listed it: listing and claim disagree")
}

// strictSpendsFirst applies the attempt ceiling before chat order: a row
// at its limit is spent by a strict claim that order refuses.
type strictSpendsFirst struct{ *memstore.Store }

func (s strictSpendsFirst) ClaimInOrder(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	if o.Validate() != nil || p.Validate() != nil {
		return s.Store.ClaimInOrder(ctx, id, o, p)
	}
	row, ok, err := s.Get(ctx, id)
	claimable := err == nil && ok && (row.State == intake.StatePending ||
		(row.State == intake.StateFailed && !row.DueAt.After(o.Now)) ||
		(row.State == intake.StateProcessing && row.DueAt.Before(o.Now)))
	if claimable && row.Attempts >= o.MaxAttempts && p.MaxCrashes == 0 {
		// Spend it without looking at its chat.
		return s.Store.ClaimAs(ctx, id, o, p)
	}
	return s.Store.ClaimInOrder(ctx, id, o, p)
}

func TestStrictSpendsFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return strictSpendsFirst{m} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/OrderRefusalSpendsNothing")
	requireMessage(t, res, "ChatOrder/OrderRefusalSpendsNothing", "Due(now 30ms) after strict claims refused for order listed [1 11]; want [1 2 11 12]")
	requireMessage(t, res, "ChatOrder/OrderRefusalSpendsNothing", "Get(2) after strict claims refused for order = abandoned")
}

// racyStrictClaim decides chat order on a read, yields, then claims
// without it: the classic check-then-write, for strict claims.
type racyStrictClaim struct{ chatBook }

func (s racyStrictClaim) allowed(ctx context.Context, id int64, o intake.ClaimOpts) (bool, error) {
	ok, err := s.inOrder(ctx, id, o.Now, true)
	runtime.Gosched()
	return ok, err
}

func (s racyStrictClaim) ClaimInOrder(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	if o.Validate() != nil || p.Validate() != nil {
		return s.Store.ClaimInOrder(ctx, id, o, p)
	}
	if ok, err := s.allowed(ctx, id, o); err != nil || !ok {
		return intake.Identity{}, false, err
	}
	return s.Store.ClaimAs(ctx, id, o, p)
}

// TestRacyStrictClaimFails: run it with -count=10 to measure the catch
// rate of a check-then-write strict claim.
func TestRacyStrictClaimFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return racyStrictClaim{newChatBook(m)} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/ConcurrentClaimsOfOneChat")
	requireMessage(t, res, "ChatOrder/ConcurrentClaimsOfOneChat", "exactly one must win")
}

// crashOnlyUnderLiveLease counts a crash only for a takeover before the
// lease ends: once the lease lapsed too, the takeover is an ordinary
// reclaim whose attempts all count against MaxAttempts.
type crashOnlyUnderLiveLease struct{ *memstore.Store }

func (s crashOnlyUnderLiveLease) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	if row, ok, err := s.Get(ctx, id); err == nil && ok && row.State == intake.StateProcessing && row.DueAt.Before(o.Now) {
		p.MaxCrashes = 0
	}
	return s.Store.ClaimAs(ctx, id, o, p)
}

func TestCrashOnlyUnderLiveLeaseFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return crashOnlyUnderLiveLease{m} }), "Process")
	requireCases(t, res, "Process/CrashesAndAttemptsApart", "Process/LapsedLeaseTakeoverIsCrash")
	requireMessage(t, res, "Process/LapsedLeaseTakeoverIsCrash", `ClaimAs(1, now 200ms, process "b", MaxAttempts 1, MaxCrashes 3) = {update 0, attempt 0`, "want attempt 2")
}

// requeueKeepsCrashes requeues a row with zero attempts but keeps its
// crashes: they still show, and still count against the crash budget.
type requeueKeepsCrashes struct {
	*memstore.Store
	mu   *sync.Mutex
	kept map[int64]int
}

func (s requeueKeepsCrashes) Requeue(ctx context.Context, id int64, now time.Time) (bool, error) {
	row, _, err := s.Get(ctx, id)
	if err != nil {
		return false, err
	}
	ok, err := s.Store.Requeue(ctx, id, now)
	if ok {
		s.mu.Lock()
		s.kept[id] = row.Crashes
		s.mu.Unlock()
	}
	return ok, err
}

func (s requeueKeepsCrashes) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	row, ok, err := s.Store.Get(ctx, id)
	s.mu.Lock()
	row.Crashes += s.kept[id]
	s.mu.Unlock()
	return row, ok, err
}

func (s requeueKeepsCrashes) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	s.mu.Lock()
	kept := s.kept[id]
	s.mu.Unlock()
	if p.MaxCrashes > 0 && kept > 0 {
		p.MaxCrashes = max(1, p.MaxCrashes-kept)
	}
	return s.Store.ClaimAs(ctx, id, o, p)
}

func TestRequeueKeepsCrashesFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return requeueKeepsCrashes{Store: m, mu: new(sync.Mutex), kept: map[int64]int{}}
	}), "Process")
	requireCases(t, res, "Process/RequeueResetsCrashes")
	requireMessage(t, res, "Process/RequeueResetsCrashes", "Get(1) after its requeue = pending, 0 attempts, 2 crashes")
	requireMessage(t, res, "Process/RequeueResetsCrashes", `ClaimAs(1, now 251ms, process "p3", MaxCrashes 2) = {update 0, attempt 0`)
}

// racyReclaim decides on a read that a processing row is claimable (its
// lease or owner lapsed: Due lists it), yields, then writes blindly: if
// the row was taken meanwhile, it takes it again.
type racyReclaim struct{ *memstore.Store }

func (s racyReclaim) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.ClaimAs(ctx, id, o, intake.ProcessClaim{})
}

func (s racyReclaim) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	row, found, err := s.Get(ctx, id)
	if o.Validate() != nil || p.Validate() != nil || err != nil || !found || row.State != intake.StateProcessing {
		return s.Store.ClaimAs(ctx, id, o, p)
	}
	due, err := s.Store.Due(ctx, intake.DueQuery{Now: o.Now, Limit: 1 << 20})
	if err != nil {
		return intake.Identity{}, false, err
	}
	listed := false
	for _, r := range due {
		listed = listed || r.UpdateID == id
	}
	if !listed {
		return s.Store.ClaimAs(ctx, id, o, p)
	}
	runtime.Gosched()
	if ident, ok, err := s.Store.ClaimAs(ctx, id, o, p); err != nil || ok {
		return ident, ok, err
	}
	o.Now = farFuture
	return s.Store.ClaimAs(ctx, id, o, p)
}

// TestRacyReclaimFails: run it with -count=10 to measure the catch rate of
// a check-then-write reclaim.
func TestRacyReclaimFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return racyReclaim{m} }), "Race")
	requireCases(t, res, "Race/ReclaimLapsedLease", "Race/ReclaimLapsedOwner")
	requireMessage(t, res, "Race/ReclaimLapsedLease", "concurrent claims of processing update", "whose lease lapsed at 100ms took it")
	requireMessage(t, res, "Race/ReclaimLapsedOwner", "concurrent claims of processing update", "whose owner lapsed at 50ms took it")
}

// outcomeIgnoresOccurrence records an outcome on the lowest pending
// occurrence of the identity's identical calls, whichever occurrence it
// names.
type outcomeIgnoresOccurrence struct{ *memstore.Store }

func (s outcomeIgnoresOccurrence) RecordOutcome(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	es, err := s.Journal(ctx, id.UpdateID)
	if err != nil {
		return false, err
	}
	lowest := 0
	for _, e := range es {
		if e.Method == call.Method && e.ParamsHash == call.ParamsHash && e.Outcome == intake.CallPending &&
			e.Attempt == id.Attempt && e.ClaimID == id.ClaimID && (lowest == 0 || e.Occurrence < lowest) {
			lowest = e.Occurrence
		}
	}
	if lowest > 0 {
		call.Occurrence = lowest
	}
	return s.Store.RecordOutcome(ctx, id, call, res, at)
}

// journalAliasesBodies keeps the caller's outcome body slice instead of a
// copy, and hands that same slice to every reader.
type journalAliasesBodies struct {
	*memstore.Store
	mu     *sync.Mutex
	bodies map[journalKey][]byte
}

type journalKey struct {
	update int64
	call   intake.Call
}

func (s journalAliasesBodies) RecordOutcome(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	ok, err := s.Store.RecordOutcome(ctx, id, call, res, at)
	if ok {
		s.mu.Lock()
		s.bodies[journalKey{id.UpdateID, call}] = res.Body
		s.mu.Unlock()
	}
	return ok, err
}

func (s journalAliasesBodies) aliased(e intake.JournalEntry) intake.JournalEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.bodies[journalKey{e.UpdateID, e.Call}]; ok {
		e.Body = b
	}
	return e
}

func (s journalAliasesBodies) Journal(ctx context.Context, id int64) ([]intake.JournalEntry, error) {
	es, err := s.Store.Journal(ctx, id)
	for i := range es {
		es[i] = s.aliased(es[i])
	}
	return es, err
}

func (s journalAliasesBodies) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	e, in, err := s.Store.RecordIntent(ctx, id, call, at)
	if in == intake.IntentJournaled {
		e = s.aliased(e)
	}
	return e, in, err
}

func TestJournalOutcomeBugsFail(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return outcomeIgnoresOccurrence{m} }), "Journal")
	requireCases(t, res, "Journal/OutcomePerOccurrence")
	requireMessage(t, res, "Journal/OutcomePerOccurrence", "after the outcome of occurrence 2, occurrence 1 reads answered")

	res = check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return journalAliasesBodies{Store: m, mu: new(sync.Mutex), bodies: map[journalKey][]byte{}}
	}), "Journal")
	// It also shows the aliased body of the not-dispatched outcome in the
	// entry that replaced it.
	requireCases(t, res, "Journal/BodiesCopied", "Journal/NotDispatchedFreesCall", "Journal/ReplayAcrossAttempts")
	requireMessage(t, res, "Journal/BodiesCopied", "Journal(1) after the caller reused the slice it passed to RecordOutcome reads body")
}

// deferredSharesResult is a journal whose deferred outcomes
// (RecordOutcomeDeferred) share a commit with those recorded meanwhile, and which answers each of them
// with the commit's result (did any apply?) instead of its own.
type deferredSharesResult struct {
	*memstore.Store
	groups *deferGroups
}

type deferGroups struct {
	mu   sync.Mutex
	open *deferGroup
}

type deferGroup struct {
	writes  sync.WaitGroup
	applied bool
	sealed  chan struct{}
}

func (s deferredSharesResult) RecordOutcomeDeferred(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	gs := s.groups
	gs.mu.Lock()
	g := gs.open
	leader := g == nil
	if leader {
		g = &deferGroup{sealed: make(chan struct{})}
		gs.open = g
	}
	g.writes.Add(1)
	gs.mu.Unlock()
	ok, err := s.Store.RecordOutcome(ctx, id, call, res, at)
	gs.mu.Lock()
	g.applied = g.applied || ok
	gs.mu.Unlock()
	g.writes.Done()
	if leader {
		// Hold the commit open for a few yields, so that others join it.
		for range 32 {
			runtime.Gosched()
		}
		gs.mu.Lock()
		gs.open = nil
		gs.mu.Unlock()
		g.writes.Wait()
		close(g.sealed)
	} else {
		<-g.sealed
	}
	if err != nil {
		return false, err
	}
	gs.mu.Lock()
	defer gs.mu.Unlock()
	return g.applied, nil
}

func TestDeferredSharesResultFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return deferredSharesResult{Store: m, groups: new(deferGroups)}
	}), "Journal")
	requireCases(t, res, "Journal/DeferredOwnResult")
	requireMessage(t, res, "Journal/DeferredOwnResult", "reported true; want false, the result of its own write")
}

// racyIntent looks for the call in the journal, yields, then writes the
// intent blindly: every racer that found none reports it recorded.
type racyIntent struct{ *memstore.Store }

func (s racyIntent) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	if intake.CheckCall(call) != nil {
		return s.Store.RecordIntent(ctx, id, call, at)
	}
	es, err := s.Journal(ctx, id.UpdateID)
	if err != nil {
		return intake.JournalEntry{}, intake.IntentStale, err
	}
	for _, e := range es {
		if e.Call == call && e.Outcome != intake.CallNotDispatched {
			return s.Store.RecordIntent(ctx, id, call, at)
		}
	}
	runtime.Gosched()
	e, in, err := s.Store.RecordIntent(ctx, id, call, at)
	if in == intake.IntentJournaled {
		in = intake.IntentRecorded
	}
	return e, in, err
}

// TestRacyIntentFails: run it with -count=10 to measure the catch rate of
// a check-then-write intent.
func TestRacyIntentFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return racyIntent{m} }), "Journal")
	requireCases(t, res, "Journal/ConcurrentIntents", "Journal/ConcurrentTailIntents")
	requireMessage(t, res, "Journal/ConcurrentIntents", "concurrent identical intents were recorded; want exactly 1")
}
