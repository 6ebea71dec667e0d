package pgstore

import (
	"context"
	"sync/atomic"
	"time"
)

// Statistics for a young table.
//
// PostgreSQL plans a prepared statement for its parameters five times, then
// may keep one generic plan, built from the table's statistics of that
// moment, until they change. A store's statements are prepared on every
// pooled connection as the store starts, often on an empty table, and a
// generic plan made for an empty table reads it whole: lockRows then scans
// the table for its few ids, 15 ms a call at 200,000 rows against 0.1 ms
// through the primary key once the table is analyzed. Autovacuum would
// analyze it, but it visits each database only once a minute
// (autovacuum_naptime), and under load a table outgrows its plans long
// before that: in bench relay this made PostgreSQL slower round by round,
// in some runs and not others.
//
// So the store analyzes its table itself each time the rows it added pass
// another power of ten from firstAnalyze: at 1,000, 10,000 and so on. The
// first of these gives the planner a table no longer tiny, whose plans go
// through the indexes; the later ones keep the statistics in step while the
// table is young, and cost nothing worth counting against the rows added
// between them. ANALYZE is what autovacuum runs anyway: it samples the
// table, takes no lock that blocks reads or writes, and invalidates the
// plans built from the old statistics. It runs in the background, one at a
// time, bounded by analyzeTimeout; a role that does not own the table only
// gets PostgreSQL's warning, and autovacuum does the work as before.

// firstAnalyze is how many added rows the first ANALYZE waits for.
const firstAnalyze = 1000

// analyzeTimeout bounds one ANALYZE.
const analyzeTimeout = time.Minute

// growth counts a store's added rows and runs the ANALYZEs they call for.
type growth struct {
	added   atomic.Int64
	next    atomic.Int64 // the count of the next ANALYZE; 0 for firstAnalyze
	running atomic.Bool
	started atomic.Int64 // ANALYZEs started
	// analyze runs one ANALYZE; ran, when set, is told that one ended,
	// for tests.
	analyze func(context.Context) error
	ran     func(error)
	// failed, when set, is told of an ANALYZE that failed.
	failed func(error)
}

// grew records n more added rows, and starts an ANALYZE when they pass
// the next threshold and none is running.
func (g *growth) grew(n int) {
	if n <= 0 {
		return
	}
	added := g.added.Add(int64(n))
	stored := g.next.Load()
	next := stored
	if next == 0 {
		next = firstAnalyze
	}
	if added < next || g.running.Load() {
		return // a threshold passed while one runs is taken by a later add
	}
	if !g.next.CompareAndSwap(stored, next*10) || !g.running.CompareAndSwap(false, true) {
		return
	}
	g.started.Add(1)
	go func() {
		defer g.running.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), analyzeTimeout)
		defer cancel()
		err := g.analyze(ctx)
		if err != nil && g.failed != nil {
			g.failed(err)
		}
		if g.ran != nil {
			g.ran(err)
		}
	}()
}
