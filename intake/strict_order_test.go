package intake_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// span is when one update's handler ran, on the bubble's clock.
type span struct {
	id         int64
	start, end time.Duration
}

// spans records handler runs from several runners.
type spans struct {
	mu  sync.Mutex
	t0  time.Time
	all []span
}

func (s *spans) run(id int64, work time.Duration) {
	s.mu.Lock()
	i := len(s.all)
	s.all = append(s.all, span{id: id, start: time.Since(s.t0)})
	s.mu.Unlock()
	time.Sleep(work)
	s.mu.Lock()
	s.all[i].end = time.Since(s.t0)
	s.mu.Unlock()
}

// overlapsAndOvertakes counts, over the spans of ids (one chat's, in id
// order), the runs that started before the previous id's run ended, and
// the ids whose first run started after a later id's first run.
func (s *spans) overlapsAndOvertakes(ids []int64) (overlaps, overtakes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := map[int64]span{}
	for _, sp := range s.all {
		if _, ok := first[sp.id]; !ok {
			first[sp.id] = sp
		}
	}
	for i := 1; i < len(ids); i++ {
		prev, cur := first[ids[i-1]], first[ids[i]]
		if cur.start < prev.end {
			overlaps++
		}
		if cur.start < prev.start {
			overtakes++
		}
	}
	return overlaps, overtakes
}

// twoRunners accepts chat 1's updates 1-6 alternately on two runners
// sharing one store (two processes), each handled for 100ms, and returns
// the spans and when the last run ended.
func twoRunners(t *testing.T, order intake.ChatOrder) (*spans, time.Duration) {
	store := memstore.New()
	rec := &spans{t0: time.Now()}
	var runners []*intake.Runner
	for range 2 {
		r := newRunner(t, intake.Config{
			Store:     store,
			ChatOrder: order,
			Handler: func(_ context.Context, u intake.Update) error {
				rec.run(u.ID, 100*time.Millisecond)
				return nil
			},
		})
		start(t, r)
		runners = append(runners, r)
	}
	for id := int64(1); id <= 6; id++ {
		mustAccept(t, runners[id%2], msg(id, 1), intake.Accepted)
	}
	time.Sleep(5 * time.Second) // far below the sweep interval (30s) and the pending grace (60s)
	synctest.Wait()
	var last time.Duration
	for id := int64(1); id <= 6; id++ {
		if got := row(t, store, id); got.State != intake.StateCompleted {
			t.Errorf("update %d is %s after 5s; want completed", id, got.State)
		}
	}
	for _, sp := range rec.all {
		last = max(last, sp.end)
	}
	return rec, last
}

// With strict chat order, updates of one chat accepted by two runners run
// one at a time in update id order, and each runs as soon as the previous
// one settled (its runner hands the chat on), not at the next sweep.
// Without it, the two runners overlap and overtake each other.
func TestStrictChatOrderAcrossRunners(t *testing.T) {
	ids := []int64{1, 2, 3, 4, 5, 6}
	synctest.Test(t, func(t *testing.T) {
		rec, last := twoRunners(t, intake.ChatOrderStrict)
		if o, v := rec.overlapsAndOvertakes(ids); o != 0 || v != 0 {
			t.Errorf("strict: %d runs started before the previous update of the chat ended, %d overtook it; want 0 and 0 (%v)", o, v, rec.all)
		}
		if len(rec.all) != 6 {
			t.Errorf("strict: %d runs, want 6 (%v)", len(rec.all), rec.all)
		}
		if last != 600*time.Millisecond {
			t.Errorf("strict: the chat's six 100ms updates ended at %v; want 600ms (each handed on at once)", last)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		rec, _ := twoRunners(t, intake.ChatOrderProcess)
		if o, _ := rec.overlapsAndOvertakes(ids); o == 0 {
			t.Errorf("process order: no run overlapped its predecessor on the other runner (%v); the strict test shows nothing", rec.all)
		}
	})
}

// A poisoned update holds its chat, in strict order, until it is
// exhausted: the chat's next update, accepted by another runner, runs only
// after the last attempt, and at once then.
func TestStrictChatOrderPoisonHoldsUntilExhausted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		rec := &spans{t0: time.Now()}
		var runners []*intake.Runner
		for range 2 {
			runners = append(runners, newRunner(t, intake.Config{
				Store:           store,
				ChatOrder:       intake.ChatOrderStrict,
				KeepExhaustions: true,
				MaxAttempts:     3,
				RetryFunc:       func(error, int) (time.Duration, bool) { return time.Second, true },
				Handler: func(_ context.Context, u intake.Update) error {
					rec.run(u.ID, 0)
					if u.ID == 1 {
						return errors.New("poison")
					}
					return nil
				},
			}))
			start(t, runners[len(runners)-1])
		}
		mustAccept(t, runners[0], msg(1, 1), intake.Accepted)
		mustAccept(t, runners[1], msg(2, 1), intake.Accepted)
		mustAccept(t, runners[1], msg(3, 2), intake.Accepted) // another chat: not held
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := "0s:1 0s:3 1s:1 2s:1 2s:2"
		if strings.Join(sortedByStart(rec.all), " ") != want {
			t.Errorf("runs %v; want %s (update 2 after update 1's third and last attempt)", sortedByStart(rec.all), want)
		}
		if r := row(t, store, 1); !r.Unacknowledged() {
			t.Errorf("update 1 is %s; want an unacknowledged exhaustion", r.State)
		}
		if r := row(t, store, 2); r.State != intake.StateCompleted {
			t.Errorf("update 2 is %s; want completed", r.State)
		}
	})
}

// sortedByStart names the spans "start:id" in start order, ties by id.
func sortedByStart(all []span) []string {
	s := slices.Clone(all)
	slices.SortFunc(s, func(a, b span) int {
		return cmp.Or(cmp.Compare(a.start, b.start), cmp.Compare(a.id, b.id))
	})
	out := make([]string, len(s))
	for i, sp := range s {
		out[i] = sp.start.String() + ":" + strconv.FormatInt(sp.id, 10)
	}
	return out
}
