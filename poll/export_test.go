package poll

import "time"

// Backoff exposes the wait after failures consecutive failures.
func (p *Poller) Backoff(failures int) time.Duration { return p.backoff(failures) }

// Classify exposes the fatal-error classification.
var Classify = classify
