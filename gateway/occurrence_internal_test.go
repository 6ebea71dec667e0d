package gateway

import (
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// An attempt reported over loses its counters at once, not when
// MaxAttempts later attempts push them out; the other attempts keep
// theirs, and a call of the ended attempt counts from 1 again.
func TestAttemptEndedForgetsItsCounters(t *testing.T) {
	g, err := New(Config{Token: "123:abc", Store: memstore.New(), OwnsIntake: true, Transport: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	ended := intake.Identity{UpdateID: 1, Attempt: 1, ClaimID: "c1"}
	running := intake.Identity{UpdateID: 2, Attempt: 1, ClaimID: "c2"}
	g.occ.take(ended, "sendMessage", "h")
	if n := g.occ.take(ended, "sendMessage", "h"); n != 2 {
		t.Fatalf("second identical call of the attempt took %d; want 2", n)
	}
	g.occ.setFinals(ended, []uint64{7})
	g.occ.take(running, "sendMessage", "h")

	g.AttemptEnded(ended)
	g.AttemptEnded(intake.Identity{UpdateID: 3, Attempt: 1, ClaimID: "never seen"}) // ignored

	if got := held(g.occ); got != 1 {
		t.Fatalf("counters held for %d attempts after one of two ended; want 1", got)
	}
	if _, listed := g.occ.finals(ended); listed {
		t.Error("the ended attempt's journal listing is still held")
	}
	if n := g.occ.take(running, "sendMessage", "h"); n != 2 {
		t.Errorf("the running attempt's next identical call took %d; want 2", n)
	}
	if n := g.occ.take(ended, "sendMessage", "h"); n != 1 {
		t.Errorf("a call of the ended attempt took %d; want 1 (counted afresh)", n)
	}
}

// Without reports, the bound alone forgets: the least recently used first.
func TestOccurrencesKeepAtMostMax(t *testing.T) {
	o := newOccurrences(2)
	for u := int64(1); u <= 3; u++ {
		o.take(intake.Identity{UpdateID: u, Attempt: 1, ClaimID: "c"}, "sendMessage", "h")
	}
	if got := held(o); got != 2 {
		t.Fatalf("counters held for %d attempts; want the bound, 2", got)
	}
	if n := o.take(intake.Identity{UpdateID: 1, Attempt: 1, ClaimID: "c"}, "sendMessage", "h"); n != 1 {
		t.Errorf("the least recently used attempt's call took %d; want 1 (forgotten)", n)
	}
}

// held is how many attempts o keeps counters for, checking that its index
// and its recency list agree.
func held(o *occurrences) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.attempts) != o.lru.Len() {
		return -1
	}
	return len(o.attempts)
}
