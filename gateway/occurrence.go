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
// until the attempt is reported over (forget), and at most max attempts,
// least recently used forgotten first.
type occurrences struct {
	mu       sync.Mutex
	max      int
	attempts map[intake.Identity]*list.Element
	lru      *list.List // of *attemptCalls, most recent at the front
}

type attemptCalls struct {
	id   intake.Identity
	last map[callKey]int
	// finals holds the sorted hashes of the update's calls with a final
	// outcome, listed once for an attempt after the first (ahead.go).
	finals []uint64
	listed bool
}

type callKey struct{ method, hash string }

func newOccurrences(max int) *occurrences {
	return &occurrences{max: max, attempts: make(map[intake.Identity]*list.Element), lru: list.New()}
}

// take returns the next occurrence number of the call in attempt id.
func (o *occurrences) take(id intake.Identity, method, hash string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.attemptLocked(id)
	k := callKey{method, hash}
	a.last[k]++
	return a.last[k]
}

// attemptLocked returns the counters of attempt id, made the most recently
// used, after forgetting the least recently used beyond max.
func (o *occurrences) attemptLocked(id intake.Identity) *attemptCalls {
	if el, ok := o.attempts[id]; ok {
		o.lru.MoveToFront(el)
		return el.Value.(*attemptCalls)
	}
	a := &attemptCalls{id: id, last: make(map[callKey]int)}
	o.attempts[id] = o.lru.PushFront(a)
	for o.lru.Len() > o.max {
		oldest := o.lru.Back()
		o.lru.Remove(oldest)
		delete(o.attempts, oldest.Value.(*attemptCalls).id)
	}
	return a
}

// forget drops the counters of attempt id, which is over: no call of it
// needs a number any more.
func (o *occurrences) forget(id intake.Identity) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if el, ok := o.attempts[id]; ok {
		o.lru.Remove(el)
		delete(o.attempts, id)
	}
}

// finals returns the hashes of the calls with a final outcome that the
// journal listed when attempt id first asked (see ahead.go), and whether
// it was listed.
func (o *occurrences) finals(id intake.Identity) (keys []uint64, ok bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if el, found := o.attempts[id]; found {
		a := el.Value.(*attemptCalls)
		return a.finals, a.listed
	}
	return nil, false
}

// setFinals keeps keys as attempt id's listing of calls with a final
// outcome, sorted.
func (o *occurrences) setFinals(id intake.Identity, keys []uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a := o.attemptLocked(id)
	a.finals, a.listed = keys, true
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

// AttemptEnded tells g that attempt id is over: settled, failed, expired,
// exhausted, or its lease lost. Its occurrence counters are dropped now,
// rather than once Config.MaxAttempts later attempts have pushed them out,
// so the counters held follow the attempts still running instead of
// filling up to the bound (about 700 bytes each: 7 MiB of heap at the
// default bound). A call of id that arrives later counts from 1 again, as
// after a restart (see the package doc): at worst a deliberate repeat is
// replayed rather than sent, never sent twice; and the store refuses new
// intents of an attempt that no longer holds its claim. Without these
// reports the bound alone applies. An unknown id is ignored. Safe for
// concurrent use.
func (g *Gateway) AttemptEnded(id intake.Identity) { g.occ.forget(id) }
