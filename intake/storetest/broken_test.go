package storetest

import (
	"context"
	"testing"

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

func (s lenientArguments) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (int, bool, error) {
	o.MaxAttempts = max(o.MaxAttempts, 1)
	return s.Store.Claim(ctx, id, o)
}

func (s lenientArguments) ClaimOwned(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	o.MaxAttempts = max(o.MaxAttempts, 1)
	return s.Store.ClaimOwned(ctx, id, o)
}

func (s lenientArguments) Settle(ctx context.Context, id int64, attempt int, st intake.Settlement) (bool, error) {
	if st.Validate() != nil {
		st.State = intake.StateCompleted
	}
	return s.Store.Settle(ctx, id, attempt, st)
}

func (s lenientArguments) SettleOwned(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if st.Validate() != nil {
		st.State = intake.StateCompleted
	}
	return s.Store.SettleOwned(ctx, id, st)
}

func TestLenientArgumentsFail(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return lenientArguments{m} }))
	requireCases(t, res, "Arguments/BadBaseArgumentsRefused", "Arguments/BadOwnedArgumentsRefused",
		"Arguments/BadExhaustionQueryRefused", "Arguments/BadListQueryRefused")
	requireMessage(t, res, "Arguments/BadBaseArgumentsRefused", "Due(limit 0)", "want an error wrapping intake.ErrInvalidArgument")
	requireMessage(t, res, "Arguments/BadBaseArgumentsRefused", "Claim(1, MaxAttempts 0)")
	requireMessage(t, res, "Arguments/BadBaseArgumentsRefused", `Settle(2, attempt 1, state "done")`)
	requireMessage(t, res, "Arguments/BadOwnedArgumentsRefused", "SettleOwned(")
	requireMessage(t, res, "Arguments/BadExhaustionQueryRefused", "DueExhaustions(limit 0)")
	requireMessage(t, res, "Arguments/BadListQueryRefused", "List(state lost)")
}
