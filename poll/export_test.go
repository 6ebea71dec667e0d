package poll

import (
	"context"
	"time"
)

// Backoff exposes the wait after failures consecutive failures.
func (p *Poller) Backoff(failures int) time.Duration { return p.backoff(failures) }

// Classify exposes the fatal-error classification.
var Classify = classify

// Once runs one getUpdates and records its batch, as one turn of Run.
func (p *Poller) Once(ctx context.Context) error {
	batch, err := p.get(ctx, p.cfg.Timeout, p.cfg.Limit)
	if err != nil {
		return err
	}
	return p.record(ctx, batch)
}
