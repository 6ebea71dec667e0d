package intake_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// faultStore wraps a memstore with optional per-method hooks and counters.
// A nil hook passes the call through. It has memstore's capabilities, but
// records every add unclaimed, as a store may answer a claimed add it
// could not claim: its tests drive the add-then-claim path and the
// AddBatch hooks. claimingStore (claim_on_add_test.go) drives the
// claimed-add path.
type faultStore struct {
	*memstore.Store

	mu           sync.Mutex
	calls        map[string]int
	batchSizes   []int
	DueFunc      func(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error)
	AddBatchFunc func(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error)
	RenewFunc    func(ctx context.Context, id intake.Identity, leaseUntil, now time.Time) (bool, error)
	SettleFunc   func(ctx context.Context, id intake.Identity, s intake.Settlement) (bool, error)
	ExhaustFunc  func(ctx context.Context, id intake.Identity, at time.Time, errText string) (bool, error)
	AckFunc      func(ctx context.Context, id intake.Identity, at time.Time) (bool, error)
}

func newFaultStore() *faultStore {
	return &faultStore{Store: memstore.New(), calls: map[string]int{}}
}

func (s *faultStore) count(name string) {
	s.mu.Lock()
	s.calls[name]++
	s.mu.Unlock()
}

// Calls returns how many times the named method was called.
func (s *faultStore) Calls(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[name]
}

func (s *faultStore) BatchSizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.batchSizes...)
}

func (s *faultStore) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	s.count("Due")
	if s.DueFunc != nil {
		return s.DueFunc(ctx, q)
	}
	return s.Store.Due(ctx, q)
}

func (s *faultStore) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	s.count("Add")
	return s.Store.Add(ctx, u)
}

// AddBatch records reqs unclaimed through AddBatchFunc, or memstore.
func (s *faultStore) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	s.count("AddBatch")
	unclaimed := make([]intake.AddRequest, len(reqs))
	for i, r := range reqs {
		unclaimed[i] = intake.AddRequest{Incoming: r.Incoming}
	}
	s.mu.Lock()
	s.batchSizes = append(s.batchSizes, len(reqs))
	s.mu.Unlock()
	if s.AddBatchFunc != nil {
		return s.AddBatchFunc(ctx, unclaimed)
	}
	return s.Store.AddBatch(ctx, unclaimed)
}

// AddBatchAs is AddBatch: the adds are recorded unclaimed, so no process
// takes them.
func (s *faultStore) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, _ intake.ProcessClaim) ([]intake.AddResult, error) {
	return s.AddBatch(ctx, reqs)
}

func (s *faultStore) Renew(ctx context.Context, id intake.Identity, leaseUntil, now time.Time) (bool, error) {
	s.count("Renew")
	if s.RenewFunc != nil {
		return s.RenewFunc(ctx, id, leaseUntil, now)
	}
	return s.Store.Renew(ctx, id, leaseUntil, now)
}

func (s *faultStore) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	s.count("Settle")
	if s.SettleFunc != nil {
		return s.SettleFunc(ctx, id, st)
	}
	return s.Store.Settle(ctx, id, st)
}

func (s *faultStore) Exhaust(ctx context.Context, id intake.Identity, at time.Time, errText string) (bool, error) {
	s.count("Exhaust")
	if s.ExhaustFunc != nil {
		return s.ExhaustFunc(ctx, id, at, errText)
	}
	return s.Store.Exhaust(ctx, id, at, errText)
}

func (s *faultStore) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	s.count("AcknowledgeExhaustion")
	if s.AckFunc != nil {
		return s.AckFunc(ctx, id, at)
	}
	return s.Store.AcknowledgeExhaustion(ctx, id, at)
}

// plainStore hides every optional capability: the core only.
type plainStore struct{ intake.Store }

// newRunner builds a runner and closes it at the end of the test.
func newRunner(t *testing.T, cfg intake.Config) *intake.Runner {
	t.Helper()
	r, err := intake.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// msg is the body of a message update in chat.
func msg(id, chat int64) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"chat":{"id":%d,"type":"private"},"text":"hi"}}`, id, id, chat)
}

func mustAccept(t *testing.T, r *intake.Runner, body []byte, want intake.Acceptance) {
	t.Helper()
	got, err := r.Accept(t.Context(), body)
	if err != nil {
		t.Fatalf("Accept(%s): %v", body, err)
	}
	if got != want {
		t.Fatalf("Accept(%s) = %v, want %v", body, got, want)
	}
}

func idle(t *testing.T, r *intake.Runner) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	if err := r.Idle(ctx); err != nil {
		t.Fatalf("Idle: %v", err)
	}
}

func sweep(t *testing.T, r *intake.Runner) int {
	t.Helper()
	n, err := r.Sweep(t.Context())
	if err != nil {
		t.Fatalf("Sweep: %v", err)
	}
	return n
}

func start(t *testing.T, r *intake.Runner) {
	t.Helper()
	if err := r.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
}

func row(t *testing.T, s interface {
	Get(context.Context, int64) (intake.Row, bool, error)
}, id int64) intake.Row {
	t.Helper()
	r, ok, err := s.Get(context.Background(), id)
	if err != nil || !ok {
		t.Fatalf("Get(%d) = %v, %v", id, ok, err)
	}
	return r
}

// recorder collects events from handlers and observers.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func (s *faultStore) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	s.count("DueExhaustions")
	return s.Store.DueExhaustions(ctx, q)
}
