package storetest_test

import (
	"slices"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

func TestAddReportsWhatWasNew(t *testing.T) {
	t.Parallel()
	s := memstore.New()
	in := func(id int64) intake.Incoming {
		return intake.Incoming{UpdateID: id, Body: []byte(`{"update_id":1}`), ReceivedAt: time.UnixMilli(1)}
	}
	if added, err := storetest.Add(t.Context(), s, []intake.Incoming{in(1)}); err != nil || !slices.Equal(added, []bool{true}) {
		t.Fatalf("Add(1) = %v, %v; want [true]", added, err)
	}
	added, err := storetest.Add(t.Context(), s, []intake.Incoming{in(1), in(2)})
	if err != nil || !slices.Equal(added, []bool{false, true}) {
		t.Fatalf("Add(1, 2) = %v, %v; want [false true]", added, err)
	}
	row, ok, err := s.Get(t.Context(), 2)
	if err != nil || !ok || row.State != intake.StatePending {
		t.Fatalf("row 2 = %+v, %v, %v; want pending (added unclaimed)", row, ok, err)
	}
}
