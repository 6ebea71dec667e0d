// Package backoff is tgrelay's one rule for waiting between retries: a
// capped exponential delay ([Capped]) and a sleep that ends early when its
// context does ([Sleep]).
//
// Every retry loop in the module (the intake runner's default policy,
// serve's retry policy, long polling, broadcast, the fake Telegram's webhook
// redelivery) takes its delay from a [Capped] and waits with [Sleep], so the
// arithmetic (overflow, caps, attempt numbering) is written and tested once.
// There is no jitter: every caller today wants a delay it can state in its
// documentation.
package backoff

import (
	"context"
	"time"
)

// DefaultFactor is the growth factor of a [Capped] whose Factor is zero.
const DefaultFactor = 2

// Capped is a capped exponential backoff: the delay after the first failure
// is Base, and each further failure multiplies it by Factor until it
// reaches Max. A Capped is a plain value, safe for concurrent use.
type Capped struct {
	// Base is the delay after the first failure. Zero or negative means no
	// delay at all (every Delay is zero).
	Base time.Duration
	// Factor multiplies the delay after each further failure. Zero means
	// [DefaultFactor]; 1 keeps the delay at Base; negative counts as zero.
	Factor int
	// Max caps the delay. Zero or negative means no cap beyond the largest
	// time.Duration (the growth saturates instead of overflowing).
	Max time.Duration
}

// Delay returns the wait after failure number attempt (counted from 1):
// Base × Factor^(attempt−1), capped at Max. An attempt below 1 counts as 1.
// It never overflows, whatever attempt is.
func (c Capped) Delay(attempt int) time.Duration {
	if c.Base <= 0 {
		return 0
	}
	ceiling := c.Max
	if ceiling <= 0 {
		ceiling = time.Duration(1<<63 - 1)
	}
	factor := time.Duration(c.Factor)
	if factor <= 0 {
		factor = DefaultFactor
	}
	d := min(c.Base, ceiling)
	for i := 1; i < attempt && d < ceiling && factor > 1; i++ {
		if d > ceiling/factor {
			return ceiling
		}
		d *= factor
	}
	return min(d, ceiling)
}

// Sleep waits d, or less when ctx ends first, and then returns
// context.Cause(ctx) (ctx.Err() for a context cancelled without a cause).
// It returns nil when the whole of d elapsed. A d of zero or less returns
// nil at once without looking at ctx, as time.Sleep(0) does.
//
// Sleep uses a timer, so it runs on a fake clock inside a testing/synctest
// bubble.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
