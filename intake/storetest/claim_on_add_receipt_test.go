package storetest

import (
	"context"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// claimAddReceiptFromClaim records a claimed add as received at its
// claim's Now, as an insert that took both times from one parameter would.
type claimAddReceiptFromClaim struct{ *memstore.Store }

func (s claimAddReceiptFromClaim) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	reqs = slices.Clone(reqs)
	for i, r := range reqs {
		if r.Claim != nil {
			reqs[i].ReceivedAt = r.Claim.Now
		}
	}
	return s.Store.AddBatch(ctx, reqs)
}

func TestClaimAddReceiptFromClaimFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return claimAddReceiptFromClaim{m} }), "ClaimOnAdd")
	requireCases(t, res, "ClaimOnAdd/ReceiptKept")
	requireMessage(t, res, "ClaimOnAdd/ReceiptKept", "Due(now 31ms) listed update 1 received at 10ms; want 5ms")
}
