package intake_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// BenchmarkAcceptAndHandle is the runner's own cost per update, as serve
// pays it under load, without a database: 40 callers (Telegram's default
// max_connections) each Accept an update of one of 2,000 chats, as the
// webhook does, and a handler that returns at once handles it; memstore
// records it. One op is one update accepted, claimed on add, handled and
// completed. It reports the process's CPU time per op (cpu-µs/op) beside
// the allocations, so a change to the runner's path can be measured
// without bench relay's noise.
func BenchmarkAcceptAndHandle(b *testing.B) {
	var handled atomic.Int64
	r, err := intake.New(intake.Config{
		Store: memstore.New(),
		// The callers accept without a network between them and the
		// runner, so they can outrun the handlers for a while. A queue
		// that fills would leave updates in the store for a catch-up
		// sweep, and memstore's sweep reads every row: this measures
		// the runner's path, so neither the sweep nor the backlog
		// engages.
		SweepInterval: intake.MaxSweepInterval,
		MaxQueued:     intake.MaxMaxQueued,
		Handler: func(context.Context, intake.Update) error {
			handled.Add(1)
			return nil
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := r.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := r.Close(cctx); err != nil {
			b.Error(err)
		}
	})
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"date":1772355600,"chat":{"id":%d,"type":"private"},"from":{"id":%d,"is_bot":false,"first_name":"A"},"text":"hello there"}}`,
			i+1, i+1, 1000+i%2000, 1000+i%2000)
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := testkit.ProcessCPU(b)
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
				if a, err := r.Accept(ctx, bodies[i-1]); err != nil || a != intake.Accepted {
					b.Errorf("Accept(update %d) = %v, %v", i, a, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	ictx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := r.Idle(ictx); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64((testkit.ProcessCPU(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
	b.StopTimer()
	if got := handled.Load(); got != int64(b.N) {
		b.Fatalf("handled %d updates of %d", got, b.N)
	}
}
