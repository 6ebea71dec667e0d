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

// intakeBatchTrace wraps a BatchStore and records the size and the wall time
// of every AddBatch, to show how group commit forms its batches.
type intakeBatchTrace struct {
	intake.Store
	bs intake.BatchStore

	mu    sync.Mutex
	sizes []int
	took  []time.Duration
}

func (t *intakeBatchTrace) AddBatch(ctx context.Context, us []intake.Incoming) ([]bool, error) {
	t0 := time.Now()
	out, err := t.bs.AddBatch(ctx, us)
	d := time.Since(t0)
	t.mu.Lock()
	t.sizes = append(t.sizes, len(us))
	t.took = append(t.took, d)
	t.mu.Unlock()
	return out, err
}

func (t *intakeBatchTrace) reset() {
	t.mu.Lock()
	t.sizes, t.took = nil, nil
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
	fmt.Fprintf(w, "  %s: %d AddBatch, size mean %.1f p50 %d max %d; commit ms p50 %s p90 %s p99 %s max %s\n",
		label, len(took), float64(sum)/float64(len(sizes)), sizes[len(sizes)/2], sizes[len(sizes)-1],
		intakeMS(intakeQuantile(took, 0.5)), intakeMS(intakeQuantile(took, 0.9)), intakeMS(intakeQuantile(took, 0.99)), intakeMS(took[len(took)-1]))
}
