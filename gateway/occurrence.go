package gateway

import (
	"container/list"
	"sync"

	"github.com/tgrelay/tgrelay/intake"
)

// occurrences numbers identical calls (same method and parameters hash)
// within one attempt: the first is 1, the next 2, and so on. A call that
// ends not dispatched gives its number back when no later identical call
// took one meanwhile, so an app that repeats a call that never left does
// not shift the numbers of a later attempt. The counters live in memory,
// at most max attempts, least recently used forgotten first.
type occurrences struct {
	mu       sync.Mutex
	max      int
	attempts map[intake.Identity]*list.Element
	lru      *list.List // of *attemptCalls, most recent at the front
}

type attemptCalls struct {
	id   intake.Identity
	last map[callKey]int
}

type callKey struct{ method, hash string }

func newOccurrences(max int) *occurrences {
	return &occurrences{max: max, attempts: make(map[intake.Identity]*list.Element), lru: list.New()}
}

// take returns the next occurrence number of the call in attempt id.
func (o *occurrences) take(id intake.Identity, method, hash string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	el, ok := o.attempts[id]
	if !ok {
		el = o.lru.PushFront(&attemptCalls{id: id, last: make(map[callKey]int)})
		o.attempts[id] = el
		for o.lru.Len() > o.max {
			oldest := o.lru.Back()
			o.lru.Remove(oldest)
			delete(o.attempts, oldest.Value.(*attemptCalls).id)
		}
	} else {
		o.lru.MoveToFront(el)
	}
	a := el.Value.(*attemptCalls)
	k := callKey{method, hash}
	a.last[k]++
	return a.last[k]
}

// giveBack returns occurrence n of the call, if it is still the last one
// taken.
func (o *occurrences) giveBack(id intake.Identity, method, hash string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	el, ok := o.attempts[id]
	if !ok {
		return
	}
	a := el.Value.(*attemptCalls)
	if k := (callKey{method, hash}); a.last[k] == n {
		a.last[k] = n - 1
	}
}
