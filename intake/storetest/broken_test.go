package storetest

import (
	"bytes"
	"cmp"
	"context"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// lenientArguments quietly repairs arguments outside the contract instead
// of refusing them: a page size below 1 becomes 10, an attempt ceiling
// below 1 becomes 1, a non-final settlement state becomes completed.
type lenientArguments struct{ *memstore.Store }

func orTen(limit int) int {
	if limit < 1 {
		return 10
	}
	return limit
}

func (s lenientArguments) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	q.Limit = orTen(q.Limit)
	return s.Store.Due(ctx, q)
}

func (s lenientArguments) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	q.Limit = orTen(q.Limit)
	return s.Store.DueExhaustions(ctx, q)
}

func (s lenientArguments) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	q.Limit = orTen(q.Limit)
	if q.Validate() != nil {
		q.State, q.Unacknowledged = "", false
	}
	return s.Store.List(ctx, q)
}

func (s lenientArguments) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	o.MaxAttempts = max(o.MaxAttempts, 1)
	return s.Store.Claim(ctx, id, o)
}

func (s lenientArguments) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if st.Validate() != nil {
		st.State = intake.StateCompleted
	}
	return s.Store.Settle(ctx, id, st)
}

func TestLenientArgumentsFail(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return lenientArguments{m} }))
	requireCases(t, res, "Arguments/BadBaseArgumentsRefused", "Arguments/BadOwnedArgumentsRefused",
		"Arguments/BadExhaustionQueryRefused", "Arguments/BadListQueryRefused")
	requireMessage(t, res, "Arguments/BadBaseArgumentsRefused", "Due(limit 0)", "want an error wrapping intake.ErrInvalidArgument")
	requireMessage(t, res, "Arguments/BadBaseArgumentsRefused", "Claim(1, MaxAttempts 0)")
	requireMessage(t, res, "Arguments/BadBaseArgumentsRefused", `Settle(2, attempt 1, state "done")`)
	requireMessage(t, res, "Arguments/BadOwnedArgumentsRefused", "Settle(")
	requireMessage(t, res, "Arguments/BadExhaustionQueryRefused", "DueExhaustions(limit 0)")
	requireMessage(t, res, "Arguments/BadListQueryRefused", "List(state lost)")
}

// spendsLiveLease spends a row at its attempt ceiling whatever its lease:
// the "attempts spent" rule applied before the claimable check.
type spendsLiveLease struct{ *memstore.Store }

func (s spendsLiveLease) fix(ctx context.Context, id int64, o intake.ClaimOpts) intake.ClaimOpts {
	if row, ok, err := s.Get(ctx, id); err == nil && ok && row.State == intake.StateProcessing &&
		!row.DueAt.Before(o.Now) && row.Attempts >= o.MaxAttempts {
		o.Now = row.DueAt.Add(time.Millisecond)
	}
	return o
}

func (s spendsLiveLease) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.Store.Claim(ctx, id, s.fix(ctx, id, o))
}

func (s spendsLiveLease) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.Store.ClaimAs(ctx, id, s.fix(ctx, id, o), p)
}

func TestSpendsLiveLeaseFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return spendsLiveLease{m} }))
	// The takeover case claims a live lease too (the takeover's own, on its
	// last attempt) and sees it spent.
	requireCases(t, res, "Claim/LiveLeaseUntouchedOnLastAttempt", "Fence/LiveLeaseUntouchedOnLastAttempt", "Process/TakeoverWhenOwnerLapses",
		"ClaimOnAdd/OwnerLapseTakesOver")
	requireMessage(t, res, "Claim/LiveLeaseUntouchedOnLastAttempt", "a claim leaves a row under a live lease untouched, even on its last attempt: ", "the claim spent a row it could not claim")
	requireMessage(t, res, "Fence/LiveLeaseUntouchedOnLastAttempt", "Owns(", "at 60ms) = false after claims at 50ms with MaxAttempts 1: the claim spent a row it could not claim")
}

// failedStillSettles checks the attempt and the time but not the state, so
// a failed attempt whose retry is later than the settlement "settles".
type failedStillSettles struct{ *memstore.Store }

func (s failedStillSettles) failed(ctx context.Context, id intake.Identity, at time.Time, owned bool) bool {
	row, ok, err := s.Get(ctx, id.UpdateID)
	return err == nil && ok && row.State == intake.StateFailed && row.Attempts == id.Attempt &&
		(!owned || row.ClaimID == id.ClaimID) && !row.DueAt.Before(at)
}

func (s failedStillSettles) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if st.Validate() == nil && s.failed(ctx, id, st.At, true) {
		return true, nil
	}
	return s.Store.Settle(ctx, id, st)
}

func (s failedStillSettles) Exhaust(ctx context.Context, id intake.Identity, at time.Time, text string) (bool, error) {
	if s.failed(ctx, id, at, true) {
		return true, nil
	}
	return s.Store.Exhaust(ctx, id, at, text)
}

func TestFailedStillSettlesFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return failedStillSettles{m} }))
	// ConcurrentSettles sees it when a holder's failure happens to run
	// before its concurrent completion.
	requireCasesOr(t, res, []string{"Batch/ConcurrentSettles"}, "Batch/ConcurrentSettlesOfEndedAttempts", "Claim/FailedAttemptIsOver", "Fence/FailedAttemptIsOver", "History/RecordedWithSettlement")
	requireMessage(t, res, "Claim/FailedAttemptIsOver", "Settle(1, attempt 1, completed at 20ms) reported true after attempt 1 failed at 10ms")
	requireMessage(t, res, "Fence/FailedAttemptIsOver", "completed at 20ms) reported true after the attempt failed at 10ms")
	requireMessage(t, res, "Fence/FailedAttemptIsOver", "at 20ms) reported true after the attempt failed at 10ms", "Exhaust(")
}

// baseSettleIgnoresLease settles a lapsed lease as if at the lease's end:
// both the attempt-numbered and the identity cases see it.
type baseSettleIgnoresLease struct{ *memstore.Store }

func (s baseSettleIgnoresLease) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if row, ok, err := s.Get(ctx, id.UpdateID); err == nil && ok && row.State == intake.StateProcessing && row.Attempts == id.Attempt && row.DueAt.Before(st.At) {
		st.At = row.DueAt
	}
	return s.Store.Settle(ctx, id, st)
}

func TestBaseSettleIgnoresLeaseFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return baseSettleIgnoresLease{m} }))
	requireCases(t, res, "Batch/ConcurrentSettles", "Claim/BaseSettleRefusesLapsedLease", "Fence/SettleAfterLeaseRefused", "History/RecordedWithSettlement")
	requireMessage(t, res, "Batch/ConcurrentSettles", "completed at 101ms) = true; want false")
	requireMessage(t, res, "Claim/BaseSettleRefusesLapsedLease", "a base settlement after the lease lapsed is refused: Settle(1, attempt 1, completed at 11ms) reported true after the lease lapsed at 10ms")
}

// ackAnyState acknowledges any row carrying the identity, whatever its
// state.
type ackAnyState struct{ *memstore.Store }

func (s ackAnyState) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	ok, err := s.Store.AcknowledgeExhaustion(ctx, id, at)
	if err != nil || ok {
		return ok, err
	}
	row, found, err := s.Get(ctx, id.UpdateID)
	return err == nil && found && row.Attempts == id.Attempt && row.ClaimID == id.ClaimID && row.SettledAt.IsZero(), err
}

func TestAckAnyStateFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return ackAnyState{m} }))
	requireCases(t, res, "Exhaust/AckOnlyUnacknowledged")
	for _, fragment := range []string{"of a processing row reported true", "of a failed row reported true"} {
		requireMessage(t, res, "Exhaust/AckOnlyUnacknowledged", "only an unacknowledged exhaustion can be acknowledged: AcknowledgeExhaustion(", fragment)
	}
}

// addCheckThenWrite decides that an update is new on a read and records it
// after a yield: concurrent adds all report it new.
type addCheckThenWrite struct{ *memstore.Store }

func (s addCheckThenWrite) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	if _, found, err := s.Get(ctx, u.UpdateID); err != nil || found {
		return false, err
	}
	runtime.Gosched()
	_, err := s.Store.Add(ctx, u)
	return err == nil, err
}

// lastAddWins reports "new" correctly but lets every later add replace the
// stored body.
type lastAddWins struct {
	*memstore.Store
	mu     *sync.Mutex
	bodies map[int64][]byte
}

func (s lastAddWins) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	ok, err := s.Store.Add(ctx, u)
	if err == nil {
		s.mu.Lock()
		s.bodies[u.UpdateID] = bytes.Clone(u.Body)
		s.mu.Unlock()
	}
	return ok, err
}

func (s lastAddWins) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	row, ok, err := s.Store.Get(ctx, id)
	s.mu.Lock()
	if b, replaced := s.bodies[id]; replaced && ok {
		row.Body = bytes.Clone(b)
	}
	s.mu.Unlock()
	return row, ok, err
}

func TestConcurrentAddBugsFail(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return addCheckThenWrite{m} }), "Add/ConcurrentAddsOneNew")
	requireMessage(t, res, "Add/ConcurrentAddsOneNew", "of concurrent adds of one update id exactly one is new, and the row is never overwritten: ", "concurrent Add calls of update 2000 reported it new; exactly one must")

	res = check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return lastAddWins{Store: m, mu: new(sync.Mutex), bodies: map[int64][]byte{}}
	}), "Add/ConcurrentAddsOneNew")
	requireMessage(t, res, "Add/ConcurrentAddsOneNew", "after concurrent Add calls update 2000 holds body", "the row was overwritten")
}

// settleCheckThenWrite checks the attempt and its lease on a read, yields,
// and then reports the settlement done, whatever its write found.
type settleCheckThenWrite struct{ *memstore.Store }

func (s settleCheckThenWrite) holds(ctx context.Context, id intake.Identity, at time.Time, owned bool) bool {
	row, ok, err := s.Get(ctx, id.UpdateID)
	held := err == nil && ok && row.State == intake.StateProcessing && row.Attempts == id.Attempt &&
		(!owned || row.ClaimID == id.ClaimID) && !row.DueAt.Before(at)
	runtime.Gosched()
	return held
}

func (s settleCheckThenWrite) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if st.Validate() == nil && s.holds(ctx, id, st.At, true) {
		_, err := s.Store.Settle(ctx, id, st)
		return err == nil, err
	}
	return s.Store.Settle(ctx, id, st)
}

func (s settleCheckThenWrite) Exhaust(ctx context.Context, id intake.Identity, at time.Time, text string) (bool, error) {
	if s.holds(ctx, id, at, true) {
		_, err := s.Store.Exhaust(ctx, id, at, text)
		return err == nil, err
	}
	return s.Store.Exhaust(ctx, id, at, text)
}

func TestSettleCheckThenWriteFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return settleCheckThenWrite{m} }))
	// Two settlements by the holder at once both pass the check before
	// either writes.
	requireCases(t, res, "Batch/ConcurrentSettles", "Claim/SettleRacingReclaim", "Fence/SettleRacingReclaim")
	requireMessage(t, res, "Batch/ConcurrentSettles", "two concurrent settlements by the holder", "both reported true")
	requireMessage(t, res, "Claim/SettleRacingReclaim", "Settle(attempt 1, completed at the lease end) and Claim one millisecond later both succeeded in ")
	requireMessage(t, res, "Fence/SettleRacingReclaim", "Settle(completed at the lease end) and Claim one millisecond later both succeeded in ")
	requireMessage(t, res, "Fence/SettleRacingReclaim", "Exhaust(at the lease end) and Claim one millisecond later both succeeded in ")
}

// narrowClaim is a check-then-write claim whose window is one yield of the
// processor: no sleep, nothing a test clock controls.
type narrowClaim struct{ *memstore.Store }

func (s narrowClaim) take(ctx context.Context, id int64, o intake.ClaimOpts) intake.ClaimOpts {
	row, ok, err := s.Get(ctx, id)
	claimable := err == nil && ok && (row.State == intake.StatePending ||
		(row.State == intake.StateFailed && !row.DueAt.After(o.Now)) ||
		(row.State == intake.StateProcessing && row.DueAt.Before(o.Now)))
	runtime.Gosched()
	if claimable && row.Attempts < o.MaxAttempts {
		o.Now = farFuture
	}
	return o
}

func (s narrowClaim) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.Store.Claim(ctx, id, s.take(ctx, id, o))
}

// TestNarrowClaimFailsEveryRun: the race cases catch a check-then-write
// claim with a window of one yield in every run, not now and then.
func TestNarrowClaimFailsEveryRun(t *testing.T) {
	t.Parallel()
	const runs = 10
	for run := range runs {
		res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return narrowClaim{m} }), "Race")
		got := failing(res)
		for _, want := range []string{"Race/Claim", "Race/Claim"} {
			if !slices.Contains(got, want) {
				t.Errorf("run %d of %d: %s did not catch the check-then-write claim; failing cases: %q", run+1, runs, want, got)
			}
		}
	}
}

// statsFromReceipt measures the oldest pending row from its receipt, so a
// row requeued just now looks as old as its first delivery.
type statsFromReceipt struct{ *memstore.Store }

func (s statsFromReceipt) Stats(ctx context.Context) (intake.Stats, error) {
	st, err := s.Store.Stats(ctx)
	if err != nil {
		return st, err
	}
	rows, err := s.List(ctx, intake.ListQuery{State: intake.StatePending, Limit: 1 << 20})
	st.OldestPending = time.Time{}
	for _, r := range rows {
		if st.OldestPending.IsZero() || r.ReceivedAt.Before(st.OldestPending) {
			st.OldestPending = r.ReceivedAt
		}
	}
	return st, err
}

func TestStatsFromReceiptFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return statsFromReceipt{m} }))
	requireCases(t, res, "Admin/OldestPendingSinceRequeue")
	requireMessage(t, res, "Admin/OldestPendingSinceRequeue", "Stats.OldestPending is 0ms; want 300ms")
}

// sharedBodies hands every reader the same slice for an update's body, so
// one caller's writes show in what the next one reads.
type sharedBodies struct {
	*memstore.Store
	mu     *sync.Mutex
	bodies map[int64][]byte
}

func (s sharedBodies) shared(id int64, b []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cached, ok := s.bodies[id]; ok {
		return cached
	}
	s.bodies[id] = b
	return b
}

func (s sharedBodies) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	rows, err := s.Store.Due(ctx, q)
	for i := range rows {
		rows[i].Body = s.shared(rows[i].UpdateID, rows[i].Body)
	}
	return rows, err
}

func (s sharedBodies) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	rows, err := s.Store.DueExhaustions(ctx, q)
	for i := range rows {
		rows[i].Body = s.shared(rows[i].UpdateID, rows[i].Body)
	}
	return rows, err
}

func (s sharedBodies) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	row, ok, err := s.Store.Get(ctx, id)
	if ok {
		row.Body = s.shared(id, row.Body)
	}
	return row, ok, err
}

func (s sharedBodies) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	rows, err := s.Store.List(ctx, q)
	for i := range rows {
		rows[i].Body = s.shared(rows[i].UpdateID, rows[i].Body)
	}
	return rows, err
}

func TestSharedBodiesFail(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return sharedBodies{Store: m, mu: new(sync.Mutex), bodies: map[int64][]byte{}}
	}))
	requireMessage(t, res, "Add/ReadsReturnPrivateBodies", "after the caller wrote into the bodies Due returned, Due lists [1] with body")
	requireMessage(t, res, "Add/ReadsReturnPrivateBodies", "after the caller wrote into the bodies DueExhaustions returned, DueExhaustions has body")
	requireMessage(t, res, "Add/ReadsReturnPrivateBodies", "after the caller wrote into the bodies Get returned, Get(1) has body")
}

// ignoresHeartbeats records heartbeats but claims without an owner, so a
// dead process's rows wait out their whole lease.
type ignoresHeartbeats struct{ *memstore.Store }

func (s ignoresHeartbeats) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	p.Process = ""
	return s.Store.ClaimAs(ctx, id, o, p)
}

func TestIgnoresHeartbeatsFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return ignoresHeartbeats{m} }), "Process")
	requireCases(t, res, "Process/TakeoverWhenOwnerLapses", "Process/LeaveReleasesAtOnce", "Process/UnknownOwnerIsLapsed",
		"Process/BeatKeepsOwnerLive", "Process/BeatRacingLeave", "Process/CrashBudget", "Process/CrashesAndAttemptsApart", "Process/NoCrashBudget",
		"Process/LapsedLeaseTakeoverIsCrash", "Process/RequeueResetsCrashes", "Process/DueJudgesOwnersAtNow", "Process/TakeoverByNoProcess",
		"Process/CrashesKept", "Process/CrashBudgetOfOne")
	requireMessage(t, res, "Process/TakeoverWhenOwnerLapses", "Due(now 101ms) = [] after the owner's heartbeat lapsed at 100ms; want [1]")
}

// crashesSpendAttempts takes over lapsed owners' rows but ignores the crash
// budget: every crash spends an attempt, so a fleet being restarted uses up
// its updates' attempts.
type crashesSpendAttempts struct{ *memstore.Store }

func (s crashesSpendAttempts) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	if p.MaxCrashes > 0 {
		p.MaxCrashes = 0
	}
	return s.Store.ClaimAs(ctx, id, o, p)
}

func TestCrashesSpendAttemptsFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return crashesSpendAttempts{m} }), "Process")
	requireCases(t, res, "Process/CrashBudget", "Process/CrashesAndAttemptsApart", "Process/LapsedLeaseTakeoverIsCrash", "Process/RequeueResetsCrashes",
		"Process/CrashesKept", "Process/CrashBudgetOfOne")
	requireMessage(t, res, "Process/CrashBudget", "ClaimAs(1, now 200ms, process", "= {update 0, attempt 0", "want attempt 3 of update 1")
}

// claimAddUnpersisted answers a claimed add with an identity it never
// stored: the row is recorded pending, as by an AddBatch without claims.
type claimAddUnpersisted struct{ *memstore.Store }

func (s claimAddUnpersisted) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	return s.AddBatchAs(ctx, reqs, intake.ProcessClaim{})
}

func (s claimAddUnpersisted) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, _ intake.ProcessClaim) ([]intake.AddResult, error) {
	in := make([]intake.AddRequest, len(reqs))
	for i, r := range reqs {
		in[i].Incoming = r.Incoming
	}
	added, err := s.Store.AddBatch(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make([]intake.AddResult, len(reqs))
	for i, r := range reqs {
		out[i].Added = added[i].Added
		if added[i].Added && r.Claim != nil {
			out[i].Identity = intake.Identity{UpdateID: r.UpdateID, Attempt: 1, ClaimID: "storetest-made-up-" + strconv.Itoa(i)}
		}
	}
	return out, nil
}

func TestClaimAddUnpersistedFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return claimAddUnpersisted{m} }), "ClaimOnAdd")
	requireCases(t, res, "ClaimOnAdd/ClaimedAddIsAClaim", "ClaimOnAdd/DuplicateNeitherAddedNorClaimed",
		"ClaimOnAdd/InvalidClaimRefused", "ClaimOnAdd/LapsedLeaseReclaimed", "ClaimOnAdd/MixedBatch", "ClaimOnAdd/OwnerLapseTakesOver",
		"ClaimOnAdd/ConcurrentClaimedAdds", "ClaimOnAdd/RepeatedInBatch", "ClaimOnAdd/FreshClaimIDAfterPrune", "ClaimOnAdd/LargeBatches",
		"ClaimOnAdd/ClaimedAddHasNoCrash", "ClaimOnAdd/ReceiptKept")
	requireMessage(t, res, "ClaimOnAdd/ClaimedAddIsAClaim", "Get(1) after its claimed add = state pending, attempts 0")
	requireMessage(t, res, "ClaimOnAdd/MixedBatch", "Due(now 10ms, pending before 10ms) after a mixed batch listed [10 11 12 13]; want [10 12]")
	requireMessage(t, res, "ClaimOnAdd/LapsedLeaseReclaimed", "Due(now 20ms) listed [1]")
}

// claimAddTakesDuplicates records a claimed add of a stored update id by
// claiming the stored row: a duplicate that takes a pending row, or a live
// claim's row once its lease lapsed.
type claimAddTakesDuplicates struct{ *memstore.Store }

func (s claimAddTakesDuplicates) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	out, err := s.Store.AddBatch(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for i, r := range reqs {
		if !out[i].Added && r.Claim != nil {
			if id, ok, err := s.Claim(ctx, r.UpdateID, *r.Claim); err == nil && ok {
				out[i] = intake.AddResult{Added: true, Identity: id}
			}
		}
	}
	return out, nil
}

func TestClaimAddTakesDuplicatesFails(t *testing.T) {
	t.Parallel()
	// ConcurrentClaimedAdds catches it only in a round where a racer that
	// asked for no claim wins, which the scheduler decides; it is left out.
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return claimAddTakesDuplicates{m} }),
		"ClaimOnAdd/ClaimedAddIsAClaim", "ClaimOnAdd/DuplicateNeitherAddedNorClaimed", "ClaimOnAdd/LapsedLeaseReclaimed",
		"ClaimOnAdd/MixedBatch", "ClaimOnAdd/InvalidClaimRefused", "ClaimOnAdd/OwnerLapseTakesOver", "ClaimOnAdd/RepeatedInBatch")
	requireCases(t, res, "ClaimOnAdd/DuplicateNeitherAddedNorClaimed", "ClaimOnAdd/RepeatedInBatch")
	requireMessage(t, res, "ClaimOnAdd/DuplicateNeitherAddedNorClaimed", "result 0 of AddBatch([1 2 3 3]) with 1 pending and 2 claimed = added true")
}

// claimAddDropsOwner records claimed adds without their owner, so the row
// of a process that died right after recording it waits out its lease.
type claimAddDropsOwner struct{ *memstore.Store }

func (s claimAddDropsOwner) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	p.Process = ""
	return s.Store.AddBatchAs(ctx, reqs, p)
}

func TestClaimAddDropsOwnerFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return claimAddDropsOwner{m} }), "ClaimOnAdd")
	requireCases(t, res, "ClaimOnAdd/OwnerLapseTakesOver", "ClaimOnAdd/ClaimedAddHasNoCrash")
	requireMessage(t, res, "ClaimOnAdd/OwnerLapseTakesOver", "Due(now 101ms) = [] after the claimed add's owner lapsed at 100ms; want [1]")
}

// leaseOnlyJournal admits calls only under a live lease, as Owns does: the
// attempt that completed its update (its tail) is refused.
type leaseOnlyJournal struct{ *memstore.Store }

func (s leaseOnlyJournal) Admits(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	return s.Owns(ctx, id, at)
}

func (s leaseOnlyJournal) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	if ok, err := s.Owns(ctx, id, at); err != nil || !ok {
		return intake.JournalEntry{}, intake.IntentStale, err
	}
	return s.Store.RecordIntent(ctx, id, call, at)
}

func TestLeaseOnlyJournalFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return leaseOnlyJournal{m} }))
	requireCases(t, res, "Journal/ConcurrentTailIntents", "Journal/TailAdmitted", "Journal/TailEndsWithRow")
	requireMessage(t, res, "Journal/TailAdmitted", "for the identity that completed the update; want true (its tail)")
}

// tailCheck is a broken store's own tail rule: whether row admits id as
// its tail.
type tailCheck func(row intake.Row, id intake.Identity) bool

// ownTail admits the calls of identities its rule admits from a read of the
// row (a check, then a write): such an intent is reported recorded and kept
// beside the store's journal, in tails, by identity.
type ownTail struct {
	*memstore.Store
	rule  tailCheck
	mu    *sync.Mutex
	tails map[intake.Identity]map[intake.Call]bool
}

func newOwnTail(m *memstore.Store, rule tailCheck) ownTail {
	return ownTail{Store: m, rule: rule, mu: new(sync.Mutex), tails: map[intake.Identity]map[intake.Call]bool{}}
}

func (s ownTail) tail(ctx context.Context, id intake.Identity) bool {
	row, ok, err := s.Get(ctx, id.UpdateID)
	return err == nil && ok && s.rule(row, id)
}

func (s ownTail) Admits(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	if ok, err := s.Owns(ctx, id, at); err != nil || ok {
		return ok, err
	}
	return s.tail(ctx, id), nil
}

func (s ownTail) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	if ok, err := s.Owns(ctx, id, at); err != nil || ok {
		return s.Store.RecordIntent(ctx, id, call, at)
	}
	if err := intake.CheckCall(call); err != nil || !s.tail(ctx, id) {
		return intake.JournalEntry{}, intake.IntentStale, err
	}
	e := intake.JournalEntry{UpdateID: id.UpdateID, Call: call, Attempt: id.Attempt, ClaimID: id.ClaimID, Outcome: intake.CallPending, IntendedAt: at}
	s.mu.Lock()
	seen := s.tails[id][call]
	s.mu.Unlock()
	if seen {
		e.Outcome = intake.CallUnknown
		return e, intake.IntentJournaled, nil
	}
	runtime.Gosched()
	s.mu.Lock()
	if s.tails[id] == nil {
		s.tails[id] = map[intake.Call]bool{}
	}
	s.tails[id][call] = true
	s.mu.Unlock()
	return e, intake.IntentRecorded, nil
}

// completedBy is the contract's tail rule: the row is completed by id.
func completedBy(row intake.Row, id intake.Identity) bool {
	return row.State == intake.StateCompleted && row.Attempts == id.Attempt && row.ClaimID == id.ClaimID
}

func TestRacyTailFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return newOwnTail(m, completedBy) }))
	// Its tail's outcomes are not kept, so TailAdmitted fails too.
	requireCases(t, res, "Journal/ConcurrentTailIntents", "Journal/TailAdmitted")
	requireMessage(t, res, "Journal/ConcurrentTailIntents", "concurrent identical intents of the tail", "were recorded; want exactly 1")
}

func TestEndedAttemptTailFails(t *testing.T) {
	t.Parallel()
	// Any settled attempt's calls are admitted: failed, abandoned and
	// exhausted ones too.
	ended := func(row intake.Row, id intake.Identity) bool {
		return row.State != intake.StatePending && row.State != intake.StateProcessing &&
			row.Attempts == id.Attempt && row.ClaimID == id.ClaimID
	}
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return newOwnTail(m, ended) }))
	requireCases(t, res, "Journal/ConcurrentTailIntents", "Journal/EndedAttemptRefused", "Journal/IntentFencedByIdentity", "Journal/TailAdmitted")
	requireMessage(t, res, "Journal/EndedAttemptRefused", "for an attempt that ended failed, its retry not yet claimed; want stale")
	requireMessage(t, res, "Journal/EndedAttemptRefused", "for an attempt that ended abandoned; want false")
}

func TestTailIgnoresClaimIDFails(t *testing.T) {
	t.Parallel()
	// The attempt number alone names the tail: an identity of a row that
	// was pruned and recorded again passes for the new tail.
	byAttempt := func(row intake.Row, id intake.Identity) bool {
		return row.State == intake.StateCompleted && row.Attempts == id.Attempt
	}
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return newOwnTail(m, byAttempt) }))
	requireCases(t, res, "Journal/ConcurrentTailIntents", "Journal/TailAdmitted", "Journal/TailEndsWithRow")
	requireMessage(t, res, "Journal/TailEndsWithRow", "before it was pruned and recorded again (same attempt number, another claim id); want stale")
}

// forgetsReceipt lists due rows without their receipt time.
type forgetsReceipt struct{ *memstore.Store }

func (s forgetsReceipt) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	rows, err := s.Store.Due(ctx, q)
	for i := range rows {
		rows[i].ReceivedAt = time.Time{}
	}
	return rows, err
}

func TestForgetsReceiptFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return forgetsReceipt{m} }), "Add")
	requireMessage(t, res, "Add/DueReportsReceipt", "Due reports update 1 received at")
}

// settleRecordsBlindly appends a settlement's record whether or not the
// settlement applied, under the ids the record names.
type settleRecordsBlindly struct{ *memstore.Store }

func (s settleRecordsBlindly) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	rec := st.Attempt
	st.Attempt = nil
	ok, err := s.Store.Settle(ctx, id, st)
	if rec != nil && err == nil {
		if _, err := s.Store.RecordAttempt(ctx, *rec); err != nil {
			return ok, err
		}
	}
	return ok, err
}

func TestSettleRecordsBlindlyFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return settleRecordsBlindly{m} }))
	requireCases(t, res, "Batch/ConcurrentSettles", "Batch/ConcurrentSettlesOfEndedAttempts", "History/RecordedWithSettlement")
	requireMessage(t, res, "Batch/ConcurrentSettles", "after the concurrent settlements: Attempts(3003) listed 2 records")
	requireMessage(t, res, "History/RecordedWithSettlement", "after a stale settlement and one with an invalid record: Attempts(1) listed 1 records")
}

// settleDropsRecord validates Settlement.Attempt and then ignores it, as
// a store written before it existed would.
type settleDropsRecord struct{ *memstore.Store }

func (s settleDropsRecord) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if err := st.Validate(); err != nil {
		return false, err
	}
	st.Attempt = nil
	return s.Store.Settle(ctx, id, st)
}

func TestSettleDropsRecordFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return settleDropsRecord{m} }))
	requireCases(t, res, "Batch/ConcurrentSettles", "Batch/ConcurrentSettlesKeepOrder", "Batch/ConcurrentSettlesOfEndedAttempts", "Batch/ConcurrentRecordsSurviveRequeue",
		"History/RecordedWithSettlement", "History/RecordsCopied", "History/RecordTimesKept")
	requireMessage(t, res, "Batch/ConcurrentSettles", "after the concurrent settlements: Attempts(3000) listed 0 records")
	requireMessage(t, res, "History/RecordedWithSettlement", "after attempt 1 failed with its record: Attempts(1) listed 0 records")
}

// completionLast keeps the record of an update's completing attempt apart
// from the others and lists it last, as a store that keeps it in the
// update's row could: a record that came in after the completion is then
// listed before it.
type completionLast struct{ *memstore.Store }

func (s completionLast) Attempts(ctx context.Context, updateID int64) ([]intake.AttemptRecord, error) {
	recs, err := s.Store.Attempts(ctx, updateID)
	for i, r := range recs {
		if r.Outcome == intake.AttemptCompleted {
			recs = append(slices.Delete(recs, i, i+1), r)
			break
		}
	}
	return recs, err
}

func TestCompletionLastFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return completionLast{m} }), "History")
	requireMessage(t, res, "History/RecordedWithSettlement", "after attempt 2's record came in after the completion")
}

// exhaustByClaimID exhausts the row whose claim id matches, whatever
// attempt the identity names: one of the identity's three fields left
// unchecked.
type exhaustByClaimID struct{ *memstore.Store }

func (s exhaustByClaimID) Exhaust(ctx context.Context, id intake.Identity, at time.Time, text string) (bool, error) {
	if row, ok, err := s.Get(ctx, id.UpdateID); err == nil && ok && row.ClaimID == id.ClaimID {
		id.Attempt = row.Attempts
	}
	return s.Store.Exhaust(ctx, id, at, text)
}

func TestExhaustByClaimIDFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return exhaustByClaimID{m} }), "Exhaust")
	requireCases(t, res, "Exhaust/TerminalRefusal")
	requireMessage(t, res, "Exhaust/TerminalRefusal", "Exhaust naming attempt 2 with attempt 1's claim id reported true")
}

// exhaustEndsEarly takes a lease to end just before its end: an Exhaust
// at exactly the lease end is refused.
type exhaustEndsEarly struct{ *memstore.Store }

func (s exhaustEndsEarly) Exhaust(ctx context.Context, id intake.Identity, at time.Time, text string) (bool, error) {
	if row, ok, err := s.Get(ctx, id.UpdateID); err == nil && ok && row.State == intake.StateProcessing && row.DueAt.Equal(at) {
		return false, nil
	}
	return s.Store.Exhaust(ctx, id, at, text)
}

func TestExhaustEndsEarlyFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return exhaustEndsEarly{m} }), "Exhaust")
	requireCases(t, res, "Exhaust/ExpiredAttemptCannotExhaust")
	requireMessage(t, res, "Exhaust/ExpiredAttemptCannotExhaust", "reported false at exactly the lease end")
}

// acknowledgedPastCursor lists acknowledged exhaustions too once the
// listing has a cursor, as a paged query that lost its "not acknowledged"
// condition would.
type acknowledgedPastCursor struct{ *memstore.Store }

func (s acknowledgedPastCursor) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	es, err := s.Store.DueExhaustions(ctx, q)
	if err != nil || q.After == nil {
		return es, err
	}
	rows, err := s.List(ctx, intake.ListQuery{State: intake.StateAbandoned, After: q.After, Limit: q.Limit})
	if err != nil {
		return nil, err
	}
	for _, r := range rows {
		if !r.SettledAt.IsZero() && r.ClaimID != "" {
			es = append(es, intake.Exhaustion{Identity: intake.Identity{UpdateID: r.UpdateID, Attempt: r.Attempts, ClaimID: r.ClaimID},
				Body: r.Body, ExhaustedAt: r.DueAt, Error: r.Error})
		}
	}
	slices.SortFunc(es, func(a, b intake.Exhaustion) int { return cmp.Compare(a.UpdateID, b.UpdateID) })
	return es[:min(len(es), q.Limit)], nil
}

func TestAcknowledgedPastCursorFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return acknowledgedPastCursor{m} }), "Exhaust")
	requireCases(t, res, "Exhaust/CursorAfter", "Exhaust/CursorPageOfExhaustions")
	requireMessage(t, res, "Exhaust/CursorAfter", "once 12 was acknowledged")
}

// strictLeaseEndsEarly lists, in strict chat order, a processing row at
// exactly its lease end, as a strict listing that reads the lease's end as
// already past would.
type strictLeaseEndsEarly struct{ *memstore.Store }

func (s strictLeaseEndsEarly) DueInOrder(ctx context.Context, q intake.DueQuery, chat string) ([]intake.StoredUpdate, error) {
	q.Now = q.Now.Add(time.Millisecond)
	return s.Store.DueInOrder(ctx, q, chat)
}

func TestStrictLeaseEndsEarlyFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return strictLeaseEndsEarly{m} }), "ChatOrder")
	requireCasesOr(t, res, []string{"ChatOrder/DueAgreesWithClaims"}, "ChatOrder/DueBoundaries")
	requireMessage(t, res, "ChatOrder/DueBoundaries", "at exactly row 1's lease end")
}
