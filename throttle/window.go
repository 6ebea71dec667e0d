package throttle

import (
	"slices"
	"time"
)

// window counts the sends of one [Limit]: at most Count slots, each the
// time a send was counted. A slot still in flight (its answer not back) is
// counted as if sent at the end of its hold (granted + MaxHold) until its
// [Permit] finishes and gives the real time; see the package doc
// ("Counting").
type window struct {
	lim   Limit
	slots []*slot
	// smooth spaces grants Per/Count apart on average (the bot-wide
	// limits: a burst of 30 in one instant is not "30 per second" to
	// Telegram, and a quiet chat's reply then never waits a whole window).
	// It is a GCRA with a tolerance of one interval: a grant is due at
	// next - interval, and next advances one interval per grant from
	// where it was, so a timer that fires late does not slow the rate.
	smooth bool
	next   time.Time // with smooth: the theoretical time of the next grant
}

// slot is one counted send.
type slot struct {
	t    time.Time // granted (in flight) or answered (done)
	done bool
}

func newWindow(l Limit) window { return window{lim: l} }

func (w *window) off() bool { return w.lim.Count < 0 }

// expiry is when s stops counting.
func (w *window) expiry(s *slot, hold time.Duration) time.Time {
	if s.done {
		return s.t.Add(w.lim.Per)
	}
	return s.t.Add(hold + w.lim.Per)
}

// prune drops the slots that no longer count at now.
func (w *window) prune(now time.Time, hold time.Duration) {
	kept := w.slots[:0]
	for _, s := range w.slots {
		if w.expiry(s, hold).After(now) {
			kept = append(kept, s)
		}
	}
	clear(w.slots[len(kept):])
	w.slots = kept
}

// full reports whether one more send would exceed the limit at now.
func (w *window) full(now time.Time, hold time.Duration) bool {
	if w.off() {
		return false
	}
	if w.smooth && w.due().After(now) {
		return true
	}
	w.prune(now, hold)
	return len(w.slots) >= w.lim.Count
}

// nextFree is when the window may have room again; call it only when full
// reported true.
func (w *window) nextFree(now time.Time, hold time.Duration) time.Time {
	if w.smooth && w.due().After(now) && len(w.slots) < w.lim.Count {
		return w.due()
	}
	var t time.Time
	for i, s := range w.slots {
		if e := w.expiry(s, hold); i == 0 || e.Before(t) {
			t = e
		}
	}
	if w.smooth && w.due().After(t) {
		t = w.due()
	}
	return t
}

// take counts a send granted at now; nil when the limit is off.
func (w *window) take(now time.Time) *slot {
	if w.off() {
		return nil
	}
	if w.smooth {
		w.next = later(w.next, now).Add(w.lim.interval())
	}
	s := &slot{t: now}
	w.slots = append(w.slots, s)
	return s
}

// remove uncounts s (Telegram did not count a send it refused, or it was
// never sent); the spacing it imposed is undone when nothing came since.
func (w *window) remove(s *slot) {
	if w.smooth && !s.done {
		w.next = w.next.Add(-w.lim.interval())
	}
	for i, x := range w.slots {
		if x == s {
			copy(w.slots[i:], w.slots[i+1:])
			w.slots[len(w.slots)-1] = nil
			w.slots = w.slots[:len(w.slots)-1]
			return
		}
	}
}

// earliest is a lower bound of when one more send could be counted: it
// takes only the sends answered already (done), since a send in flight may
// still be uncounted (a 429, a send that never left) and free its slot.
// now when the limit is off or has room.
func (w *window) earliest(now time.Time) time.Time {
	if w.off() {
		return now
	}
	var done []time.Time
	for _, s := range w.slots {
		if s.done && s.t.Add(w.lim.Per).After(now) {
			done = append(done, s.t)
		}
	}
	if len(done) < w.lim.Count {
		return now
	}
	slices.SortFunc(done, time.Time.Compare)
	return later(now, done[len(done)-w.lim.Count].Add(w.lim.Per))
}

// empty reports whether nothing counts at now.
func (w *window) empty(now time.Time, hold time.Duration) bool {
	w.prune(now, hold)
	return len(w.slots) == 0
}

// due is when the next grant may go under smooth spacing.
func (w *window) due() time.Time { return w.next.Add(-w.lim.interval()) }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
