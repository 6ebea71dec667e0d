package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// intakeBatchTrace wraps a store and records the size and the wall time of
// every AddBatch, to show how group commit forms its batches. It hides the
// store's optional capabilities, which the accept benchmark does not use.
type intakeBatchTrace struct {
	intake.Store

	mu    sync.Mutex
	sizes []int
	took  []time.Duration
	gaps  []time.Duration // from the end of one AddBatch to the start of the next
	last  time.Time
}

func (t *intakeBatchTrace) AddBatch(ctx context.Context, us []intake.AddRequest) ([]intake.AddResult, error) {
	t0 := time.Now()
	out, err := t.Store.AddBatch(ctx, us)
	d := time.Since(t0)
	t.mu.Lock()
	if !t.last.IsZero() {
		t.gaps = append(t.gaps, t0.Sub(t.last))
	}
	t.last = t0.Add(d)
	t.sizes = append(t.sizes, len(us))
	t.took = append(t.took, d)
	t.mu.Unlock()
	return out, err
}

func (t *intakeBatchTrace) reset() {
	t.mu.Lock()
	t.sizes, t.took, t.gaps, t.last = nil, nil, nil, time.Time{}
	t.mu.Unlock()
}

func (t *intakeBatchTrace) report(w io.Writer, label string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.took) == 0 {
		return
	}
	took := slices.Clone(t.took)
	slices.Sort(took)
	sizes := slices.Clone(t.sizes)
	slices.Sort(sizes)
	var sum int
	for _, s := range t.sizes {
		sum += s
	}
	var busy time.Duration
	for _, d := range t.took {
		busy += d
	}
	gaps := slices.Clone(t.gaps)
	slices.Sort(gaps)
	fmt.Fprintf(w, "  %s: %d AddBatch calls, %.2f s in AddBatch; rows per batch mean %.1f, p50 %d, max %d\n",
		label, len(took), busy.Seconds(), float64(sum)/float64(len(sizes)), sizes[len(sizes)/2], sizes[len(sizes)-1])
	fmt.Fprintf(w, "    AddBatch ms p50 %s p90 %s p99 %s max %s; idle between batches ms p50 %s p90 %s\n",
		intakeMS(intakeQuantile(took, 0.5)), intakeMS(intakeQuantile(took, 0.9)), intakeMS(intakeQuantile(took, 0.99)), intakeMS(took[len(took)-1]),
		intakeMS(intakeQuantile(gaps, 0.5)), intakeMS(intakeQuantile(gaps, 0.9)))
}
