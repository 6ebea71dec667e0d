package storetest

import (
	"context"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// settledAtRecordEnd settles a completion carrying its record at the
// record's end rather than the settlement's time, as an SQL store whose
// settlement read the wrong parameter for settled_at would.
type settledAtRecordEnd struct{ *memstore.Store }

func (s settledAtRecordEnd) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if st.State == intake.StateCompleted && st.Attempt != nil {
		st.At = st.Attempt.EndedAt
	}
	return s.Store.Settle(ctx, id, st)
}

func TestSettledAtRecordEndFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return settledAtRecordEnd{m}
	}), "Batch/SettledAtSettlementTime")
	requireCases(t, res, "Batch/SettledAtSettlementTime")
	requireMessage(t, res, "Batch/SettledAtSettlementTime", "Get(1) after its completion at 50ms, with a record that ended at 40ms, shows it settled at 40ms; want 50ms")
	requireMessage(t, res, "Batch/SettledAtSettlementTime", "Prune(before 50ms) deleted 17 rows")
}
