package storetest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// The broken stores below wrap memstore and break exactly one thing each,
// so each test can say which violations the suite must name, and that it
// names no others.

// coreOnly exposes the methods of intake.Store and no capability.
type coreOnly struct{ m *memstore.Store }

func (s coreOnly) Add(ctx context.Context, u intake.Incoming) (bool, error) { return s.m.Add(ctx, u) }
func (s coreOnly) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	return s.m.AddBatch(ctx, reqs)
}
func (s coreOnly) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.m.Claim(ctx, id, o)
}
func (s coreOnly) Renew(ctx context.Context, id intake.Identity, lease, now time.Time) (bool, error) {
	return s.m.Renew(ctx, id, lease, now)
}
func (s coreOnly) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	return s.m.Settle(ctx, id, st)
}
func (s coreOnly) Owns(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	return s.m.Owns(ctx, id, at)
}
func (s coreOnly) Exhaust(ctx context.Context, id intake.Identity, at time.Time, text string) (bool, error) {
	return s.m.Exhaust(ctx, id, at, text)
}
func (s coreOnly) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	return s.m.DueExhaustions(ctx, q)
}
func (s coreOnly) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	return s.m.AcknowledgeExhaustion(ctx, id, at)
}
func (s coreOnly) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	return s.m.Due(ctx, q)
}
func (s coreOnly) Prune(ctx context.Context, before time.Time) (int, error) {
	return s.m.Prune(ctx, before)
}

// farFuture is a Now at which every processing or failed row is claimable:
// the broken claims below use it to write without the store's own check.
var farFuture = time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)

// nonAtomicClaim reads the row, decides, yields, then writes: the classic
// read-then-write claim. With careless set it also ignores leases and retry
// times when it decides. It must run in a synctest bubble, where the yield
// (a sleep) deterministically lets every racer read before any writes.
type nonAtomicClaim struct {
	*memstore.Store
	careless bool
}

func (s nonAtomicClaim) decide(ctx context.Context, id int64, o intake.ClaimOpts) (take bool, err error) {
	row, ok, err := s.Get(ctx, id)
	if err != nil || !ok {
		return false, err
	}
	claimable := row.State == intake.StatePending ||
		(row.State == intake.StateFailed && !row.DueAt.After(o.Now)) ||
		(row.State == intake.StateProcessing && row.DueAt.Before(o.Now))
	if s.careless {
		claimable = row.State == intake.StatePending || row.State == intake.StateFailed || row.State == intake.StateProcessing
	}
	if !claimable || row.Attempts >= o.MaxAttempts {
		return false, nil
	}
	time.Sleep(time.Millisecond)
	return true, nil
}

func (s nonAtomicClaim) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.ClaimAs(ctx, id, o, intake.ProcessClaim{})
}

func (s nonAtomicClaim) ClaimAs(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	take, err := s.decide(ctx, id, o)
	if err != nil || !take {
		// Not taking: let memstore do the refusal or the spend.
		return s.Store.ClaimAs(ctx, id, o, p)
	}
	o.Now = farFuture
	return s.Store.ClaimAs(ctx, id, o, p)
}

func (s nonAtomicClaim) ClaimInOrder(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	take, err := s.decide(ctx, id, o)
	if err != nil || !take {
		return s.Store.ClaimInOrder(ctx, id, o, p)
	}
	o.Now = farFuture
	return s.Store.ClaimInOrder(ctx, id, o, p)
}

// ignoresClaimID replaces the claim id of every identity passed to method
// by the row's current one, so that method compares only update id and
// attempt.
type ignoresClaimID struct {
	*memstore.Store
	method string
}

func (s ignoresClaimID) fix(ctx context.Context, method string, id intake.Identity) intake.Identity {
	if method != s.method {
		return id
	}
	if row, ok, err := s.Get(ctx, id.UpdateID); err == nil && ok {
		id.ClaimID = row.ClaimID
	}
	return id
}

func (s ignoresClaimID) Renew(ctx context.Context, id intake.Identity, lease, now time.Time) (bool, error) {
	return s.Store.Renew(ctx, s.fix(ctx, "Renew", id), lease, now)
}
func (s ignoresClaimID) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	return s.Store.Settle(ctx, s.fix(ctx, "Settle", id), st)
}
func (s ignoresClaimID) Owns(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	return s.Store.Owns(ctx, s.fix(ctx, "Owns", id), at)
}
func (s ignoresClaimID) Exhaust(ctx context.Context, id intake.Identity, at time.Time, text string) (bool, error) {
	return s.Store.Exhaust(ctx, s.fix(ctx, "Exhaust", id), at, text)
}
func (s ignoresClaimID) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	return s.Store.AcknowledgeExhaustion(ctx, s.fix(ctx, "AcknowledgeExhaustion", id), at)
}

// settleAlwaysTrue is a core-only store whose Settle reports true
// whether or not it settled.
type settleAlwaysTrue struct{ coreOnly }

func (s settleAlwaysTrue) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	_, err := s.coreOnly.Settle(ctx, id, st)
	return true, err
}

// errPruneBroken is what failingPrune returns.
var errPruneBroken = errors.New("disk on fire")

// failingPrune cannot prune.
type failingPrune struct{ *memstore.Store }

func (failingPrune) Prune(context.Context, time.Time) (int, error) { return 0, errPruneBroken }

// hangingDue never answers Due, not even when its ctx is cancelled, until
// release is closed.
type hangingDue struct {
	*memstore.Store
	release chan struct{}
}

func (s hangingDue) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	<-s.release
	return s.Store.Due(ctx, q)
}

// panickingRenew panics in Renew.
type panickingRenew struct{ *memstore.Store }

func (panickingRenew) Renew(context.Context, intake.Identity, time.Time, time.Time) (bool, error) {
	panic("renew exploded")
}

// factory returns a Check factory of fresh stores made by wrap.
func factory(wrap func(*memstore.Store) intake.Store) func() (intake.Store, error) {
	return func() (intake.Store, error) { return wrap(memstore.New()), nil }
}

// failing returns the sorted names of the cases with violations.
func failing(res checkResult) []string {
	var names []string
	for _, v := range res.violations {
		if !slices.Contains(names, v.caseName) {
			names = append(names, v.caseName)
		}
	}
	slices.Sort(names)
	return names
}

// requireCases fails unless exactly the named cases reported violations.
func requireCases(t *testing.T, res checkResult, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want)) // the caller's order is its own
	if got := failing(res); !slices.Equal(got, want) {
		t.Errorf("cases with violations = %q\nwant %q\nviolations:\n%s", got, want, dump(res))
	}
}

// requireCasesOr is requireCases where the cases in maybe may also have
// violations: cases that see a store's bug only when racing calls happen to
// run in a given order.
func requireCasesOr(t *testing.T, res checkResult, maybe []string, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	got := slices.DeleteFunc(failing(res), func(name string) bool { return slices.Contains(maybe, name) })
	if !slices.Equal(got, want) {
		t.Errorf("cases with violations = %q\nwant %q, and maybe %q\nviolations:\n%s", failing(res), want, maybe, dump(res))
	}
}

// requireMessage fails unless caseName reported a violation containing
// each fragment.
func requireMessage(t *testing.T, res checkResult, caseName string, fragments ...string) {
	t.Helper()
	for _, v := range res.violations {
		if v.caseName != caseName {
			continue
		}
		ok := true
		for _, f := range fragments {
			ok = ok && strings.Contains(v.msg, f)
		}
		if ok {
			return
		}
	}
	t.Errorf("no violation of %s contains %q; violations:\n%s", caseName, fragments, dump(res))
}

func dump(res checkResult) string {
	var b strings.Builder
	for _, v := range res.violations {
		b.WriteString("\t" + v.Error() + "\n")
	}
	return b.String()
}

func TestMemstoreConforms(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return m }))
	if len(res.violations) != 0 {
		t.Errorf("memstore has violations:\n%s", dump(res))
	}
	if res.caps.String() != "core+ProcessStore+ChatOrderStore+JournalStore+AdminStore+HealthChecker" || len(res.plan.skipped) != 0 {
		t.Errorf("memstore detected as %s, skipped %v; want every capability, nothing skipped", res.caps, res.plan.skipped)
	}
}

func TestCoreOnlySkips(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return coreOnly{m} }))
	if len(res.violations) != 0 {
		t.Errorf("a core-only memstore has violations:\n%s", dump(res))
	}
	want := "detected core; running 69 cases; skipped: Add/HealthyWhileServing (needs intake.HealthChecker), Race/ReclaimLapsedOwner (needs intake.ProcessStore), Exhaust/AckKeepsError (needs intake.AdminStore), Batch/ConcurrentSettlesKeepOrder (needs intake.AdminStore), Batch/ConcurrentRecordsSurviveRequeue (needs intake.AdminStore), Admin (needs intake.AdminStore), " +
		"History (needs intake.AdminStore), Journal (needs intake.JournalStore), Process (needs intake.ProcessStore), ChatOrder (needs intake.ChatOrderStore), " +
		"ClaimOnAdd/OwnerLapseTakesOver (needs intake.ProcessStore), ClaimOnAdd/ClaimedAddHasNoCrash (needs intake.ProcessStore), " +
		"Arguments/BadListQueryRefused (needs intake.AdminStore)"
	if got := res.plan.describe(res.caps); got != want {
		t.Errorf("log line\n got %q\nwant %q", got, want)
	}
}

// TestReadThenWriteClaim: a claim that decides on a read and writes later
// lets every racer win; only the race cases can see it.
func TestReadThenWriteClaim(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return nonAtomicClaim{Store: m} }))
		// Its write at a far future time also takes the live lease that
		// holds a late earlier update of the chat, so its strict claims
		// disagree with strict listings.
		requireCases(t, res, "Race/Claim", "Race/ReclaimLapsedLease", "Fence/RenewRacingReclaim", "ChatOrder/LiveLeaseHoldsLateEarlier", "ChatOrder/DueAgreesWithClaims", "ChatOrder/DueJudgesLeasesAtNow")
		for id := raceFirstID; id < raceFirstID+raceRounds; id++ {
			requireMessage(t, res, "Race/Claim", "of concurrent claims exactly one takes the update: 8 of 8 concurrent fenced claims took update "+strconv.Itoa(id))
		}
	})
}

// TestCarelessClaim: a read-then-write claim that also ignores the lease
// takes live leases, in sequence and in the race.
func TestCarelessClaim(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return nonAtomicClaim{Store: m, careless: true} }))
		requireMessage(t, res, "Claim/LiveLeaseNotTaken", "a live lease is not taken, a lapsed one is: a claim at 50ms took the live lease of attempt 1")
		requireMessage(t, res, "Claim/FailedRetryAndSpend", "a claim at 29ms took the failed row before its retry")
		requireMessage(t, res, "Race/Claim", "8 of 8 concurrent fenced claims took update 600")
	})
}

func TestIgnoresClaimID(t *testing.T) {
	t.Parallel()
	type expect struct{ caseName, fragment string }
	tests := []struct {
		method string
		cases  []string
		expect []expect
	}{
		{
			method: "Owns",
			cases:  []string{"Admin/Requeue", "ClaimOnAdd/ClaimedAddIsAClaim", "ClaimOnAdd/FreshClaimIDAfterPrune", "Fence/AllThreeFieldsCompared", "Fence/ExpiresAndNeverAdopts", "Prune/RecycledRowRefusesOldIdentity"},
			expect: []expect{
				{"Fence/ExpiresAndNeverAdopts", "Owns with a wrong claim id (right update and attempt) = true"},
				{"Fence/ExpiresAndNeverAdopts", "owns the recycled row"},
				{"Fence/AllThreeFieldsCompared", "Owns accepted the current identity with a wrong claim id"},
				{"Prune/RecycledRowRefusesOldIdentity", "owns the recycled row"},
				{"Admin/Requeue", "from before the requeue owns or settles the requeued row"},
			},
		},
		{
			method: "Renew",
			cases:  []string{"ClaimOnAdd/ClaimedAddIsAClaim", "ClaimOnAdd/FreshClaimIDAfterPrune", "Fence/AllThreeFieldsCompared", "Fence/ExpiresAndNeverAdopts", "Prune/RecycledRowRefusesOldIdentity"},
			expect: []expect{
				{"Fence/ExpiresAndNeverAdopts", "Renew with a wrong claim id (right update and attempt) reported true"},
				{"Prune/RecycledRowRefusesOldIdentity", "renewed the recycled row"},
				{"Fence/AllThreeFieldsCompared", "Renew accepted the current identity with a wrong claim id"},
			},
		},
		{
			method: "Settle",
			cases:  []string{"Admin/Requeue", "Batch/ConcurrentSettles", "ClaimOnAdd/ClaimedAddIsAClaim", "ClaimOnAdd/FreshClaimIDAfterPrune", "Fence/AllThreeFieldsCompared", "Fence/ExpiresAndNeverAdopts", "History/RecordedWithSettlement", "Prune/RecycledRowRefusesOldIdentity"},
			expect: []expect{
				{"History/RecordedWithSettlement", "Settle with a stale claim id and a record = true"},
				{"Batch/ConcurrentSettles", "Settle({update 3003, attempt 1, claim \"storetest-wrong-"},
				{"Fence/ExpiresAndNeverAdopts", "Settle with a wrong claim id reported true on the recycled row"},
				{"Prune/RecycledRowRefusesOldIdentity", "settled the recycled row"},
				{"Fence/AllThreeFieldsCompared", "Settle accepted the current attempt with the first claim id"},
				{"Admin/Requeue", "from before the requeue owns or settles the requeued row"},
			},
		},
		{
			method: "Exhaust",
			cases:  []string{"Exhaust/TerminalRefusal", "Prune/RecycledRowRefusesOldIdentity"},
			expect: []expect{
				{"Exhaust/TerminalRefusal", "Exhaust turns the exact live claim into an unacknowledged exhaustion: Exhaust with a wrong claim id reported true"},
				{"Prune/RecycledRowRefusesOldIdentity", "exhausted the recycled row"},
			},
		},
		{
			method: "AcknowledgeExhaustion",
			cases:  []string{"Exhaust/CrashOnLastAttempt", "Prune/RecycledRowRefusesOldIdentity"},
			expect: []expect{
				{"Exhaust/CrashOnLastAttempt", "AcknowledgeExhaustion with a wrong claim id reported true"},
				{"Prune/RecycledRowRefusesOldIdentity", "acknowledged the recycled row's exhaustion"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.method, func(t *testing.T) {
			t.Parallel()
			res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return ignoresClaimID{m, tt.method} }))
			requireCases(t, res, tt.cases...)
			for _, e := range tt.expect {
				requireMessage(t, res, e.caseName, e.fragment)
			}
		})
	}
}

func TestSettleAlwaysTrue(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return settleAlwaysTrue{coreOnly{m}} }))
	if res.caps != 0 {
		t.Fatalf("detected %s; want core only", res.caps)
	}
	// Every case that expects a refused settlement sees the lie.
	requireCases(t, res,
		"Batch/ConcurrentSettles",
		"Batch/ConcurrentSettlesOfEndedAttempts",
		"Claim/BaseSettleRefusesLapsedLease",
		"Claim/FailedAttemptIsOver",
		"Claim/MissingAndTerminalRows",
		"Claim/OnlyHolderRenewsOrSettles",
		"Claim/SettleRacingReclaim",
		"ClaimOnAdd/FreshClaimIDAfterPrune",
		"ClaimOnAdd/ClaimedAddIsAClaim",
		"ClaimOnAdd/LapsedLeaseReclaimed",
		"Exhaust/TerminalRefusal",
		"Fence/AllThreeFieldsCompared",
		"Fence/ExpiresAndNeverAdopts",
		"Fence/FailedAttemptIsOver",
		"Fence/OwnsOnlyWhileProcessing",
		"Fence/SettleAfterLeaseRefused",
		"Fence/SettleRacingReclaim",
		"Prune/RecycledRowRefusesOldIdentity",
	)
	requireMessage(t, res, "Fence/SettleAfterLeaseRefused", "a fenced settlement after the lease lapsed is refused: Settle(", "completed at 11ms) reported true after the lease lapsed at 10ms")
	requireMessage(t, res, "Fence/OwnsOnlyWhileProcessing", "a second Settle(", "reported true after it completed")
}

// TestFailingPrune: a store method that returns an error ends only the
// cases that call it, each with one violation naming the call.
func TestFailingPrune(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return failingPrune{m} }))
	want := []string{
		"Batch/SettledAtSettlementTime",
		"ChatOrder/PruneKeepsChatHeld",
		"ClaimOnAdd/FreshClaimIDAfterPrune",
		"Exhaust/AckOnlyUnacknowledged", "Exhaust/CrashOnLastAttempt",
		"Fence/ExpiresAndNeverAdopts",
		"History/PrunedWithUpdate",
		"Journal/PrunedWithUpdate", "Journal/TailAdmitted", "Journal/TailEndsWithRow", "Journal/TailIntentRacingPrune",
		"Prune/ConcurrentPrunesCountOnce",
		"Prune/ForgetsSettled",
		"Prune/KeepsUnsettledRows",
		"Prune/RecycledRowRefusesOldIdentity",
		"Prune/SpentRowKeptUntilAcknowledged",
	}
	requireCases(t, res, want...)
	if len(res.violations) != len(want) {
		t.Errorf("%d violations; want one per case:\n%s", len(res.violations), dump(res))
	}
	requireMessage(t, res, "Prune/ForgetsSettled", "settled updates are forgotten after pruning: Prune(before 36ms) returned an error: disk on fire")
}

func TestWatchdog(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return hangingDue{m, release} }))
		close(release) // let the abandoned case goroutines finish
		requireMessage(t, res, "Claim/LiveLeaseNotTaken", "the case did not finish within 1m0s: the store deadlocked, or a method ignores its ctx")
		if got := failing(res); slices.Contains(got, "Race/Claim") || slices.Contains(got, "Fence/SettleAfterLeaseRefused") {
			t.Errorf("cases that never call Due failed: %q", got)
		}
		synctest.Wait()
	})
}

func TestPanickingStore(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return panickingRenew{m} }))
	requireMessage(t, res, "Claim/RenewNeverShortens", "the store panicked: renew exploded")
	if got := failing(res); slices.Contains(got, "Race/Claim") {
		t.Errorf("a case that never renews failed: %q", got)
	}
}

// TestCheckJoinsViolations: Check returns every violation as its own error,
// prefixed with the package, case and rule.
func TestCheckJoinsViolations(t *testing.T) {
	t.Parallel()
	err := Check(t.Context(), factory(func(m *memstore.Store) intake.Store { return failingPrune{m} }))
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) {
		t.Fatalf("Check returned %v; want joined errors", err)
	}
	errs := joined.Unwrap()
	if len(errs) < 2 {
		t.Errorf("Check returned %d errors; want one per case that prunes:\n%v", len(errs), err)
	}
	for _, e := range errs {
		if !strings.Contains(e.Error(), "Prune(") || !strings.Contains(e.Error(), "disk on fire") {
			t.Errorf("error %q is not a failed prune", e)
		}
	}
	want := "storetest: Prune/ForgetsSettled: settled updates are forgotten after pruning: Prune(before 36ms) returned an error: disk on fire"
	if !slices.ContainsFunc(errs, func(e error) bool { return e.Error() == want }) {
		t.Errorf("no error reads %q:\n%v", want, err)
	}
	if err := Check(t.Context(), factory(func(m *memstore.Store) intake.Store { return m })); err != nil {
		t.Errorf("Check(memstore) = %v; want nil", err)
	}
}

func TestCheckFactoryError(t *testing.T) {
	t.Parallel()
	err := Check(t.Context(), func() (intake.Store, error) { return nil, errors.New("no database") })
	if err == nil || !strings.Contains(err.Error(), "storetest: setup: newStore failed") || !strings.Contains(err.Error(), "no database") {
		t.Errorf("Check with a failing factory = %v", err)
	}
}

// TestRun drives the *testing.T entry point on a conforming store.
func TestRun(t *testing.T) {
	t.Parallel()
	Run(t, func(*testing.T) intake.Store { return memstore.New() })
}

// TestCheckCancelled: a cancelled check reports every case as not run
// instead of running them against a dead ctx.
func TestCheckCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	res := check(ctx, factory(func(m *memstore.Store) intake.Store { return m }))
	cases := 0
	for _, g := range allGroups() {
		cases += len(g.cases)
	}
	if len(res.violations) != cases {
		t.Errorf("%d violations; want one per case (%d):\n%s", len(res.violations), cases, dump(res))
	}
	requireMessage(t, res, "Add/OneRecordPerUpdateID", "not run: context canceled")
}
