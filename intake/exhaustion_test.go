package intake_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// exhausted records update id in store as an unacknowledged exhaustion, as
// a process that gave up on it would have left it.
func exhausted(t *testing.T, store intake.Store, id int64, body []byte) intake.Identity {
	t.Helper()
	ctx := t.Context()
	now := time.Now()
	if _, err := store.Add(ctx, intake.Incoming{UpdateID: id, Body: body, ReceivedAt: now}); err != nil {
		t.Fatal(err)
	}
	ident, ok, err := store.Claim(ctx, id, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Minute), MaxAttempts: 1})
	if err != nil || !ok {
		t.Fatalf("claim %d: %v %v", id, ok, err)
	}
	if ok, err := store.Exhaust(ctx, ident, now, "terminal"); err != nil || !ok {
		t.Fatalf("exhaust %d: %v %v", id, ok, err)
	}
	return ident
}

// Port of reference test 15: a durable exhaustion survives a restart and is
// delivered until acknowledged, never run again as an attempt.
func TestDurableExhaustionDeliveredUntilAcknowledged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		ident := exhausted(t, store, 1, msg(1, 1))
		var acks atomic.Int32
		store.AckFunc = func(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
			if acks.Add(1) == 1 {
				return false, errBoom
			}
			return store.Store.AcknowledgeExhaustion(ctx, id, at)
		}
		var events recorder
		deliveries := 0
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(context.Context, intake.Update) error {
				events.add("handler ran")
				return nil
			},
			ExhaustionHandler: func(ctx context.Context, e intake.Exhaustion) error {
				deliveries++
				if e.Identity != ident || string(e.Body) != string(msg(1, 1)) || e.Error != "terminal" {
					t.Errorf("exhaustion %+v, want the stored one", e)
				}
				if deliveries == 1 {
					return errBoom
				}
				return nil
			},
			Observer: intake.Observer{
				ExhaustionFailureFunc: func(e intake.Exhaustion, err error) { events.add("delivery failed %d", e.UpdateID) },
				StoreErrorFunc:        func(s intake.Step, id int64, err error) { events.add("store error %s %d", s, id) },
				AcknowledgeFunc:       func(id intake.Identity) { events.add("acknowledged %d", id.UpdateID) },
			},
		})
		start(t, r)
		idle(t, r)
		if n := sweep(t, r); n != 1 {
			t.Fatalf("second sweep scheduled %d, want the unacknowledged exhaustion", n)
		}
		idle(t, r)
		if n := sweep(t, r); n != 1 {
			t.Fatalf("third sweep scheduled %d, want the unacknowledged exhaustion", n)
		}
		idle(t, r)
		if n := sweep(t, r); n != 0 {
			t.Fatalf("sweep after acknowledgement scheduled %d", n)
		}
		want := []string{"delivery failed 1", "store error settle 1", "acknowledged 1"}
		if got := events.get(); !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		if got := row(t, store, 1); !got.SettledAt.Equal(time.Now()) || got.Unacknowledged() {
			t.Fatalf("row after acknowledgement: %+v", got)
		}
	})
}

// Port of reference test 16: exhaustion paging reaches rows after a page
// whose deliveries keep failing.
func TestExhaustionPagingReachesRowsAfterFailingPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		for id := int64(1); id <= 101; id++ {
			exhausted(t, store, id, msg(id, id))
		}
		var mu sync.Mutex
		delivered := map[int64]int{}
		r := newRunner(t, intake.Config{
			Store:   store,
			Handler: nop,
			ExhaustionHandler: func(ctx context.Context, e intake.Exhaustion) error {
				mu.Lock()
				delivered[e.UpdateID]++
				mu.Unlock()
				if e.UpdateID <= 100 {
					return errBoom
				}
				return nil
			},
		})
		start(t, r)
		idle(t, r)
		if len(delivered) != 100 || delivered[101] != 0 {
			t.Fatalf("first pass delivered %d rows (101: %d), want rows 1..100", len(delivered), delivered[101])
		}
		if n := sweep(t, r); n != 1 {
			t.Fatalf("next sweep scheduled %d, want 1 (row 101)", n)
		}
		idle(t, r)
		if delivered[101] != 1 {
			t.Fatalf("row 101 delivered %d times, want 1", delivered[101])
		}
		if got := row(t, store, 101); got.Unacknowledged() {
			t.Fatal("row 101 still unacknowledged")
		}
	})
}

// An attempt that ends for good in durable mode is exhausted and delivered
// at once; Abandon skips the remaining attempts.
func TestExhaustionOfFailingAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		got := make(chan intake.Exhaustion, 2)
		var failures recorder
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(_ context.Context, u intake.Update) error {
				if u.ID == 2 {
					return intake.Abandon(fmt.Errorf("wrapped: %w", errBoom))
				}
				return errBoom
			},
			MaxAttempts:       1,
			ExhaustionHandler: func(_ context.Context, e intake.Exhaustion) error { got <- e; return nil },
			Observer: intake.Observer{FailureFunc: func(f intake.Failure) {
				failures.add("%d/%d retrying=%v", f.UpdateID, f.Attempt, f.Retrying)
			}},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		e := <-got
		if e.UpdateID != 1 || e.Attempt != 1 || e.ClaimID == "" || e.Error != "boom" || string(e.Body) != string(msg(1, 1)) || !e.ExhaustedAt.Equal(time.Now()) {
			t.Fatalf("exhaustion %+v", e)
		}
		r2 := newRunner(t, intake.Config{
			Store:             store,
			Handler:           func(context.Context, intake.Update) error { return intake.Abandon(errBoom) },
			ExhaustionHandler: func(_ context.Context, e intake.Exhaustion) error { got <- e; return nil },
		})
		start(t, r2)
		mustAccept(t, r2, msg(2, 2), intake.Accepted)
		idle(t, r2)
		if e := <-got; e.UpdateID != 2 || e.Attempt != 1 {
			t.Fatalf("abandoned update: exhaustion %+v, want update 2 after attempt 1", e)
		}
		if got := failures.get(); !slices.Equal(got, []string{"1/1 retrying=false"}) {
			t.Fatalf("failures %q", got)
		}
	})
}

// A row whose stored body is not an update (written by something other
// than Accept) is exhausted, or abandoned, without running the handler:
// never stuck.
func TestUnparsableStoredBody(t *testing.T) {
	for _, durable := range []bool{false, true} {
		t.Run(fmt.Sprintf("durable=%v", durable), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New()
				body := []byte(`{"update_id": "not a number"`)
				if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: 9, Body: body, ReceivedAt: time.Now()}); err != nil {
					t.Fatal(err)
				}
				got := make(chan intake.Exhaustion, 1)
				cfg := intake.Config{Store: store, Handler: func(context.Context, intake.Update) error {
					t.Error("handler ran for an unparsable body")
					return nil
				}}
				if durable {
					cfg.ExhaustionHandler = func(_ context.Context, e intake.Exhaustion) error { got <- e; return nil }
				}
				r := newRunner(t, cfg)
				start(t, r)
				idle(t, r)
				rw := row(t, store, 9)
				if rw.State != intake.StateAbandoned || rw.Error != intake.ErrUnparsableBody.Error() || rw.Attempts != 1 {
					t.Fatalf("row = %q %q after %d attempts", rw.State, rw.Error, rw.Attempts)
				}
				if durable {
					e := <-got
					if string(e.Body) != string(body) || rw.Unacknowledged() {
						t.Fatalf("exhaustion body %q, row unacknowledged %v", e.Body, rw.Unacknowledged())
					}
				}
			})
		})
	}
}

// The core suffices for every handler; strict chat order needs its
// capability.
func TestCapabilityRequirements(t *testing.T) {
	t.Parallel()
	plain := plainStore{memstore.New()}
	if _, err := intake.New(intake.Config{Store: plain, AttemptHandler: func(context.Context, intake.Update, intake.Attempt) error { return nil }}); err != nil {
		t.Fatalf("AttemptHandler with a core-only store: %v", err)
	}
	if _, err := intake.New(intake.Config{Store: plain, Handler: nop, ExhaustionHandler: func(context.Context, intake.Exhaustion) error { return nil }}); err != nil {
		t.Fatalf("ExhaustionHandler with a core-only store: %v", err)
	}
	if _, err := intake.New(intake.Config{Store: plain, Handler: nop, KeepExhaustions: true}); err != nil {
		t.Fatalf("KeepExhaustions with a core-only store: %v", err)
	}
	if _, err := intake.New(intake.Config{Store: plain, Handler: nop, ChatOrder: intake.ChatOrderStrict}); err == nil || !containsAll(err.Error(), "ChatOrder", "ChatOrderStore") {
		t.Fatalf("ChatOrderStrict with a core-only store: %v", err)
	}
}

// KeepExhaustions without a handler leaves terminal failures (attempts
// spent, abandoned, and a spend after a crash on the last attempt) as
// unacknowledged exhaustion records for operator tooling, delivered to
// nobody and never run again.
func TestKeepExhaustionsWithoutHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		var runs atomic.Int32
		r := newRunner(t, intake.Config{
			Store:           store,
			MaxAttempts:     1,
			KeepExhaustions: true,
			Handler: func(_ context.Context, u intake.Update) error {
				runs.Add(1)
				if u.ID == 2 {
					return intake.Abandon(errBoom)
				}
				return errBoom
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		idle(t, r)
		for range 3 {
			sweep(t, r)
			idle(t, r)
		}
		page, err := store.DueExhaustions(t.Context(), intake.ExhaustionQuery{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) != 2 || page[0].UpdateID != 1 || page[1].UpdateID != 2 || page[0].Error != "boom" || page[0].ClaimID == "" {
			t.Fatalf("kept exhaustions %+v, want updates 1 and 2 unacknowledged", page)
		}
		if n := runs.Load(); n != 2 {
			t.Fatalf("handler ran %d times, want 2 (an exhaustion is never run again)", n)
		}
		if n := store.Calls("DueExhaustions"); n != 1 {
			t.Fatalf("the runner listed exhaustions %d times (only the test's own call expected): nothing should deliver them", n-1)
		}
	})
}

// A store with the core only (no capability) handles, retries and
// abandons, every attempt under a claim id of its own.
func TestPlainStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		var ids []intake.Identity
		r := newRunner(t, intake.Config{
			Store:     plainStore{mem},
			Handler:   func(_ context.Context, u intake.Update) error { return errBoom },
			RetryFunc: func(error, int) (time.Duration, bool) { return 0, true },
			Observer: intake.Observer{
				ClaimFunc: func(id intake.Identity) { ids = append(ids, id) },
			},
			MaxAttempts: 2,
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		sweep(t, r)
		idle(t, r)
		if len(ids) != 2 || ids[1].Attempt != 2 || ids[0].ClaimID == "" || ids[1].ClaimID == ids[0].ClaimID {
			t.Fatalf("claims %+v, want attempts 1 and 2 under two claim ids", ids)
		}
		if got := row(t, mem, 1); got.State != intake.StateAbandoned {
			t.Fatalf("row %q, want abandoned", got.State)
		}
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !contains(s, sub) {
			return false
		}
	}
	return true
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// Exhaustion deliveries and attempts share the one MaxConcurrent bound.
func TestExhaustionDeliveriesShareConcurrencyBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		for id := int64(1); id <= 3; id++ {
			exhausted(t, store, id, msg(id, id))
		}
		for id := int64(4); id <= 6; id++ {
			if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: id, Body: msg(id, id), ReceivedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		var running, peak, done atomic.Int32
		work := func() {
			n := running.Add(1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			time.Sleep(time.Second)
			running.Add(-1)
			done.Add(1)
		}
		r := newRunner(t, intake.Config{
			Store:             store,
			MaxConcurrent:     2,
			Handler:           func(context.Context, intake.Update) error { work(); return nil },
			ExhaustionHandler: func(context.Context, intake.Exhaustion) error { work(); return nil },
		})
		start(t, r)
		idle(t, r)
		if peak.Load() != 2 || done.Load() != 6 {
			t.Fatalf("peak %d over %d handled, want 2 over 6", peak.Load(), done.Load())
		}
	})
}
