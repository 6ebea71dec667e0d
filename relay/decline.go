package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Safe declines.
//
// Some updates are questions Telegram waits for only briefly: a button's
// spinner (callback_query), a payment's pre-checkout (pre_checkout_query),
// a shipping address (shipping_query). When the app has not answered one
// shortly before its deadline, the relay answers it itself, safely: an
// empty answerCallbackQuery stops the spinner; answerPreCheckoutQuery (or
// answerShippingQuery) ok:false with an error message declines the order,
// so no user is charged for an order nobody checked. The decline goes
// through the gateway under the update's current attempt identity, fenced
// and journaled like the app's own calls, and the gateway journals the
// answers of a query by the query (see package gateway, "One answer per
// query"): an app that answers after the decline gets the decline's
// answer replayed, and Telegram sees one answer. If the app answered
// first, the decline is the one replayed, and nothing is sent.

// Update kinds a decline answers: the update fields that carry them.
const (
	DeclineCallbackQuery    = "callback_query"
	DeclinePreCheckoutQuery = "pre_checkout_query"
	DeclineShippingQuery    = "shipping_query"
)

// Defaults of [DeclineConfig].
const (
	// DefaultDeclineMargin is how long before Telegram's deadline the relay
	// declines a query the app has not answered.
	DefaultDeclineMargin = 2 * time.Second
	// DefaultCallbackQueryDeadline is Telegram's deadline for a callback
	// query's answer (the spinner gives up after about 15 s).
	DefaultCallbackQueryDeadline = 15 * time.Second
	// DefaultPreCheckoutQueryDeadline is the Bot API's documented 10 s for
	// answerPreCheckoutQuery; later, the payment fails for the user.
	DefaultPreCheckoutQueryDeadline = 10 * time.Second
	// DefaultShippingQueryDeadline is the deadline assumed for
	// answerShippingQuery (the Bot API documents none; Telegram's clients
	// give up after about as long as for a pre-checkout query).
	DefaultShippingQueryDeadline = 10 * time.Second
	// DefaultPreCheckoutDeclineMessage is the error_message of a declined
	// pre-checkout query, which the user reads.
	DefaultPreCheckoutDeclineMessage = "Sorry, we could not confirm your order in time. You have not been charged; please try again."
	// DefaultShippingDeclineMessage is the error_message of a declined
	// shipping query.
	DefaultShippingDeclineMessage = "Sorry, we could not confirm delivery in time. Please try again."
	// MaxDeclineTracked bounds the updates whose first sighting the relay
	// remembers to time their declines (see [DeclineConfig]).
	MaxDeclineTracked = 10000
	// maxDeclineText bounds a configured text: answerCallbackQuery takes
	// 200 characters; error messages are kept as short.
	maxDeclineText = 200
)

// DeclineConfig configures the safe declines of queries the app did not
// answer in time, per kind of query. The zero value declines callback,
// pre-checkout and shipping queries [DefaultDeclineMargin] before
// Telegram's deadlines, with an empty callback answer and the default
// error messages. Declines need the gateway (with it disabled, none is
// made).
//
// A query's deadline is measured from the moment its update was recorded
// (the store row's ReceivedAt), or, when that cannot be read, from the
// start of its first attempt in this process: Telegram's updates carry no
// time for these queries.
//
// Every decline made (sent, or replayed from the journal because the query
// was answered already) reaches [Config.Observer] as a [KindDeclined]
// event.
type DeclineConfig struct {
	// Disable turns every decline off.
	Disable bool
	// Margin is how long before a query's deadline it is declined.
	// Defaults to DefaultDeclineMargin; it must be shorter than every
	// deadline of a kind that is declined.
	Margin time.Duration
	// CallbackQuery is the decline of a button press: an empty
	// answerCallbackQuery (or one with Text), so the spinner stops.
	CallbackQuery DeclinePolicy
	// PreCheckoutQuery is the decline of a payment's pre-checkout query:
	// answerPreCheckoutQuery ok:false with Text as the error_message
	// (defaults to DefaultPreCheckoutDeclineMessage).
	PreCheckoutQuery DeclinePolicy
	// ShippingQuery is the decline of a shipping query:
	// answerShippingQuery ok:false with Text as the error_message
	// (defaults to DefaultShippingDeclineMessage).
	ShippingQuery DeclinePolicy
	// Test holds test seams; leave it zero.
	Test DeclineTestHooks
}

// DeclinePolicy is the decline of one kind of query.
type DeclinePolicy struct {
	// Disable never declines this kind.
	Disable bool
	// Text is the callback answer's text (empty: none, the spinner just
	// stops) or the error_message the user reads (empty: the default).
	// At most 200 characters.
	Text string

	// deadline is the kind's deadline: [Config.Deadlines]' for its update
	// type, so the decline and the update's deadline never disagree.
	deadline time.Duration
}

// DeclineTestHooks are test seams of the declines: a clock. Zero means
// the real clock.
type DeclineTestHooks struct {
	// NowFunc is the clock declines are timed by. Nil means time.Now.
	NowFunc func() time.Time
	// AfterFunc runs f after d on that clock, and returns what stops it
	// (as time.AfterFunc's Timer.Stop). Nil means time.AfterFunc.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

// Decline is one decline the relay made.
type Decline struct {
	intake.Identity
	// Kind is DeclineCallbackQuery, DeclinePreCheckoutQuery or
	// DeclineShippingQuery; QueryID the query's id.
	Kind    string
	QueryID string
	// Status and Outcome are the gateway's answer (Outcome as its
	// Tgrelay-Outcome header names it); Replayed is true when the query
	// had been answered already (by the app, or an earlier decline) and
	// the journal answered instead of Telegram.
	Status   int
	Outcome  string
	Replayed bool
}

// ErrNoAttempt is returned by a decline asked for outside an attempt: a
// decline is sent under an attempt's identity, fenced and journaled, or
// not at all.
var ErrNoAttempt = errors.New("relay: a decline needs the update's current attempt")

// DeclineError is a decline the gateway did not perform as asked: stale,
// not dispatched, unknown or refused by Telegram.
type DeclineError struct {
	Decline
}

// Error implements error.
func (e *DeclineError) Error() string {
	return fmt.Sprintf("relay: declining the %s of update %d (attempt %d): status %d, outcome %s",
		e.Kind, e.UpdateID, e.Attempt, e.Status, e.Outcome)
}

// policy returns the filled policy of kind and whether kind is declined.
func (c DeclineConfig) policy(kind string) (DeclinePolicy, bool) {
	var p DeclinePolicy
	switch kind {
	case DeclineCallbackQuery:
		p = c.CallbackQuery
	case DeclinePreCheckoutQuery:
		p = c.PreCheckoutQuery
	case DeclineShippingQuery:
		p = c.ShippingQuery
	default:
		return p, false
	}
	return p, !c.Disable && !p.Disable
}

// fillDecline fills c.Decline's defaults and checks it.
func (c *Config) fillDecline() error {
	d := &c.Decline
	if d.Margin < 0 {
		return badField("Decline.Margin", "is %v: want > 0 (0: the default)", d.Margin)
	}
	if d.Margin == 0 {
		d.Margin = DefaultDeclineMargin
	}
	for _, k := range []struct {
		field    string
		kind     string
		p        *DeclinePolicy
		deadline time.Duration
		text     string
	}{
		{"Decline.CallbackQuery", "callback query", &d.CallbackQuery, DefaultCallbackQueryDeadline, ""},
		{"Decline.PreCheckoutQuery", "pre-checkout query", &d.PreCheckoutQuery, DefaultPreCheckoutQueryDeadline, DefaultPreCheckoutDeclineMessage},
		{"Decline.ShippingQuery", "shipping query", &d.ShippingQuery, DefaultShippingQueryDeadline, DefaultShippingDeclineMessage},
	} {
		if k.p.deadline <= 0 {
			k.p.deadline = k.deadline
		}
		if k.p.Text == "" {
			k.p.Text = k.text
		}
		if n := len([]rune(k.p.Text)); n > maxDeclineText {
			return badField(k.field+".Text", "is %d characters: want at most %d", n, maxDeclineText)
		}
		if !d.Disable && !k.p.Disable && d.Margin >= k.p.deadline {
			return badField("Decline.Margin", "is %v: want less than the %s deadline (%v)", d.Margin, k.kind, k.p.deadline)
		}
	}
	return nil
}

// declineSender is what a decline goes through: the gateway's webhook-reply
// path ([gateway.Gateway.Reply]), which fences and journals a call under an
// attempt's identity.
type declineSender interface {
	Reply(ctx context.Context, id intake.Identity, method string, params []byte) (status int, outcome string, replayed bool)
}

// decliner declines queries the app did not answer in time. Safe for
// concurrent use.
type decliner struct {
	cfg       DeclineConfig
	send      declineSender
	now       func() time.Time
	afterFunc func(time.Duration, func()) func() bool
	log       *slog.Logger
	emit      func(Event) // nil: no events
	// receivedAt returns when the update was recorded, on the real clock
	// (the store's row); nil, or false, leaves the first sighting.
	receivedAt func(ctx context.Context, updateID int64) (time.Time, bool)

	mu   sync.Mutex
	seen map[int64]time.Time // first sighting of each update with a deadline
}

func newDecliner(cfg DeclineConfig, send declineSender, log *slog.Logger, emit func(Event)) *decliner {
	d := &decliner{cfg: cfg, send: send, now: cfg.Test.NowFunc, afterFunc: cfg.Test.AfterFunc, log: log, emit: emit, seen: map[int64]time.Time{}}
	if d.now == nil {
		d.now = time.Now
	}
	if d.afterFunc == nil {
		d.afterFunc = func(dur time.Duration, f func()) func() bool { return time.AfterFunc(dur, f).Stop }
	}
	return d
}

// query is the query an update asks, when it is one a decline answers.
type query struct {
	kind, id string
}

// mayNameQuery reports whether body may have a key encoding/json matches
// to callback_query, pre_checkout_query or shipping_query: each such key
// spells "query" in ASCII letters of either case (no letter of "query"
// folds from a non-ASCII one), or hides it behind an escape. A body with
// neither has none, so queryOf need not decode it.
func mayNameQuery(body []byte) bool {
	if bytes.IndexByte(body, '\\') >= 0 {
		return true
	}
	for i := 0; i+5 <= len(body); i++ {
		if body[i]|0x20 == 'q' && body[i+1]|0x20 == 'u' && body[i+2]|0x20 == 'e' && body[i+3]|0x20 == 'r' && body[i+4]|0x20 == 'y' {
			return true
		}
	}
	return false
}

// queryOf returns the query of an update body; ok is false for any other
// update.
func queryOf(body []byte) (q query, ok bool) {
	if !mayNameQuery(body) {
		return q, false // most updates: no decoding
	}
	return decodeQuery(body)
}

// decodeQuery is queryOf by encoding/json.
func decodeQuery(body []byte) (q query, ok bool) {
	var u struct {
		CallbackQuery    *struct{ ID string } `json:"callback_query"`
		PreCheckoutQuery *struct{ ID string } `json:"pre_checkout_query"`
		ShippingQuery    *struct{ ID string } `json:"shipping_query"`
	}
	if json.Unmarshal(body, &u) != nil {
		return q, false
	}
	switch {
	case u.CallbackQuery != nil:
		q = query{DeclineCallbackQuery, u.CallbackQuery.ID}
	case u.PreCheckoutQuery != nil:
		q = query{DeclinePreCheckoutQuery, u.PreCheckoutQuery.ID}
	case u.ShippingQuery != nil:
		q = query{DeclineShippingQuery, u.ShippingQuery.ID}
	default:
		return q, false
	}
	return q, q.id != ""
}

// call returns the method and parameters of the decline of q.
func (d *decliner) call(q query, p DeclinePolicy) (string, []byte) {
	var method string
	params := map[string]any{}
	switch q.kind {
	case DeclineCallbackQuery:
		method, params["callback_query_id"] = "answerCallbackQuery", q.id
		if p.Text != "" {
			params["text"] = p.Text
		}
	case DeclinePreCheckoutQuery:
		method, params["pre_checkout_query_id"] = "answerPreCheckoutQuery", q.id
		params["ok"], params["error_message"] = false, p.Text
	case DeclineShippingQuery:
		method, params["shipping_query_id"] = "answerShippingQuery", q.id
		params["ok"], params["error_message"] = false, p.Text
	}
	b, _ := json.Marshal(params) // strings and a bool: cannot fail
	return method, b
}

// Decline declines the query of upd, of kind (DeclineCallbackQuery,
// DeclinePreCheckoutQuery or DeclineShippingQuery), under the attempt
// ctx belongs to ([intake.AttemptFrom]); outside an attempt it returns
// [ErrNoAttempt] and sends nothing. It is the seam a deadline scheduler
// calls when a query is near its deadline unanswered. A query the app
// answered already is not answered again: the journal replays its answer
// and Decline returns nil. A disabled kind, or an update that is not such
// a query, is left alone (nil).
func (d *decliner) Decline(ctx context.Context, upd intake.Update, kind string) error {
	a, ok := intake.AttemptFrom(ctx)
	if !ok {
		return ErrNoAttempt
	}
	return d.declineAs(ctx, a.Identity, upd, kind)
}

// declineAs declines the query of upd under id.
func (d *decliner) declineAs(ctx context.Context, id intake.Identity, upd intake.Update, kind string) error {
	q, ok := queryOf(upd.Body)
	if !ok || q.kind != kind {
		return nil
	}
	p, on := d.cfg.policy(kind)
	if !on {
		return nil
	}
	method, params := d.call(q, p)
	status, outcome, replayed := d.send.Reply(ctx, id, method, params)
	dc := Decline{Identity: id, Kind: kind, QueryID: q.id, Status: status, Outcome: outcome, Replayed: replayed}
	var err error
	if status != http.StatusOK {
		err = &DeclineError{dc}
	}
	if d.emit != nil {
		d.emit(Event{Kind: KindDeclined, ID: id, Reason: kind, Decline: dc, Err: err})
	}
	if err != nil {
		d.log.Warn("relay: a query the app did not answer in time could not be declined",
			"update_id", id.UpdateID, "attempt", id.Attempt, "kind", kind, "status", status, "outcome", outcome, "replayed", replayed)
		return err
	}
	if replayed {
		d.log.Info("relay: a query near its deadline was answered already; not declined",
			"update_id", id.UpdateID, "attempt", id.Attempt, "kind", kind)
	} else {
		d.log.Info("relay: declined a query the app did not answer in time",
			"update_id", id.UpdateID, "attempt", id.Attempt, "kind", kind)
	}
	return nil
}

// firstSeen returns when the relay first saw update id, remembering now
// for an update it has not seen. At most MaxDeclineTracked updates are
// remembered; the oldest are forgotten first.
func (d *decliner) firstSeen(id int64, now time.Time) time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	if t, ok := d.seen[id]; ok {
		return t
	}
	if len(d.seen) >= MaxDeclineTracked {
		var oldest int64
		var at time.Time
		for k, t := range d.seen {
			if at.IsZero() || t.Before(at) {
				oldest, at = k, t
			}
		}
		delete(d.seen, oldest)
	}
	d.seen[id] = now
	return now
}

// forget drops update id's first sighting, once it needs no decline.
func (d *decliner) forget(id int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.seen, id)
}

// guard arms the decline of the query of u for attempt a, whose context
// is ctx: Margin before the query's deadline (counted from when the update
// was recorded, or first seen), unless the returned stop is called first. stop ends
// the guard and waits for a decline in flight. A query whose decline time
// has passed already is declined at once, before the app is asked; one
// whose deadline has passed is not declined (Telegram would refuse it).
func (d *decliner) guard(ctx context.Context, u intake.Update, a intake.Attempt) (stop func(completed bool)) {
	q, ok := queryOf(u.Body)
	if !ok {
		return func(bool) {}
	}
	p, on := d.cfg.policy(q.kind)
	if !on {
		return func(bool) {}
	}
	now := d.now()
	asked := d.firstSeen(u.ID, now)
	if d.receivedAt != nil {
		// The update may have waited (behind its chat, for a retry) since
		// it was recorded: its age on the real clock counts.
		if at, ok := d.receivedAt(ctx, u.ID); ok {
			if rec := now.Add(-time.Since(at)); rec.Before(asked) {
				asked = rec
			}
		}
	}
	deadline := asked.Add(p.deadline)
	if now.After(deadline) {
		d.log.Warn("relay: a query reached the app after its deadline; too late to decline",
			"update_id", u.ID, "attempt", a.Attempt, "kind", q.kind, "late_by", now.Sub(deadline))
		return func(bool) { d.forget(u.ID) }
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		stopped bool
	)
	// The decline outlives neither the attempt's guard nor Telegram's
	// deadline.
	dctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), d.wallDeadline(deadline))
	fire := func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		_ = d.declineAs(dctx, a.Identity, u, q.kind) // logged and reported inside
	}
	stopTimer := d.afterFunc(max(deadline.Add(-d.cfg.Margin).Sub(now), 0), fire)
	return func(completed bool) {
		mu.Lock()
		stopped = true
		mu.Unlock()
		stopTimer()
		wg.Wait()
		cancel()
		if completed {
			d.forget(u.ID)
		}
	}
}

// wallDeadline converts a deadline on the decliner's clock to the real
// clock, for a context.
func (d *decliner) wallDeadline(t time.Time) time.Time {
	return time.Now().Add(max(t.Sub(d.now()), 0) + time.Second)
}

// forwardGuarded forwards one attempt with the decline of its query, if it
// asks one, armed meanwhile (see decliner.guard).
func (r *Relay) forwardGuarded(ctx context.Context, u intake.Update, a intake.Attempt) error {
	if r.decl == nil {
		return r.forwardHeld(ctx, u, a)
	}
	stop := r.decl.guard(ctx, u, a)
	err := r.forwardHeld(ctx, u, a)
	stop(err == nil)
	return err
}

// receivedAtTimeout bounds the store read that dates a query's update.
const receivedAtTimeout = time.Second

// receivedAt returns when update id was recorded, from its store row.
func (r *Relay) receivedAt(ctx context.Context, id int64) (time.Time, bool) {
	ctx, cancel := context.WithTimeout(ctx, receivedAtTimeout)
	defer cancel()
	if r.caps.admin == nil {
		return time.Time{}, false
	}
	row, ok, err := r.caps.admin.Get(ctx, id)
	if err != nil || !ok || row.ReceivedAt.IsZero() {
		return time.Time{}, false
	}
	return row.ReceivedAt, true
}
