package sqlitestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// BenchmarkClaimedAddAndCompletion is the store's part of an update
// handled once under load, as serve writes it: 40 writers (Telegram's
// default max_connections) each add an update already claimed
// (AddBatchAs), then complete it with its attempt's record (Settle), while
// the others do the same, so the store's write group shares transactions
// among them. One op is one update.
func BenchmarkClaimedAddAndCompletion(b *testing.B) {
	ctx := context.Background()
	s := openBenchStore(ctx, b)
	const process = "bench-process"
	if ok, err := s.Register(ctx, process, time.Now().Add(time.Hour)); err != nil || !ok {
		b.Fatalf("Register: %v, %v", ok, err)
	}
	body := []byte(`{"update_id":1,"message":{"message_id":1,"date":1772355600,"chat":{"id":12345,"type":"private"},"from":{"id":12345,"is_bot":false,"first_name":"A"},"text":"hello there"}}`)
	runWriters(b, 40, func(w int, id int64) error {
		now := time.Now()
		res, err := s.AddBatchAs(ctx, []intake.AddRequest{{
			Incoming: intake.Incoming{UpdateID: id, Body: body, ReceivedAt: now, Chat: string(rune('a' + w))},
			Claim:    &intake.ClaimOpts{Now: now, LeaseUntil: now.Add(intake.DefaultLeaseDuration), MaxAttempts: intake.DefaultMaxAttempts},
		}}, intake.ProcessClaim{Process: process, MaxCrashes: intake.DefaultMaxCrashes})
		if err != nil || !res[0].Added {
			return fmt.Errorf("add %d: %v", id, err)
		}
		end := time.Now()
		ok, err := s.Settle(ctx, res[0].Identity, intake.Settlement{State: intake.StateCompleted, At: end, Attempt: &intake.AttemptRecord{
			Process: process, StartedAt: now, EndedAt: end, Outcome: intake.AttemptCompleted, Status: 200,
		}})
		if err != nil || !ok {
			return fmt.Errorf("settle %d: %v, %v", id, ok, err)
		}
		return nil
	})
}

// BenchmarkAdd is the store's part of an update accepted by the webhook
// under load, as intake-accept writes it: 100 writers each add a pending
// update of one of 1,000 chats (AddBatch), so the store's write group
// shares transactions among them. One op is one update.
func BenchmarkAdd(b *testing.B) {
	ctx := context.Background()
	s := openBenchStore(ctx, b)
	body := []byte(`{"update_id":1,"message":{"message_id":1,"date":1772355600,"chat":{"id":12345,"type":"private"},"from":{"id":12345,"is_bot":false,"first_name":"A"},"text":"hello there"}}`)
	runWriters(b, 100, func(_ int, id int64) error {
		res, err := s.AddBatch(ctx, []intake.AddRequest{{Incoming: intake.Incoming{UpdateID: id, Body: body, ReceivedAt: time.Now(), Chat: strconv.FormatInt(id*7919%1000, 10)}}})
		if err != nil || !res[0].Added {
			return fmt.Errorf("add %d: %v", id, err)
		}
		return nil
	})
}

// runWriters runs b.N ops, ids 1 to b.N, on writers goroutines at once
// (op's w is the writer's index), and reports the process's CPU time per
// op as cpu-µs/op. A writer stops at its first error.
func runWriters(b *testing.B, writers int, op func(w int, id int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := testkit.ProcessCPU(b)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := next.Add(1); id <= int64(b.N); id = next.Add(1) {
				if err := op(w, id); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64((testkit.ProcessCPU(b)-start).Microseconds())/float64(b.N), "cpu-µs/op")
}

// openBenchStore opens a store on a fresh file for a benchmark.
// TGRELAY_BENCH_DROP_INDEXES lists indexes to drop first (by suffix,
// comma-separated: _due,_chat), to measure what each costs; no statement
// the benchmarks run names one.
func openBenchStore(ctx context.Context, b *testing.B) *sqlitestore.Store {
	s, err := sqlitestore.Open(ctx, filepath.Join(b.TempDir(), "intake.db"), sqlitestore.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	for _, idx := range strings.FieldsFunc(os.Getenv("TGRELAY_BENCH_DROP_INDEXES"), func(r rune) bool { return r == ',' }) {
		if _, err := s.DB().ExecContext(ctx, `DROP INDEX "telegram_updates`+idx+`"`); err != nil {
			b.Fatal(err)
		}
	}
	return s
}
