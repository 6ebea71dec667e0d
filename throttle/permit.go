package throttle

import (
	"context"
	"time"
)

// Permit is one granted call, held until the caller finishes it with
// exactly one of [Permit.Done], [Permit.Cancel], [Permit.Limited], or
// [Permit.Retry] (which, when it succeeds, holds the permit again). While
// it is held, the chat's next call waits (order within a chat), and the
// call counts against the limits until it is finished (see the package
// doc, "Counting"). Finishing a finished permit, or a nil one, does
// nothing. A Permit is
// safe for concurrent use, but it is meant for the one call that got it.
type Permit struct {
	l        *Limiter // nil for a call that does not count
	ln       *lane
	method   string
	chatID   int64
	paid     bool
	start    time.Time
	deadline time.Time
	granted  time.Time
	held     []heldSlot
	finished bool
}

type heldSlot struct {
	w *window
	s *slot
}

// Method returns the Bot API method the permit was granted for.
func (p *Permit) Method() string { return p.method }

// ChatID returns the chat key the permit was granted for.
func (p *Permit) ChatID() int64 { return p.chatID }

// Deadline returns when the call's MaxWait ends (zero for a call that
// does not count): a [Permit.Retry] must be granted before it.
func (p *Permit) Deadline() time.Time { return p.deadline }

// Done finishes the permit of a call that was sent and answered, or whose
// outcome is unknown: it counts as sent now, the latest moment Telegram
// can have counted it.
func (p *Permit) Done() {
	if p == nil || p.l == nil {
		return
	}
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.finished {
		return
	}
	now := l.clock.Now()
	l.finishLocked(p, now, true)
	l.dispatchLocked(now)
}

// doneAt is Done with the time the answer began to arrive (the transport
// learns it from the connection, before its goroutine runs again); a zero
// or future t means now.
func (p *Permit) doneAt(t time.Time) {
	if p == nil || p.l == nil {
		return
	}
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.finished {
		return
	}
	now := l.clock.Now()
	if t.IsZero() || t.After(now) || t.Before(p.granted) {
		t = now
	}
	l.finishLocked(p, t, true)
	l.dispatchLocked(now)
}

// Cancel finishes the permit of a call that was never sent (its context
// ended, or its request provably never left the process): it does not
// count.
func (p *Permit) Cancel() {
	if p == nil || p.l == nil {
		return
	}
	l := p.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if p.finished {
		return
	}
	l.finishLocked(p, time.Time{}, false)
	l.dispatchLocked(l.clock.Now())
}

// Limited finishes the permit of a call Telegram refused with 429 and
// retry_after d, without retrying it: the call does not count (Telegram
// did not act), and the limiter pauses its chat, or the whole bot, for d
// (see the package doc, "429"). It returns what was paused.
func (p *Permit) Limited(d time.Duration) Scope {
	if p == nil || p.l == nil {
		return ""
	}
	l := p.l
	l.mu.Lock()
	if p.finished {
		l.mu.Unlock()
		return ""
	}
	now := l.clock.Now()
	l.finishLocked(p, time.Time{}, false)
	scope := l.limitedLocked(p.ln, max(d, 0), now)
	l.dispatchLocked(now)
	l.mu.Unlock()
	l.observe(Event{Kind: EventTooManyRequests, Method: p.method, ChatID: p.chatID, RetryAfter: d, Scope: scope})
	return scope
}

// Retry records Telegram's 429 with retry_after d like [Permit.Limited],
// then waits for the call's next turn, ahead of every later call to its
// chat, within the call's original MaxWait. On success the permit is held
// again, to be finished as before; on failure (a [*WaitError], or ctx's
// error) it is finished and nothing counts.
func (p *Permit) Retry(ctx context.Context, d time.Duration) error {
	if p == nil || p.l == nil {
		return nil
	}
	l := p.l
	l.mu.Lock()
	now := l.clock.Now()
	l.finishLocked(p, time.Time{}, false) // nothing if MaxHold already finished it
	scope := l.limitedLocked(p.ln, max(d, 0), now)
	l.mu.Unlock()
	l.observe(Event{Kind: EventTooManyRequests, Method: p.method, ChatID: p.chatID, RetryAfter: d, Scope: scope})
	w := &waiter{method: p.method, paid: p.paid, start: p.start, deadline: p.deadline, permit: p}
	_, err := l.enqueue(ctx, w, p.chatID, true)
	return err
}

// finishLocked ends p's hold: counted as sent at t when sent is true,
// uncounted otherwise.
func (l *Limiter) finishLocked(p *Permit, t time.Time, sent bool) {
	if p.finished {
		return
	}
	p.finished = true
	for _, h := range p.held {
		if sent {
			if !h.s.done {
				h.s.t, h.s.done = t, true
			}
		} else {
			h.w.remove(h.s)
		}
	}
	p.held = nil
	if p.ln != nil && p.ln.holder == p {
		p.ln.holder = nil
	}
}
