package storetest

import (
	"context"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// ignoresChatOrder claims in order as if order did not matter, while its
// listing still honours it: the mistake of a store that added the chat to
// the due query only.
type ignoresChatOrder struct{ *memstore.Store }

func (s ignoresChatOrder) ClaimInOrder(ctx context.Context, id int64, o intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.Store.ClaimAs(ctx, id, o, p)
}

func TestIgnoresChatOrderFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return ignoresChatOrder{m} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/OnlyLowestUnsettledClaimable", "ChatOrder/SettledReleasesChat",
		"ChatOrder/ExhaustionReleasesChat", "ChatOrder/LiveLeaseHoldsLateEarlier", "ChatOrder/ConcurrentClaimsOfOneChat",
		"ChatOrder/BatchAddsKeepChat", "ChatOrder/DueAgreesWithClaims", "ChatOrder/OrderRefusalSpendsNothing",
		"ChatOrder/DueJudgesLeasesAtNow", "ChatOrder/LongChatKeys", "ChatOrder/PruneKeepsChatHeld")
	requireMessage(t, res, "ChatOrder/OnlyLowestUnsettledClaimable", "ClaimInOrder(2, now 10ms) = attempt 1, true; want false: row 1 of its chat is pending")
	requireMessage(t, res, "ChatOrder/SettledReleasesChat", "want false: row 1 of its chat failed and waits for its retry")
	requireMessage(t, res, "ChatOrder/LiveLeaseHoldsLateEarlier", "want false: row 2 of its chat is processing under a live lease")
	requireMessage(t, res, "ChatOrder/ConcurrentClaimsOfOneChat", "exactly one must win")
}

// dueIgnoresChatOrder claims in strict order but lists every due row, of
// every chat: held rows fill the page.
type dueIgnoresChatOrder struct{ *memstore.Store }

func (s dueIgnoresChatOrder) DueInOrder(ctx context.Context, q intake.DueQuery, _ string) ([]intake.StoredUpdate, error) {
	return s.Store.Due(ctx, q)
}

func TestDueIgnoresChatOrderFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return dueIgnoresChatOrder{m} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/DueListsOnlyClaimable", "ChatOrder/BatchAddsKeepChat", "ChatOrder/DueAgreesWithClaims", "ChatOrder/DueListsLapsedOwners", "ChatOrder/DueJudgesLeasesAtNow",
		"ChatOrder/DuePendingGrace", "ChatOrder/LongChatKeys", "ChatOrder/PruneKeepsChatHeld", "ChatOrder/DueChatPage")
	requireMessage(t, res, "ChatOrder/DueListsOnlyClaimable", "DueInOrder(now 10ms, limit 5) listed [1 2 3 4 5]; want [1 41 42]")
	requireMessage(t, res, "ChatOrder/DueListsOnlyClaimable", "DueInOrder(now 10ms, chat b) listed [1 2 3 4 5]; want [41]")
}

// forgetsChat keeps no chat: every row is unordered.
type forgetsChat struct{ *memstore.Store }

func (s forgetsChat) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	u.Chat = ""
	return s.Store.Add(ctx, u)
}

func (s forgetsChat) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	return s.AddBatchAs(ctx, reqs, intake.ProcessClaim{})
}

func (s forgetsChat) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	cp := append([]intake.AddRequest(nil), reqs...)
	for i := range cp {
		cp[i].Chat = ""
	}
	return s.Store.AddBatchAs(ctx, cp, p)
}

func TestForgetsChatFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return forgetsChat{m} }), "ChatOrder")
	requireCases(t, res, "ChatOrder/OnlyLowestUnsettledClaimable", "ChatOrder/SettledReleasesChat",
		"ChatOrder/ExhaustionReleasesChat", "ChatOrder/LiveLeaseHoldsLateEarlier", "ChatOrder/DueListsOnlyClaimable",
		"ChatOrder/ConcurrentClaimsOfOneChat", "ChatOrder/BatchAddsKeepChat", "ChatOrder/DueAgreesWithClaims", "ChatOrder/OrderRefusalSpendsNothing",
		"ChatOrder/DueListsLapsedOwners", "ChatOrder/DueBoundaries", "ChatOrder/DueJudgesLeasesAtNow", "ChatOrder/DuePendingGrace",
		"ChatOrder/LongChatKeys", "ChatOrder/PruneKeepsChatHeld", "ChatOrder/DueChatPage")
}
