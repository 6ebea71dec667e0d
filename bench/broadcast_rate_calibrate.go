package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
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

// percentile returns the p-quantile (nearest rank) of ds, or zero.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(p*float64(len(ds))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startCPUProfile writes a CPU profile to path until the returned func is
// called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
