package intake

import (
	"context"
	"fmt"
	"strings"
	"time"

	"golang.org/x/sync/semaphore"
)

// The update types that Telegram waits on for an answer, as they are named
// by the update's payload field (see [Update.Kind]).
const (
	KindCallbackQuery    = "callback_query"
	KindInlineQuery      = "inline_query"
	KindPreCheckoutQuery = "pre_checkout_query"
	KindShippingQuery    = "shipping_query"
)

// Telegram's answer deadlines, the defaults of [Deadlines]. A deadline
// counts from the update's arrival ([Incoming.ReceivedAt]).
const (
	// DefaultCallbackQueryDeadline: a button's spinner stops after about
	// 15 s, and a later answerCallbackQuery fails with "query is too old
	// and response timeout expired or query ID is invalid".
	DefaultCallbackQueryDeadline = 15 * time.Second
	// DefaultInlineQueryDeadline: a stale inline query's
	// answerInlineQuery fails the same way; the user has typed on by
	// then.
	DefaultInlineQueryDeadline = 10 * time.Second
	// DefaultPreCheckoutQueryDeadline: the Bot API must receive
	// answerPreCheckoutQuery within 10 seconds or the payment fails.
	DefaultPreCheckoutQueryDeadline = 10 * time.Second
	// DefaultShippingQueryDeadline: Telegram documents no figure for
	// answerShippingQuery; it is taken to be the pre-checkout query's.
	DefaultShippingQueryDeadline = 10 * time.Second
	// DefaultDeadlineMargin is how long before an update's deadline
	// [Deadlines.LateFunc] is called: time for a decline to reach
	// Telegram.
	DefaultDeadlineMargin = 2 * time.Second
	// DefaultDeadlineConcurrent is how many handler slots are kept for
	// updates with a deadline, beside [Config.MaxConcurrent].
	DefaultDeadlineConcurrent = 8
	// MaxDeadline bounds every deadline of [Deadlines].
	MaxDeadline = time.Hour
)

// ExpiredText opens the error text of a row that ended expired: an update
// with a deadline that passed before it was handled. Such a row is
// abandoned and settled at once (prunable, never an unacknowledged
// exhaustion, never delivered to [Config.ExhaustionHandler]); [Row.Expired]
// tells it apart from other abandoned rows, and operator tooling shows its
// state as "expired".
const ExpiredText = "expired: past its deadline"

// StateNameExpired is the name operator tooling (the tgrelay updates
// command, the dashboard, metrics) gives the state of a row that ended
// expired: an abandoned row whose error opens with [ExpiredText]. Stores
// keep such rows as [StateAbandoned]; no store has a state of its own for
// them.
const StateNameExpired = "expired"

// Expired reports whether the row ended expired: its deadline passed
// before it was handled (see [ExpiredText]).
func (r Row) Expired() bool {
	return r.State == StateAbandoned && !r.SettledAt.IsZero() && strings.HasPrefix(r.Error, ExpiredText)
}

// StateName is the row's state as operator tooling names it: "expired" for
// an expired row ([Row.Expired]), its [State] otherwise.
func (r Row) StateName() string {
	if r.Expired() {
		return StateNameExpired
	}
	return string(r.State)
}

// Deadlines are the answer deadlines of the update types Telegram waits
// on, and what the runner does about them. An update with a deadline:
//
//   - runs on a lane of its own: never held behind an earlier update of its
//     chat (its chat key is not recorded, so strict chat order does not hold
//     it either), with MaxConcurrent handler slots and its own share of
//     [Config.MaxQueued] that ordinary updates cannot take;
//   - runs with a handler context that ends at its deadline;
//   - is retried only while its deadline allows: a retry that would be due
//     after it is not scheduled;
//   - ends expired once its deadline passed unhandled (see [ExpiredText]):
//     an abandoned, settled row that is no exhaustion, reported to
//     [Observer.ExpireFunc];
//   - is handed to LateFunc, once, when it has not been handled Margin
//     before its deadline.
//
// A successful_payment arrives as a message, which has no deadline.
// The zero value is Telegram's deadlines with no LateFunc.
type Deadlines struct {
	// CallbackQuery is the deadline of a callback_query. Defaults to
	// [DefaultCallbackQueryDeadline]; -1 means none.
	CallbackQuery time.Duration
	// InlineQuery is the deadline of an inline_query. Defaults to
	// [DefaultInlineQueryDeadline]; -1 means none.
	InlineQuery time.Duration
	// PreCheckoutQuery is the deadline of a pre_checkout_query. Defaults
	// to [DefaultPreCheckoutQueryDeadline]; -1 means none.
	PreCheckoutQuery time.Duration
	// ShippingQuery is the deadline of a shipping_query. Defaults to
	// [DefaultShippingQueryDeadline]; -1 means none.
	ShippingQuery time.Duration
	// Margin is how long before an update's deadline LateFunc is called.
	// Up to [MaxDeadline]; defaults to [DefaultDeadlineMargin]. A margin
	// longer than an update's deadline calls LateFunc when it arrives.
	Margin time.Duration
	// MaxConcurrent is how many handlers of updates with a deadline may run
	// at once, in slots of their own beside [Config.MaxConcurrent], 1 to
	// [MaxMaxConcurrent]. Defaults to [DefaultDeadlineConcurrent].
	MaxConcurrent int
	// LateFunc, when set, is called once for an update with a deadline
	// that this process scheduled and has not handled successfully Margin
	// before its deadline (its handler failed, still runs, or has not
	// started), in a goroutine of its own while the update's handler may
	// still run. ctx ends at the update's deadline and when the runner
	// closes. A relay declines the update there (an empty
	// answerCallbackQuery, answerPreCheckoutQuery with ok false). It is
	// not called for an update another process handles, nor for one this
	// process first sees after its margin began.
	LateFunc func(ctx context.Context, u Update)
}

// fill returns d with its defaults, or an error naming the first invalid
// field.
func (d Deadlines) fill() (Deadlines, error) {
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"CallbackQuery", &d.CallbackQuery, DefaultCallbackQueryDeadline},
		{"InlineQuery", &d.InlineQuery, DefaultInlineQueryDeadline},
		{"PreCheckoutQuery", &d.PreCheckoutQuery, DefaultPreCheckoutQueryDeadline},
		{"ShippingQuery", &d.ShippingQuery, DefaultShippingQueryDeadline},
	} {
		switch {
		case *f.v == 0:
			*f.v = f.def
		case *f.v == -1:
		case *f.v < 0 || *f.v > MaxDeadline:
			return d, badField(f.name, "is %v: want up to %v, or -1 for none (zero means %v)", *f.v, MaxDeadline, f.def)
		}
	}
	if d.Margin == 0 {
		d.Margin = DefaultDeadlineMargin
	}
	if d.Margin < 0 || d.Margin > MaxDeadline {
		return d, badField("Margin", "is %v: want up to %v (zero means %v)", d.Margin, MaxDeadline, DefaultDeadlineMargin)
	}
	if d.MaxConcurrent == 0 {
		d.MaxConcurrent = DefaultDeadlineConcurrent
	}
	if d.MaxConcurrent < 1 || d.MaxConcurrent > MaxMaxConcurrent {
		return d, badField("MaxConcurrent", "is %d: want 1 to %d (zero means %d)", d.MaxConcurrent, MaxMaxConcurrent, DefaultDeadlineConcurrent)
	}
	return d, nil
}

// For returns the deadline of an update of type kind ([Update.Kind]), or
// zero when it has none. Call it on a filled Deadlines (as the runner
// does); on the zero value it reports Telegram's deadlines.
func (d Deadlines) For(kind string) time.Duration {
	var v, def time.Duration
	switch kind {
	case KindCallbackQuery:
		v, def = d.CallbackQuery, DefaultCallbackQueryDeadline
	case KindInlineQuery:
		v, def = d.InlineQuery, DefaultInlineQueryDeadline
	case KindPreCheckoutQuery:
		v, def = d.PreCheckoutQuery, DefaultPreCheckoutQueryDeadline
	case KindShippingQuery:
		v, def = d.ShippingQuery, DefaultShippingQueryDeadline
	default:
		return 0
	}
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// Expiry is an update that ended expired, as reported to
// [Observer.ExpireFunc].
type Expiry struct {
	// Identity is the attempt that found the deadline passed; Attempt is
	// the number of attempts the update had.
	Identity
	// Kind is the update's type ([Update.Kind]).
	Kind string
	// Deadline is when the update's deadline passed.
	Deadline time.Time
	// Error is the text recorded in the row, opening with [ExpiredText].
	Error string
}

// deadlineOf returns the deadline of an update of type kind received at
// received, or the zero time when it has none.
func (r *Runner) deadlineOf(kind string, received time.Time) time.Time {
	d := r.cfg.Deadlines.For(kind)
	if d <= 0 || received.IsZero() {
		return time.Time{}
	}
	return received.Add(d)
}

// expiredText is the row error of an update that expired, with the last
// failure when there was one.
func expiredText(kind string, deadline time.Time, last string) string {
	s := fmt.Sprintf("%s (%s, deadline %s)", ExpiredText, kind, deadline.UTC().Format(time.RFC3339Nano))
	if last != "" {
		s += "; last failure: " + last
	}
	return s
}

// lane returns the handler slots and claim tokens of the ordinary lane, or
// of the deadline lane when urgent.
func (rn *run) lane(urgent bool) (sem, claims *semaphore.Weighted) {
	if urgent {
		return rn.urgentSem, rn.urgentClaims
	}
	return rn.sem, rn.claims
}

// laneClaims returns the claim tokens of job j's lane.
func laneClaims(rn *run, j job) *semaphore.Weighted {
	_, claims := rn.lane(!j.deadline.IsZero())
	return claims
}

// fullLocked reports whether the share of MaxQueued of a lane is taken:
// updates with a deadline (urgent) have a share of their own, which
// ordinary updates and exhaustion deliveries cannot fill. MaxQueued bounds
// the updates that hold a line, a handler slot or their body: running,
// waiting on their chat line or for a slot, reserved while their claimed
// add commits, or an exhaustion being delivered. An update whose handler
// returned and whose completion is committing holds only its id and its
// lease's record, and counts against a bound of its own,
// committingPerQueued times MaxQueued: a store that commits completions
// slowly for a moment (a shared write of PostgreSQL's takes 256) then
// does not fill the queue and leave every update accepted meanwhile to a
// sweep and a claim of its own (bench relay, session 24).
func (r *Runner) fullLocked(rn *run, urgent bool) bool {
	if urgent {
		c := rn.committingUrgent
		return len(rn.urgent)-c >= r.cfg.MaxQueued || c >= committingPerQueued*r.cfg.MaxQueued
	}
	c := len(rn.committing) - rn.committingUrgent
	return len(rn.queued)-len(rn.urgent)-c+len(rn.delivering)+rn.reserved >= r.cfg.MaxQueued ||
		c >= committingPerQueued*r.cfg.MaxQueued
}

// committingLocked notes that queued update id's handler returned and
// its completion now commits (see fullLocked); unqueueLocked forgets it.
func (r *Runner) committingLocked(rn *run, id int64) {
	_, urgent := rn.urgent[id]
	rn.committing[id] = urgent
	if urgent {
		rn.committingUrgent++
	}
}

// update returns the Update a handler of j receives.
func (j job) update() Update {
	return Update{ID: j.id, Body: j.body, ChatID: j.chat.id, ChatType: j.chat.typ,
		Kind: j.kind, ReceivedAt: j.received, Deadline: j.deadline}
}

// lateCall is the pending [Deadlines.LateFunc] call of one scheduled
// update with a deadline.
type lateCall struct {
	timer *time.Timer
	u     Update
}

// queueLocked marks j scheduled and, for an update with a deadline and a
// LateFunc, arms its late call for Margin before the deadline.
func (r *Runner) queueLocked(rn *run, j job) {
	rn.queued[j.id] = struct{}{}
	if j.deadline.IsZero() {
		return
	}
	rn.urgent[j.id] = struct{}{}
	if r.cfg.Deadlines.LateFunc == nil || j.bad || rn.late[j.id] != nil || !now().Before(j.deadline) {
		return
	}
	lc := &lateCall{u: j.update()}
	rn.late[j.id] = lc
	lc.timer = time.AfterFunc(j.deadline.Add(-r.cfg.Deadlines.Margin).Sub(now()), func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if rn.late[j.id] == lc {
			delete(rn.late, j.id)
			r.lateLocked(rn, lc)
		}
	})
}

// unqueueLocked marks update id no longer scheduled. ended reports that
// this process settled it for good: an update with a deadline that so
// ends unanswered while its late call is still armed (it expired early,
// or was given up) gets that call now, unless its row was requeued
// meanwhile. One unscheduled otherwise (its claim refused: another process
// has it; the lifecycle closing) is left to whoever handles it next.
// It returns the update as a sweep listed it due after its attempt began
// to settle it for good (see relistedLocked), for the caller to schedule
// again; nil when none did.
func (r *Runner) unqueueLocked(rn *run, id int64, ended bool) *retake {
	delete(rn.queued, id)
	delete(rn.urgent, id)
	again := rn.ending[id]
	delete(rn.ending, id)
	if urgent, ok := rn.committing[id]; ok {
		delete(rn.committing, id)
		if urgent {
			rn.committingUrgent--
		}
	}
	if lc := rn.late[id]; lc != nil {
		delete(rn.late, id)
		lc.timer.Stop()
		if ended && again == nil {
			r.lateLocked(rn, lc)
		}
	}
	return again
}

// answered disarms the late call of update id: its handler succeeded.
func (r *Runner) answered(rn *run, id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if lc := rn.late[id]; lc != nil {
		delete(rn.late, id)
		lc.timer.Stop()
	}
}

// lateLocked calls LateFunc for lc in a goroutine of rn, bounded by the
// update's deadline, unless the lifecycle drains or the deadline passed.
func (r *Runner) lateLocked(rn *run, lc *lateCall) {
	if rn.draining || !now().Before(lc.u.Deadline) {
		return
	}
	f := r.cfg.Deadlines.LateFunc
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		ctx, cancel := context.WithDeadline(rn.ctx, lc.u.Deadline)
		defer cancel()
		guard(func() { f(ctx, lc.u) })
	}()
}

// expire ends the attempt of job j as expired: abandoned and settled at
// once, no exhaustion. last is the failure that ended it, if any.
func (r *Runner) expire(rn *run, l *lease, j job, last string) outcome {
	r.markEnding(rn, j.id)
	msg := r.cfg.Redactor.Redact(expiredText(j.kind, j.deadline, last))
	if !r.settleObserved(rn, l, Settlement{State: StateAbandoned, At: now(), Error: msg}, false) {
		return outcome{}
	}
	r.log.Info("intake: update expired", "update_id", l.id.UpdateID, "attempt", l.id.Attempt, "kind", j.kind)
	if f := r.cfg.Observer.ExpireFunc; f != nil {
		e := Expiry{Identity: l.id, Kind: j.kind, Deadline: j.deadline, Error: msg}
		guard(func() { f(e) })
	}
	return outcome{released: true}
}
