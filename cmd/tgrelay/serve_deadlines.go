package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/relay"
)

// deadlineFlags are serve's flags of the updates with a deadline (see
// relay.DeadlineConfig).
type deadlineFlags struct {
	callbackQuery, inlineQuery, preCheckoutQuery, shippingQuery time.Duration
	concurrency                                                 int
}

func (d *deadlineFlags) define(fs *flag.FlagSet) {
	fs.DurationVar(&d.callbackQuery, "deadline-callback-query", intake.DefaultCallbackQueryDeadline, "how long Telegram waits for a callback query's answer, from its arrival (`duration`; 0: no deadline, forwarded like any update)")
	fs.DurationVar(&d.inlineQuery, "deadline-inline-query", intake.DefaultInlineQueryDeadline, "how long an inline query's answer is worth giving, from its arrival (`duration`; 0: no deadline)")
	fs.DurationVar(&d.preCheckoutQuery, "deadline-pre-checkout-query", intake.DefaultPreCheckoutQueryDeadline, "how long Telegram waits for answerPreCheckoutQuery, from the query's arrival (`duration`; 0: no deadline)")
	fs.DurationVar(&d.shippingQuery, "deadline-shipping-query", intake.DefaultShippingQueryDeadline, "how long Telegram waits for answerShippingQuery, from the query's arrival (`duration`; 0: no deadline)")
	fs.IntVar(&d.concurrency, "deadline-concurrency", intake.DefaultDeadlineConcurrent, "forwards of updates with a deadline running at once, beside --concurrency")
}

// off maps a flag's 0 (no deadline) to the config's -1.
func off(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// config is the relay's configuration of the flags.
func (d *deadlineFlags) config() relay.DeadlineConfig {
	return relay.DeadlineConfig{
		CallbackQuery:    off(d.callbackQuery),
		InlineQuery:      off(d.inlineQuery),
		PreCheckoutQuery: off(d.preCheckoutQuery),
		ShippingQuery:    off(d.shippingQuery),
		MaxConcurrent:    d.concurrency,
	}
}

// validate refuses a negative or over-long deadline, and what relay.New
// would take as "the default": a zero concurrency.
func (d *deadlineFlags) validate() error {
	for _, f := range []struct {
		name string
		v    time.Duration
	}{
		{"deadline-callback-query", d.callbackQuery}, {"deadline-inline-query", d.inlineQuery},
		{"deadline-pre-checkout-query", d.preCheckoutQuery}, {"deadline-shipping-query", d.shippingQuery},
	} {
		if f.v < 0 || f.v > intake.MaxDeadline {
			return &usageError{msg: fmt.Sprintf("--%s is %v: want up to %v, or 0 for no deadline", f.name, f.v, intake.MaxDeadline), hint: "Run 'tgrelay help serve' for usage."}
		}
	}
	if d.concurrency == 0 {
		return serveUsageError(&relay.ConfigError{Field: "Deadlines.MaxConcurrent", Err: fmt.Errorf("is 0: want 1 to %d", intake.MaxMaxConcurrent)})
	}
	return nil
}
