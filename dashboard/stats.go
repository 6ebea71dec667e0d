package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// The store's counts are shared by the dashboard's pages, and paced.
//
// [intake.AdminStore.Stats] counts every row the store keeps, settled ones
// included: SQLite reads an index of the whole table, PostgreSQL the table
// itself, about half a second per million rows. Every open overview and
// exhaustions page asks again at each refresh (every 2 s by default), and a
// day's retention of a busy bot is millions of rows: left alone, a few open
// tabs would keep a database connection counting all the time. So the
// dashboard runs one count at a time, shares it with every page that asks
// while it runs, and reuses it while it is younger than statsPace times
// what it took (from minStatsAge to maxStatsAge). Whatever the table's
// size, the dashboard's counting then takes about a tenth of one
// connection's time at most. A page whose counts are older than its
// refresh says when they were taken, and the dashboard's own writes
// (acknowledge, requeue) forget the count, so the page after one counts
// anew.
const (
	statsPace   = 10
	minStatsAge = time.Second
	maxStatsAge = 5 * time.Minute
)

// statsCache holds the latest count and the one running. The zero value
// is ready; now, when set, replaces time.Now, and onJoin is told of each
// caller that joins a running count (tests).
type statsCache struct {
	now    func() time.Time
	onJoin func()

	mu      sync.Mutex
	cached  *statsCount // the latest good count, nil when none (or forgotten)
	running *statsCount // the count running, nil when none
	gen     uint64      // bumped by forget
}

// statsCount is one count of the store's rows. done is closed when it
// ends; the other fields are set before that.
type statsCount struct {
	gen   uint64
	done  chan struct{}
	st    intake.Stats
	taken time.Time // when the count started
	took  time.Duration
	err   error
}

func (c *statsCache) clock() time.Time {
	if c.now != nil {
		return c.now()
	}
	return time.Now()
}

// fresh reports whether the count may still be shown at now.
func (s *statsCount) fresh(now time.Time) bool {
	age := min(max(statsPace*s.took, minStatsAge), maxStatsAge)
	return now.Sub(s.taken) < age
}

// get returns the store's counts and when they were taken: the cached
// count while it is fresh, else the running count's result, else a new
// count's, which this caller runs, bounded by storeTimeout, even if ctx
// ends (the callers that joined it wait for it). A failed count is not
// kept.
func (c *statsCache) get(ctx context.Context, store intake.AdminStore) (intake.Stats, time.Time, error) {
	c.mu.Lock()
	if s := c.cached; s != nil && s.fresh(c.clock()) {
		c.mu.Unlock()
		return s.st, s.taken, nil
	}
	if s := c.running; s != nil && s.gen == c.gen {
		c.mu.Unlock()
		if c.onJoin != nil {
			c.onJoin()
		}
		select {
		case <-s.done:
			return s.st, s.taken, s.err
		case <-ctx.Done():
			return intake.Stats{}, time.Time{}, context.Cause(ctx)
		}
	}
	s := &statsCount{gen: c.gen, done: make(chan struct{})}
	c.running = s
	c.mu.Unlock()

	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	s.taken = c.clock()
	s.st, s.err = store.Stats(cctx)
	s.took = c.clock().Sub(s.taken)
	cancel()

	c.mu.Lock()
	if c.running == s {
		c.running = nil
	}
	if s.err == nil && s.gen == c.gen {
		c.cached = s
	}
	c.mu.Unlock()
	close(s.done)
	return s.st, s.taken, s.err
}

// forget drops the cached count, and keeps a count running now from being
// cached or joined: the store changed under it.
func (c *statsCache) forget() {
	c.mu.Lock()
	c.cached = nil
	c.gen++
	c.mu.Unlock()
}
