// Package pacedstats shares a store's counts among their readers and paces
// how often they are taken.
//
// [intake.AdminStore.Stats] counts every row a store keeps, settled ones
// included: SQLite reads an index of the whole table, PostgreSQL the table
// itself, about half a second per million rows. Its readers ask on a
// timer: the dashboard's open pages at each refresh (every 2 s by default),
// Prometheus at each scrape. A day's retention of a busy bot is millions of
// rows, so left alone a few open tabs keep a database connection counting
// all the time, and a scrape bounded to 5 s reports the store down once the
// table takes longer than that to count.
//
// A [Cache] runs one count at a time and reuses it while it is younger
// than Pace times what it took (from MinAge to MaxAge): whatever the
// table's size, its readers keep the database counting 1/Pace of the time
// at most. Once a count has been taken, a reader never waits for the next:
// it gets the last one, with the time it was taken, while the next runs in
// the background. A failed count is handed out too, so a store that stops
// answering shows as soon as a count fails, and is never reused. Only the
// first count, and the first after [Cache.Forget], is waited for.
package pacedstats

import (
	"context"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// How a [Cache] paces its counts, and bounds one.
const (
	// Pace: a count is reused for Pace times what it took.
	Pace = 10
	// MinAge is the least time a count is reused for, however quick.
	MinAge = time.Second
	// MaxAge is the most, however slow.
	MaxAge = 5 * time.Minute
	// DefaultTimeout bounds one count.
	DefaultTimeout = time.Minute
)

// Cache shares and paces the counts of Stats. Set Stats before first use
// and do not change the fields after; a Cache is safe for concurrent use.
type Cache struct {
	// Stats takes a count: a store's [intake.AdminStore.Stats].
	Stats func(context.Context) (intake.Stats, error)
	// Timeout bounds one count. Zero means [DefaultTimeout].
	Timeout time.Duration
	// Now replaces time.Now when set (tests).
	Now func() time.Time

	mu      sync.Mutex
	last    *count // the latest count that ended, nil when none (or forgotten)
	running *count // the count running, nil when none
	gen     uint64 // bumped by Forget
}

// count is one call of Stats. done is closed when it ends; the other
// fields are set before that.
type count struct {
	gen   uint64
	done  chan struct{}
	st    intake.Stats
	taken time.Time // when the count started
	took  time.Duration
	err   error
}

func (c *Cache) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// fresh reports whether k may be handed out at now without a new count.
func (k *count) fresh(now time.Time) bool {
	age := min(max(Pace*k.took, MinAge), MaxAge)
	return k.err == nil && now.Sub(k.taken) < age
}

// Get returns the store's counts and when they were taken, or the error of
// the latest count. While the latest count is fresh it is returned as it
// is. Once it is not, a new count starts in the background and the latest
// is returned meanwhile. With no count yet (or none since Forget), Get
// waits for one, or for ctx. One count runs at a time, whatever Forget
// does (a store that hangs holds one connection, not one per reader), and
// a count goes on to its Timeout when the readers waiting for it leave.
func (c *Cache) Get(ctx context.Context) (intake.Stats, time.Time, error) {
	for {
		c.mu.Lock()
		last, k := c.last, c.running
		switch {
		case last != nil && last.fresh(c.now()):
			c.mu.Unlock()
			return last.st, last.taken, nil
		case k == nil:
			k = &count{gen: c.gen, done: make(chan struct{})}
			c.running = k
			go c.take(k)
		}
		current := k.gen == c.gen
		c.mu.Unlock()
		if last != nil {
			return last.st, last.taken, last.err
		}
		select {
		case <-k.done:
		case <-ctx.Done():
			return intake.Stats{}, time.Time{}, context.Cause(ctx)
		}
		if current {
			return k.st, k.taken, k.err
		}
		// k began before Forget: now that it ended, count anew.
	}
}

// take runs count k and keeps it, unless Forget was called since it began.
func (c *Cache) take(k *count) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	k.taken = c.now()
	k.st, k.err = c.Stats(ctx)
	k.took = c.now().Sub(k.taken)
	cancel()

	c.mu.Lock()
	c.running = nil
	if k.gen == c.gen {
		c.last = k
	}
	c.mu.Unlock()
	close(k.done)
}

// Forget drops the latest count: the next Get waits for a new one. A
// count running when Forget is called is neither kept nor handed out; the
// new one starts when it ends. Call Forget when the store changed in a way
// its readers must see at once (an operator's action, a failing health
// check).
func (c *Cache) Forget() {
	c.mu.Lock()
	c.last = nil
	c.gen++
	c.mu.Unlock()
}
