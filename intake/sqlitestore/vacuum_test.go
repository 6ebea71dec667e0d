package sqlitestore_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// TestPruneGivesPagesBack: after a backlog is settled and pruned, the
// pages its rows held go back to the file system, so the file follows the
// rows rather than the largest backlog it ever held (the 2-hour soak's
// file stayed at its high-water mark before).
func TestPruneGivesPagesBack(t *testing.T) {
	t.Parallel()
	s, _ := openStore(t, sqlitestore.Config{Synchronous: "NORMAL"})
	ctx := t.Context()
	pages := func(pragma string) int {
		t.Helper()
		var n int
		if err := s.ReadDB().QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&n); err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
		return n
	}
	const rows = 600
	body := bytes.Repeat([]byte("x"), 4000)
	reqs := make([]intake.AddRequest, rows)
	for i := range reqs {
		reqs[i].Incoming = intake.Incoming{UpdateID: int64(i + 1), Body: body, ReceivedAt: base}
	}
	if _, err := s.AddBatch(ctx, reqs); err != nil {
		t.Fatal(err)
	}
	opts := intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Hour), MaxAttempts: 3}
	for id := int64(1); id <= rows; id++ {
		ident, ok, err := s.Claim(ctx, id, opts)
		if err != nil || !ok {
			t.Fatalf("Claim(%d) = %v, %v", id, ok, err)
		}
		if ok, err := s.Settle(ctx, ident, intake.Settlement{State: intake.StateCompleted, At: base.Add(time.Second)}); err != nil || !ok {
			t.Fatalf("Settle(%d) = %v, %v", id, ok, err)
		}
	}
	full := pages("page_count")
	if n, err := s.Prune(ctx, base.Add(time.Minute)); err != nil || n != rows {
		t.Fatalf("Prune = %d, %v; want %d", n, err, rows)
	}
	after := pages("page_count")
	if free := pages("freelist_count"); free > vacuumSlack {
		t.Errorf("after the prune %d pages are free in the file, want them given back", free)
	}
	if after*2 > full {
		t.Errorf("the file holds %d pages after pruning all %d rows, %d before: the pages were not given back", after, rows, full)
	}
}

// vacuumSlack is how many free pages a prune may leave (SQLite keeps a
// few for its own bookkeeping).
const vacuumSlack = 8
