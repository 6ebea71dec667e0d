package relay

import (
	"context"
	"errors"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Decliner answers an update with a deadline safely, on the app's behalf,
// before Telegram's deadline passes: an empty answerCallbackQuery for a
// callback query, answerPreCheckoutQuery (or answerShippingQuery) with ok
// false for a pre-checkout (or shipping) query. The relay's gateway
// decliner (decline.go, configured by [Config]'s Decline field) has this
// method; which types it declines, and with what text, is its own policy.
//
// The relay calls Decline when the app has not answered upd
// [DeadlineConfig.Margin] before upd.Deadline (its forward failed and
// waits for a retry, still runs, or has not started), or when upd ended
// unanswered before that (its forward failed and no retry fits before
// its deadline); at most once per update in one process; concurrently
// for different updates, each in a goroutine of its own. kind is
// upd.Kind (such as [intake.KindCallbackQuery]); upd carries the body,
// ReceivedAt and Deadline. ctx ends at upd.Deadline and when the relay
// stops. An error is logged and not retried. Decline must not keep
// upd.Body after it returns. The gateway's at-most-one-answer-per-query
// rule makes a decline racing the app's own answer harmless: Telegram
// sees one answer, and the later one is answered from the journal.
type Decliner interface {
	Decline(ctx context.Context, upd intake.Update, kind string) error
}

// DeclinerFunc adapts a function to a [Decliner].
type DeclinerFunc func(ctx context.Context, upd intake.Update, kind string) error

// Decline calls f(ctx, upd, kind).
func (f DeclinerFunc) Decline(ctx context.Context, upd intake.Update, kind string) error {
	return f(ctx, upd, kind)
}

// DeadlineConfig configures the updates with a deadline ([Config]'s
// Deadlines field). The zero value is Telegram's deadlines, with the
// configured [Decliner], if any, called for what the app did not answer in
// time.
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
//   - is handed to the configured [Decliner] when the app has not answered
//     it [DeadlineConfig.Margin] before its deadline (or it ended
//     unanswered earlier), so that a button's spinner stops and a payment
//     nobody checked is refused rather than timed out.
//
// A successful_payment arrives as a message: it has no deadline and is
// never expired.
//
// The seam with the decline component: the runner decides when an update
// must be declined (see [intake.Deadlines.LateFunc]); a [Decliner]
// decides whether and how.
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
	// Margin is how long before an update's deadline it is handed to the
	// Decliner when the app has not answered. Zero means
	// [intake.DefaultDeadlineMargin].
	Margin time.Duration
	// MaxConcurrent is how many forwards of updates with a deadline may
	// run at once, beside [IntakeConfig.MaxConcurrent]. Zero means
	// [intake.DefaultDeadlineConcurrent].
	MaxConcurrent int

	// Decliner declines what the app did not answer in time. Nil declines
	// nothing here (an unanswered update only expires); the relay may set
	// its gateway decliner.
	Decliner Decliner
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
// Margin before it. It hands the update to the Decliner, which decides
// (by its own policy) whether and how to decline it, and reports what it
// did; an error is logged.
func (r *Relay) late(ctx context.Context, u intake.Update) {
	dec := r.cfg.Deadlines.Decliner
	if dec == nil {
		return // nothing to decline with: the update only expires
	}
	err := dec.Decline(ctx, u, u.Kind)
	if errors.Is(err, ErrNoAttempt) {
		// No attempt holds the update: an unfenced decline could answer
		// the query twice, so it only expires (the guard of its next
		// attempt declines it if one comes in time).
		r.log.Info("relay: an update the app did not answer in time is not held by an attempt; it is not declined",
			"update_id", u.ID, "type", u.Kind)
		return
	}
	if err != nil {
		r.log.Warn("relay: declining an update the app did not answer in time failed",
			"update_id", u.ID, "type", u.Kind, "err", err)
	}
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
