package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// TestYoungTableIsAnalyzed: the store analyzes its table once the rows it
// added reach FirstAnalyze, and again at ten times that, and not before;
// the statistics then describe the grown table, so plans built from them
// use its indexes.
func TestYoungTableIsAnalyzed(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	analyzed := make(chan error, 2)
	pgstore.OnAnalyzed(st, func(err error) { analyzed <- err })
	next := int64(1)
	// add adds the updates up to id last, in batches as the intake's group
	// commit makes them, and a duplicate of each, which adds no row.
	add := func(last int64) {
		t.Helper()
		for next <= last {
			var reqs []intake.AddRequest
			for ; next <= last && len(reqs) < 64; next++ {
				u := intake.Incoming{UpdateID: next, Body: fmt.Appendf(nil, `{"update_id":%d}`, next), ReceivedAt: at(next)}
				reqs = append(reqs, intake.AddRequest{Incoming: u}, intake.AddRequest{Incoming: u})
			}
			if _, err := st.AddBatch(t.Context(), reqs); err != nil {
				t.Fatal(err)
			}
		}
	}
	wait := func(n int64) {
		t.Helper()
		if got := pgstore.AnalyzesStarted(st); got != n {
			t.Fatalf("ANALYZEs started = %d, want %d", got, n)
		}
		if err := <-analyzed; err != nil {
			t.Fatalf("ANALYZE: %v", err)
		}
	}
	var tuples float64
	reltuples := func() float64 {
		t.Helper()
		if err := pool.QueryRow(t.Context(), `SELECT reltuples FROM pg_class WHERE oid = 'telegram_updates'::regclass`).Scan(&tuples); err != nil {
			t.Fatal(err)
		}
		return tuples
	}

	add(pgstore.FirstAnalyze - 1)
	// A duplicate through Add adds no row, and counts for nothing.
	if ok, err := st.Add(t.Context(), intake.Incoming{UpdateID: 1, Body: []byte(`{}`), ReceivedAt: at(0)}); err != nil || ok {
		t.Fatalf("Add(1) again = %v, %v; want false", ok, err)
	}
	if got := pgstore.AnalyzesStarted(st); got != 0 {
		t.Fatalf("ANALYZEs started after %d rows = %d, want none", pgstore.FirstAnalyze-1, got)
	}
	if got := reltuples(); got >= 0 {
		t.Fatalf("reltuples = %v before the first ANALYZE; want -1 (never analyzed)", got)
	}
	ok, err := st.Add(t.Context(), intake.Incoming{UpdateID: next, Body: []byte(`{}`), ReceivedAt: at(next)})
	if err != nil || !ok {
		t.Fatalf("Add(%d) = %v, %v", next, ok, err)
	}
	next++
	wait(1)
	if got := reltuples(); got != pgstore.FirstAnalyze {
		t.Fatalf("reltuples = %v after the first ANALYZE, want %d", got, pgstore.FirstAnalyze)
	}
	add(10*pgstore.FirstAnalyze - 1)
	if got := pgstore.AnalyzesStarted(st); got != 1 {
		t.Fatalf("ANALYZEs started below %d rows = %d, want 1", 10*pgstore.FirstAnalyze, got)
	}
	add(10 * pgstore.FirstAnalyze)
	wait(2)
	if got := reltuples(); got != 10*pgstore.FirstAnalyze {
		t.Fatalf("reltuples = %v after the second ANALYZE, want %d", got, 10*pgstore.FirstAnalyze)
	}
}

// TestFailedAnalyzeIsLogged: an ANALYZE that fails (here its lock times
// out behind another session's) is logged through Config.Logger, and the
// store goes on adding rows.
func TestFailedAnalyzeIsLogged(t *testing.T) {
	t.Parallel()
	pool := poolWith(t, pgtest.URL(t), map[string]string{"lock_timeout": "100"})
	var logged testkit.SyncBuffer
	st, err := pgstore.New(t.Context(), pool, pgstore.Config{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	analyzed := make(chan error, 1)
	pgstore.OnAnalyzed(st, func(err error) { analyzed <- err })
	holder, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(context.Background())
	if _, err := holder.Exec(t.Context(), "LOCK TABLE telegram_updates IN SHARE UPDATE EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	var reqs []intake.AddRequest
	for id := int64(1); id <= pgstore.FirstAnalyze; id++ {
		reqs = append(reqs, intake.AddRequest{Incoming: intake.Incoming{UpdateID: id, Body: []byte(`{}`), ReceivedAt: at(id)}})
	}
	if _, err := st.AddBatch(t.Context(), reqs); err != nil {
		t.Fatal(err)
	}
	if err := <-analyzed; err == nil {
		t.Fatal("ANALYZE succeeded behind a conflicting lock; want its lock to time out")
	}
	out := logged.String()
	if !strings.Contains(out, "background ANALYZE failed") || !strings.Contains(out, "lock timeout") || !strings.Contains(out, "table=telegram_updates") {
		t.Fatalf("log = %q; want the failed ANALYZE, its table and its cause", out)
	}
	if ok, err := st.Add(t.Context(), intake.Incoming{UpdateID: pgstore.FirstAnalyze + 1, Body: []byte(`{}`), ReceivedAt: at(0)}); err != nil || !ok {
		t.Fatalf("Add after the failed ANALYZE = %v, %v", ok, err)
	}
}
