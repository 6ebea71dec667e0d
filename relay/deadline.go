package relay

import (
	"context"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Decliner answers an update with a deadline safely, on the app's behalf,
// before Telegram's deadline passes: an empty answerCallbackQuery for a
// callback query, answerPreCheckoutQuery with ok false (and
// [DeadlineConfig.PreCheckoutMessage]) for a pre-checkout query.
//
// The relay calls Decline when the app has not answered upd
// [DeadlineConfig.Margin] before upd.Deadline (its forward failed, still
// runs, or has not started), or when upd ended unanswered before that
// (its forward failed and no retry fits before its deadline); only for the
// types whose decline the DeadlineConfig turns on; at most once per update
// in one process; concurrently for different updates. kind is upd.Kind
// (an [intake.KindCallbackQuery] or [intake.KindPreCheckoutQuery]). ctx
// ends at upd.Deadline and when the relay stops. An error is reported
// (a [KindDeclined] event with Err) and not retried. Decline must not
// keep upd.Body after it returns.
type Decliner interface {
	Decline(ctx context.Context, upd intake.Update, kind string) error
}

// DeclinerFunc adapts a function to a [Decliner].
type DeclinerFunc func(ctx context.Context, upd intake.Update, kind string) error

// Decline calls f(ctx, upd, kind).
func (f DeclinerFunc) Decline(ctx context.Context, upd intake.Update, kind string) error {
	return f(ctx, upd, kind)
}

// DefaultPreCheckoutMessage is the error_message of the relay's refusal
// of a pre-checkout query the app did not answer in time, when
// [DeadlineConfig.PreCheckoutMessage] is empty. Telegram shows it to the
// user.
const DefaultPreCheckoutMessage = "Sorry, we could not confirm your order in time. You have not been charged; please try again."

// DeadlineConfig configures the updates with a deadline ([Config]'s
// Deadlines field). The zero value is Telegram's deadlines, with callback
// and pre-checkout queries declined by the configured [Decliner], when
// there is one.
//
// Telegram waits only briefly for the answer to a callback query (about
// 15 s), an inline query (about 10 s), a pre-checkout query (10 s) and a
// shipping query. The relay knows an update's type from its body, and
// counts its deadline from its arrival (the receipt time stored with its
// row). Such an update:
//
//   - is forwarded on a lane of its own: never behind its chat's failed or
//     pending message, and in handler slots of its own
//     ([DeadlineConfig.MaxConcurrent]), so a pool full of ordinary updates
//     does not delay it;
//   - is forwarded with a context that ends at its deadline, and retried
//     only while a retry can be due before it;
//   - ends expired once its deadline passed unanswered: settled, not an
//     exhaustion (no alert, nothing delivered to the exhaustion endpoint),
//     reported as a [KindExpired] event, and shown as "expired" by the
//     dashboard and the tgrelay updates command ([intake.Row.Expired]);
//   - is declined, when the app has not answered it [DeadlineConfig.Margin]
//     before its deadline (or it ended unanswered earlier), by the
//     configured [Decliner], so that a button's spinner stops and a
//     payment nobody checked is refused rather than timed out.
//
// A successful_payment arrives as a message: it has no deadline and is
// never expired.
//
// The seam with the decline component: the relay decides when an update
// must be declined; a [Decliner] decides how. The agreed shape is the
// [Decliner] interface: Decline is
// called at most once per update and process, in a goroutine of its own,
// with the update (body, type, arrival and deadline) and its type again as
// kind, under a context that ends at the update's deadline. It sends the
// safe answer through the gateway, whose journal and
// at-most-one-answer-per-query rule make a later answer of the app
// harmless (answered from the journal, not sent twice). The relay reports
// each call as a [KindDeclined] event. The policy of which types are
// declined, and the pre-checkout refusal's message, are fields of
// [DeadlineConfig] the decliner reads.
type DeadlineConfig struct {
	// CallbackQuery, InlineQuery, PreCheckoutQuery and ShippingQuery are
	// the deadlines of those update types, counted from an update's
	// arrival. Zero means Telegram's ([intake.DefaultCallbackQueryDeadline],
	// [intake.DefaultInlineQueryDeadline],
	// [intake.DefaultPreCheckoutQueryDeadline],
	// [intake.DefaultShippingQueryDeadline]); -1 means none (the type is
	// forwarded like any update); up to [intake.MaxDeadline].
	CallbackQuery    time.Duration
	InlineQuery      time.Duration
	PreCheckoutQuery time.Duration
	ShippingQuery    time.Duration
	// Margin is how long before an update's deadline it is declined when
	// the app has not answered. Zero means
	// [intake.DefaultDeadlineMargin].
	Margin time.Duration
	// MaxConcurrent is how many forwards of updates with a deadline may
	// run at once, beside [Config.MaxConcurrent]. Zero means
	// [intake.DefaultDeadlineConcurrent].
	MaxConcurrent int

	// Decliner declines what the app did not answer in time. Nil means the
	// relay's own, through its gateway, when the relay has one and
	// provides it; with neither, nothing is declined, and an unanswered
	// update only expires.
	Decliner Decliner
	// NoDeclineCallbackQuery leaves a callback query the app did not
	// answer in time unanswered (the button's spinner runs until Telegram
	// gives up) instead of answering it empty.
	NoDeclineCallbackQuery bool
	// NoDeclinePreCheckoutQuery leaves a pre-checkout query the app did
	// not answer in time to time out (the payment fails for the user)
	// instead of refusing it with PreCheckoutMessage.
	NoDeclinePreCheckoutQuery bool
	// PreCheckoutMessage is the error_message of a refused pre-checkout
	// query. Empty means [DefaultPreCheckoutMessage].
	PreCheckoutMessage string
}

// Declines reports whether updates of type kind are declined when
// unanswered: callback and pre-checkout queries, unless turned off.
// Inline and shipping queries are never declined.
func (c DeadlineConfig) Declines(kind string) bool {
	switch kind {
	case intake.KindCallbackQuery:
		return !c.NoDeclineCallbackQuery
	case intake.KindPreCheckoutQuery:
		return !c.NoDeclinePreCheckoutQuery
	}
	return false
}

// fillDeadlines checks Deadlines once, so a bad value names its field.
func (c *Config) fillDeadlines() error {
	d := &c.Deadlines
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"CallbackQuery", d.CallbackQuery}, {"InlineQuery", d.InlineQuery},
		{"PreCheckoutQuery", d.PreCheckoutQuery}, {"ShippingQuery", d.ShippingQuery},
	} {
		if f.v != -1 && (f.v < 0 || f.v > intake.MaxDeadline) {
			return badField("Deadlines."+f.name, "is %v: want up to %v, or -1 for none", f.v, intake.MaxDeadline)
		}
	}
	if d.Margin < 0 || d.Margin > intake.MaxDeadline {
		return badField("Deadlines.Margin", "is %v: want up to %v", d.Margin, intake.MaxDeadline)
	}
	if d.MaxConcurrent < 0 || d.MaxConcurrent > intake.MaxMaxConcurrent {
		return badField("Deadlines.MaxConcurrent", "is %d: want 1 to %d", d.MaxConcurrent, intake.MaxMaxConcurrent)
	}
	if d.PreCheckoutMessage == "" {
		d.PreCheckoutMessage = DefaultPreCheckoutMessage
	}
	return nil
}

// intakeDeadlines is the runner's configuration of the deadlines, with
// the relay's late call.
func (r *Relay) intakeDeadlines() intake.Deadlines {
	d := r.cfg.Deadlines
	return intake.Deadlines{
		CallbackQuery:    d.CallbackQuery,
		InlineQuery:      d.InlineQuery,
		PreCheckoutQuery: d.PreCheckoutQuery,
		ShippingQuery:    d.ShippingQuery,
		Margin:           d.Margin,
		MaxConcurrent:    d.MaxConcurrent,
		LateFunc:         r.late,
	}
}

// late is the runner's late call: an update with a deadline not answered
// Margin before it. It declines the update when its type is declined.
func (r *Relay) late(ctx context.Context, u intake.Update) {
	if !r.cfg.Deadlines.Declines(u.Kind) {
		return
	}
	id := intake.Identity{UpdateID: u.ID}
	dec := r.cfg.Deadlines.Decliner
	if dec == nil {
		return // nothing to decline with: the update only expires
	}
	start := r.now()
	err := dec.Decline(ctx, u, u.Kind)
	r.emit(Event{Kind: KindDeclined, ID: id, Reason: u.Kind, Duration: r.now().Sub(start), Err: err})
}

// UpdateKindLabel returns kind when it is one of the update types with a
// deadline, and "other" otherwise: a metric label from a fixed set.
func UpdateKindLabel(kind string) string {
	switch kind {
	case intake.KindCallbackQuery, intake.KindInlineQuery, intake.KindPreCheckoutQuery, intake.KindShippingQuery:
		return kind
	}
	return "other"
}
