package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/broadcast"
)

// calibrationCalls and calibrationConcurrency shape the latency probe that
// sizes the window: that many sends, that many at once, to one chat that is
// not part of the audience.
const (
	calibrationCalls       = 200
	calibrationConcurrency = 20
)

// observeLatency returns the 90th percentile of the time one send takes
// against the fake, as the runs will see it (loopback HTTP, JSON, the fake's
// delay and this machine's scheduling).
func observeLatency(ctx context.Context, send func(context.Context, broadcast.Recipient) error, to broadcast.Recipient) (time.Duration, error) {
	ds := make([]time.Duration, calibrationCalls)
	errs := make([]error, calibrationCalls)
	next := make(chan int)
	var wg sync.WaitGroup
	for range calibrationConcurrency {
		wg.Go(func() {
			for i := range next {
				t := time.Now()
				errs[i] = send(ctx, to)
				ds[i] = time.Since(t)
			}
		})
	}
	for i := range calibrationCalls {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return 0, fmt.Errorf("calibration send: %w", err)
		}
	}
	return percentile(ds, 0.90), nil
}
