package storetest

import (
	"context"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// recordEndsAtSettlement keeps the record riding on a completion with the
// settlement's time as its end, as an SQL store whose completion read the
// wrong parameter for the record's end would.
type recordEndsAtSettlement struct{ *memstore.Store }

func (s recordEndsAtSettlement) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if st.State == intake.StateCompleted && st.Attempt != nil {
		rec := *st.Attempt
		rec.EndedAt = st.At
		st.Attempt = &rec
	}
	return s.Store.Settle(ctx, id, st)
}

func TestRecordEndsAtSettlementFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return recordEndsAtSettlement{m}
	}), "History/RecordTimesKept")
	requireCases(t, res, "History/RecordTimesKept")
}
