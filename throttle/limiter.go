package throttle

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Limiter keeps one bot's counted calls within Telegram's limits: it
// grants each call its turn (see [Limiter.Wait]), fairly across chats and
// in order within a chat, and pauses what a 429 from Telegram says to
// pause. Build it with [New]; one Limiter per bot token, shared by every
// sender of the process. It is safe for concurrent use and needs no
// Close: it runs a timer only while calls wait.
type Limiter struct {
	cfg   Config
	clock Clock

	mu       sync.Mutex
	bot      window // the bot-wide limit (Config.Bot)
	paid     window // the paid-broadcast limit (Config.Paid)
	botPause time.Time
	lanes    map[int64]*lane
	active   []*lane // lanes with waiting calls
	queued   int
	seq      uint64
	timer    Timer
	timerAt  time.Time
	timerGen uint64
	sweepAt  int // len(lanes) at which idle lanes are next dropped
	// limited is the last chat a 429 paused alone, until when.
	limitedChat  int64
	limitedUntil time.Time
}

// lane is one chat's queue and counts. Lane 0 holds the counted calls
// that name no chat; it has no per-chat limit and no order to keep.
type lane struct {
	id         int64
	chat       window
	group      window
	pauseUntil time.Time
	queue      []*waiter
	holder     *Permit   // the chat's call in flight, if any
	lastGrant  time.Time // zero when none is remembered
	active     bool
}

// waiter is one call waiting for its turn.
type waiter struct {
	method   string
	paid     bool
	seq      uint64
	enq      time.Time // when it joined the queue
	start    time.Time // when the call first asked (its wait is measured from it)
	deadline time.Time // start + MaxWait
	ready    chan struct{}
	permit   *Permit // set (and ready closed) when granted; reused by a retry
}

// New returns a Limiter configured by a copy of cfg, or a *[ConfigError]
// naming the first invalid field.
func New(cfg Config) (*Limiter, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Limiter{
		cfg:     c,
		clock:   c.Clock,
		bot:     newWindow(c.Bot),
		paid:    newWindow(c.Paid),
		lanes:   map[int64]*lane{},
		sweepAt: 64,
	}
	l.bot.smooth, l.paid.smooth = true, true
	return l, nil
}

// Config returns the limiter's configuration with the defaults filled in.
func (l *Limiter) Config() Config { return l.cfg }

// Wait blocks until a call of method to chatID may be sent, and returns a
// [Permit] that the caller must finish once Telegram answered
// ([Permit.Done]), refused with 429 ([Permit.Retry] or [Permit.Limited]),
// or the call was not sent after all ([Permit.Cancel]).
//
// chatID is the chat_id of the call: negative for groups, supergroups
// and channels (which also count against Config.Group), 0 when the call
// names no chat (it then waits for the bot-wide limit only). Use
// [UsernameKey] for an "@channelusername". A method that does not count
// (see [Counts]) returns a Permit at once that needs no finishing.
//
// Calls to one chat are granted in the order they asked, one at a time (a
// chat's next call waits until the previous one is finished), so the order
// of sends to a chat is kept. Across chats the limiter serves the chat
// whose last grant is the oldest, so a chat that floods does not delay a
// quiet chat beyond that chat's own limit.
//
// Wait fails with a [*WaitError] when the call cannot be granted within
// Config.MaxWait (at once when a 429 pause already outlasts it, or when
// Config.MaxQueue calls wait), and with the context's error when ctx ends
// first. Nothing is counted for a call that fails.
func (l *Limiter) Wait(ctx context.Context, method string, chatID int64) (*Permit, error) {
	return l.wait(ctx, method, chatID, false)
}

// WaitPaid is [Limiter.Wait] for a call made with allow_paid_broadcast:
// it counts against Config.Paid instead of Config.Bot (the per-chat and
// per-group limits still apply).
func (l *Limiter) WaitPaid(ctx context.Context, method string, chatID int64) (*Permit, error) {
	return l.wait(ctx, method, chatID, true)
}

func (l *Limiter) wait(ctx context.Context, method string, chatID int64, paid bool) (*Permit, error) {
	if !Counts(method) {
		return &Permit{method: method, chatID: chatID, finished: true}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("throttle: waiting to send %s: %w", method, context.Cause(ctx))
	}
	now := l.clock.Now()
	w := &waiter{method: method, paid: paid, start: now, deadline: now.Add(l.cfg.MaxWait)}
	if d, ok := ctx.Value(waitDeadlineKey{}).(time.Time); ok && d.Before(w.deadline) {
		w.deadline = d
	}
	return l.enqueue(ctx, w, chatID, false)
}

// enqueue queues w in chatID's lane (at the front for a retry) and waits
// for its grant, its deadline or the end of ctx.
func (l *Limiter) enqueue(ctx context.Context, w *waiter, chatID int64, front bool) (*Permit, error) {
	w.ready = make(chan struct{})
	l.mu.Lock()
	now := l.clock.Now()
	ln := l.laneLocked(chatID, now)
	if werr := l.refuseAtOnceLocked(ln, w, now, front); werr != nil {
		l.mu.Unlock()
		l.observe(Event{Kind: EventRefused, Method: w.method, ChatID: chatID, RetryAfter: werr.RetryAfter, Reason: werr.Reason})
		return nil, werr
	}
	l.seq++
	w.seq, w.enq = l.seq, now
	if front {
		ln.queue = append([]*waiter{w}, ln.queue...)
	} else {
		ln.queue = append(ln.queue, w)
	}
	l.queued++
	if !ln.active {
		ln.active = true
		l.active = append(l.active, ln)
	}
	l.dispatchLocked(now)
	l.mu.Unlock()

	select {
	case <-w.ready:
		return l.granted(w), nil
	default:
	}
	expired := make(chan struct{})
	t := l.clock.AfterFunc(w.deadline.Sub(now), func() { close(expired) })
	defer t.Stop()
	select {
	case <-w.ready:
		return l.granted(w), nil
	case <-ctx.Done():
		l.mu.Lock()
		if l.isGranted(w) {
			l.mu.Unlock()
			w.permit.Cancel()
			return nil, fmt.Errorf("throttle: waiting to send %s: %w", w.method, context.Cause(ctx))
		}
		l.removeLocked(ln, w)
		l.dispatchLocked(l.clock.Now())
		l.mu.Unlock()
		return nil, fmt.Errorf("throttle: waiting to send %s: %w", w.method, context.Cause(ctx))
	case <-expired:
		l.mu.Lock()
		// The deadline is the latest moment w may be granted: a turn due
		// at that very moment (a pause or a window ending then) is granted
		// now, not left to whichever of this timer and the limiter's own
		// wake-up happens to run first.
		now := l.clock.Now()
		l.dispatchLocked(now)
		if l.isGranted(w) {
			l.mu.Unlock()
			return l.granted(w), nil
		}
		est := l.estimateLocked(ln, w, now)
		l.removeLocked(ln, w)
		l.dispatchLocked(now)
		l.mu.Unlock()
		werr := &WaitError{Method: w.method, ChatID: chatID, Reason: ReasonMaxWait, RetryAfter: retryAfterSeconds(est)}
		l.observe(Event{Kind: EventRefused, Method: w.method, ChatID: chatID, RetryAfter: werr.RetryAfter, Reason: werr.Reason})
		return nil, werr
	}
}

type waitDeadlineKey struct{}

// WithWaitDeadline returns ctx carrying t, the latest moment a call made
// with it may be granted its turn, when that is sooner than its
// Config.MaxWait: [Limiter.Wait] (and [Transport], 429 retries included)
// refuses the call with a [*WaitError] and its retry_after when it cannot
// be granted by t, at once when its limits show that already, as it does
// at MaxWait. Unlike a context deadline, which ends the wait with the
// context's error, it gets the call the Telegram-shaped 429 its caller
// can act on. A caller with its own bound on the whole call (the gateway:
// the wait, then Telegram's answer) sets it to leave room for the answer.
func WithWaitDeadline(ctx context.Context, t time.Time) context.Context {
	return context.WithValue(ctx, waitDeadlineKey{}, t)
}

// isGranted reports whether w got its permit; l.mu must be held.
func (l *Limiter) isGranted(w *waiter) bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

// granted reports the grant of w and returns its permit.
func (l *Limiter) granted(w *waiter) *Permit {
	p := w.permit
	l.observe(Event{Kind: EventGranted, Method: w.method, ChatID: p.chatID, Wait: p.granted.Sub(w.start)})
	return p
}

// refuseAtOnceLocked returns the refusal of a call that waiting cannot
// help: its chat or the bot is paused beyond its deadline, its chat's or
// group's limit cannot have room before its deadline (by the sends
// answered already, see [window.earliest]: a lower bound, so a call that
// waiting could have let through is never refused), or the queue is full
// (a retry, already counted in the bound once, is let in).
func (l *Limiter) refuseAtOnceLocked(ln *lane, w *waiter, now time.Time, retry bool) *WaitError {
	pause := ln.pauseUntil
	if l.botPause.After(pause) {
		pause = l.botPause
	}
	if pause.After(w.deadline) {
		return &WaitError{Method: w.method, ChatID: ln.id, Reason: ReasonPaused, RetryAfter: retryAfterSeconds(pause.Sub(now))}
	}
	if at := later(ln.chat.earliest(now), ln.group.earliest(now)); at.After(w.deadline) {
		return &WaitError{Method: w.method, ChatID: ln.id, Reason: ReasonMaxWait, RetryAfter: retryAfterSeconds(at.Sub(now))}
	}
	if !retry && l.queued >= l.cfg.MaxQueue {
		return &WaitError{Method: w.method, ChatID: ln.id, Reason: ReasonQueueFull, RetryAfter: retryAfterSeconds(l.estimateLocked(ln, w, now))}
	}
	return nil
}

// laneLocked returns chatID's lane, creating it (and now and then dropping
// idle lanes, so the map stays bounded by the chats sent to recently).
func (l *Limiter) laneLocked(chatID int64, now time.Time) *lane {
	if ln := l.lanes[chatID]; ln != nil {
		return ln
	}
	if len(l.lanes) >= l.sweepAt {
		for id, ln := range l.lanes {
			if l.idleLocked(ln, now) {
				delete(l.lanes, id)
			}
		}
		l.sweepAt = 2*len(l.lanes) + 64
	}
	ln := &lane{id: chatID, chat: newWindow(l.cfg.Chat), group: newWindow(Limit{Count: -1})}
	if chatID == 0 {
		ln.chat = newWindow(Limit{Count: -1})
	}
	if chatID < 0 {
		ln.group = newWindow(l.cfg.Group)
	}
	l.lanes[chatID] = ln
	return ln
}

// idleLocked reports whether ln holds nothing worth keeping: no waiting or
// held call, no pause, nothing counted in its windows.
func (l *Limiter) idleLocked(ln *lane, now time.Time) bool {
	return !ln.active && ln.holder == nil && !ln.pauseUntil.After(now) &&
		ln.chat.empty(now, l.cfg.MaxHold) && ln.group.empty(now, l.cfg.MaxHold)
}

// removeLocked takes a waiter that gave up out of its lane.
func (l *Limiter) removeLocked(ln *lane, w *waiter) {
	for i, x := range ln.queue {
		if x == w {
			copy(ln.queue[i:], ln.queue[i+1:])
			ln.queue[len(ln.queue)-1] = nil
			ln.queue = ln.queue[:len(ln.queue)-1]
			l.queued--
			break
		}
	}
	if len(ln.queue) == 0 {
		l.deactivateLocked(ln)
	}
}

func (l *Limiter) deactivateLocked(ln *lane) {
	if !ln.active {
		return
	}
	ln.active = false
	for i, x := range l.active {
		if x == ln {
			l.active[i] = l.active[len(l.active)-1]
			l.active[len(l.active)-1] = nil
			l.active = l.active[:len(l.active)-1]
			return
		}
	}
}

// bucket is the bot-wide window a waiter counts against.
func (l *Limiter) bucket(w *waiter) *window {
	if w.paid {
		return &l.paid
	}
	return &l.bot
}

// readyAtLocked is when ln's first waiter may go (at or before now: it may
// go now). A held call that outlived MaxHold is counted as sent then.
func (l *Limiter) readyAtLocked(ln *lane, now time.Time, b buckets) time.Time {
	if h := ln.holder; h != nil {
		end := h.granted.Add(l.cfg.MaxHold)
		if now.Before(end) {
			return end // or sooner, when the holder finishes
		}
		l.finishLocked(h, end, true)
	}
	hold := l.cfg.MaxHold
	t := now
	later := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	later(ln.pauseUntil)
	later(l.botPause)
	for _, w := range []*window{&ln.chat, &ln.group} {
		if w.full(now, hold) {
			later(w.nextFree(now, hold))
		}
	}
	if ln.queue[0].paid {
		later(b.paid)
	} else {
		later(b.bot)
	}
	return t
}

// buckets is when the bot-wide windows have room (at or before now: now),
// computed once per grant rather than once per waiting chat.
type buckets struct{ bot, paid time.Time }

func (l *Limiter) bucketsLocked(now time.Time) buckets {
	at := func(w *window) time.Time {
		if w.full(now, l.cfg.MaxHold) {
			return w.nextFree(now, l.cfg.MaxHold)
		}
		return now
	}
	return buckets{bot: at(&l.bot), paid: at(&l.paid)}
}

// dispatchLocked grants every call that may go now, the chat whose last
// grant is the oldest first, and sets the timer for the next one.
func (l *Limiter) dispatchLocked(now time.Time) {
	for l.queued > 0 {
		var best *lane
		var bestKey time.Time
		var next time.Time
		b := l.bucketsLocked(now)
		for _, ln := range l.active {
			at := l.readyAtLocked(ln, now, b)
			if at.After(now) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				continue
			}
			key := l.keyLocked(ln)
			if best == nil || key.Before(bestKey) || (key.Equal(bestKey) && ln.queue[0].seq < best.queue[0].seq) {
				best, bestKey = ln, key
			}
		}
		if best == nil {
			l.armLocked(now, next)
			return
		}
		l.grantLocked(best, now)
	}
	l.armLocked(now, time.Time{})
}

// keyLocked orders the chats that may go: the one whose last grant is the
// oldest goes first. A chat with no remembered grant counts as granted one
// chat interval (Config.Chat's Per / Count) before its first waiter
// joined: ahead of the chats served since, behind the ones waiting longer.
func (l *Limiter) keyLocked(ln *lane) time.Time {
	if !ln.lastGrant.IsZero() {
		return ln.lastGrant
	}
	return ln.queue[0].enq.Add(-l.cfg.Chat.interval())
}

// grantLocked gives ln's first waiter its turn.
func (l *Limiter) grantLocked(ln *lane, now time.Time) {
	w := ln.queue[0]
	copy(ln.queue, ln.queue[1:])
	ln.queue[len(ln.queue)-1] = nil
	ln.queue = ln.queue[:len(ln.queue)-1]
	l.queued--
	if len(ln.queue) == 0 {
		l.deactivateLocked(ln)
	}
	p := w.permit
	if p == nil {
		p = &Permit{l: l, method: w.method, chatID: ln.id, paid: w.paid, start: w.start, deadline: w.deadline}
		w.permit = p
	}
	p.ln, p.granted, p.held, p.finished = ln, now, nil, false
	for _, win := range []*window{l.bucket(w), &ln.chat, &ln.group} {
		if s := win.take(now); s != nil {
			p.held = append(p.held, heldSlot{win, s})
		}
	}
	if ln.id != 0 {
		ln.holder = p
	}
	ln.lastGrant = now
	close(w.ready)
}

// armLocked sets the timer for at, or stops it when at is zero.
func (l *Limiter) armLocked(now, at time.Time) {
	if l.timer != nil && l.timerAt.Equal(at) {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if at.IsZero() {
		return
	}
	l.timerGen++
	gen := l.timerGen
	l.timerAt = at
	l.timer = l.clock.AfterFunc(at.Sub(now), func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if gen == l.timerGen {
			l.timer = nil
		}
		l.dispatchLocked(l.clock.Now())
	})
}

// estimateLocked guesses how long until w could go: its chat's pause and
// limits, plus one chat interval for every call ahead of it in the chat.
func (l *Limiter) estimateLocked(ln *lane, w *waiter, now time.Time) time.Duration {
	hold := l.cfg.MaxHold
	t := now
	later := func(u time.Time) {
		if u.After(t) {
			t = u
		}
	}
	later(ln.pauseUntil)
	later(l.botPause)
	for _, win := range []*window{&ln.chat, &ln.group, l.bucket(w)} {
		if win.full(now, hold) {
			later(win.nextFree(now, hold))
		}
	}
	ahead := len(ln.queue)
	for i, x := range ln.queue {
		if x == w {
			ahead = i
			break
		}
	}
	iv := max(ln.chat.lim.interval(), ln.group.lim.interval())
	return t.Sub(now) + time.Duration(ahead)*iv
}

// limitedLocked records a 429 from Telegram with retry_after d for a call
// to ln, and returns what it paused (see the package doc, "429").
func (l *Limiter) limitedLocked(ln *lane, d time.Duration, now time.Time) Scope {
	until := now.Add(d)
	scope := ScopeChat
	if ln.id == 0 || (l.limitedChat != 0 && l.limitedChat != ln.id && now.Before(l.limitedUntil)) {
		scope = ScopeBot
	}
	if until.After(ln.pauseUntil) {
		ln.pauseUntil = until
	}
	if scope == ScopeBot {
		if until.After(l.botPause) {
			l.botPause = until
		}
	} else {
		l.limitedChat, l.limitedUntil = ln.id, until
	}
	return scope
}

func (l *Limiter) observe(e Event) {
	if f := l.cfg.Observer.EventFunc; f != nil {
		f(e)
	}
}

// Stats is a snapshot of a [Limiter].
type Stats struct {
	Waiting int // calls waiting for their turn
	Chats   int // chats with a waiting call
	Held    int // chats with a call in flight
}

// Stats returns a snapshot of the limiter's queues.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Stats{Waiting: l.queued, Chats: len(l.active)}
	for _, ln := range l.lanes {
		if ln.holder != nil {
			s.Held++
		}
	}
	return s
}
