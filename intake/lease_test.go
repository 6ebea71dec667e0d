package intake_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

const testLease = 40 * time.Millisecond

// Port of reference test 10: a live handler's renewed lease keeps a second
// runner off it; a dead process's lapsed lease goes to a fresh runner.
func TestLiveLeaseKeepsOthersOffDeadLeaseLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var calls atomic.Int32
		a := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			Handler: func(ctx context.Context, u intake.Update) error {
				calls.Add(1)
				time.Sleep(3 * testLease) // a slow handler, renewing meanwhile
				return ctx.Err()
			},
		})
		b := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			PendingGrace:  time.Nanosecond,
			Handler: func(ctx context.Context, u intake.Update) error {
				calls.Add(1)
				return nil
			},
		})
		start(t, a)
		mustAccept(t, a, msg(1, 1), intake.Accepted)
		time.Sleep(3*testLease - time.Millisecond)
		if n := sweep(t, b); n != 0 {
			t.Fatalf("second runner took a live lease: sweep scheduled %d", n)
		}
		idle(t, a)
		if got := row(t, store, 1); got.State != intake.StateCompleted || calls.Load() != 1 {
			t.Fatalf("row %q after %d calls, want completed after 1", got.State, calls.Load())
		}

		// A dead process claimed update 2 and never came back.
		if _, err := store.Add(t.Context(), intake.Incoming{UpdateID: 2, Body: msg(2, 2), ReceivedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		dead, ok, err := store.Claim(t.Context(), 2, intake.ClaimOpts{Now: time.Now(), LeaseUntil: time.Now().Add(testLease), MaxAttempts: 5})
		if err != nil || !ok {
			t.Fatalf("dead claim: %v %v", ok, err)
		}
		time.Sleep(testLease + time.Millisecond)
		c := newRunner(t, intake.Config{Store: store, LeaseDuration: testLease, Handler: func(ctx context.Context, u intake.Update) error { return nil }})
		start(t, c)
		idle(t, c)
		got := row(t, store, 2)
		if got.State != intake.StateCompleted || got.Attempts != 2 || got.ClaimID == dead.ClaimID {
			t.Fatalf("row 2 = %q attempts %d, want completed by attempt 2 with a new claim id", got.State, got.Attempts)
		}
	})
}

// Port of reference test 11: owner loss cancels the old handler's context
// with an OwnershipLostError, and its fence cannot authorise a write after
// the reclaim.
func TestOwnerLossCancelsHandlerAndFenceRefusesStaleWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.RenewFunc = func(ctx context.Context, id intake.Identity, until, now time.Time) (bool, error) {
			if id.Attempt == 1 {
				return false, nil
			}
			return store.Store.Renew(ctx, id, until, now)
		}
		var (
			mu       sync.Mutex
			writes   []int
			cause    error
			lostAt   time.Duration
			t0       = time.Now()
			reclaim  = make(chan struct{})
			oldOwned = true
		)
		write := func(ctx context.Context, a intake.Attempt) {
			// Stands in for a domain write guarded by Owns in its transaction.
			ok, err := a.Owns(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err == nil && ok {
				writes = append(writes, a.Attempt)
			} else if a.Attempt == 1 {
				oldOwned = false
			}
		}
		handler := func(ctx context.Context, u intake.Update, a intake.Attempt) error {
			if a.Attempt == 1 {
				<-ctx.Done()
				mu.Lock()
				cause, lostAt = context.Cause(ctx), time.Since(t0)
				mu.Unlock()
				<-reclaim
				write(context.Background(), a)
				return ctx.Err()
			}
			write(ctx, a)
			return nil
		}
		a := newRunner(t, intake.Config{Store: store, LeaseDuration: testLease, AttemptHandler: handler})
		b := newRunner(t, intake.Config{Store: store, LeaseDuration: testLease, AttemptHandler: handler, PendingGrace: time.Nanosecond})
		start(t, a)
		mustAccept(t, a, msg(1, 1), intake.Accepted)
		time.Sleep(testLease + time.Millisecond)
		if n := sweep(t, b); n != 1 {
			t.Fatalf("replacement sweep scheduled %d, want 1", n)
		}
		idle(t, b)
		close(reclaim)
		idle(t, a)

		mu.Lock()
		defer mu.Unlock()
		var lost *intake.OwnershipLostError
		if !errors.As(cause, &lost) || lost.Identity.UpdateID != 1 || lost.Identity.Attempt != 1 {
			t.Fatalf("cause = %v, want OwnershipLostError for 1/1", cause)
		}
		if lostAt != testLease/4 {
			t.Errorf("ownership lost after %v, want at the first renewal (%v)", lostAt, testLease/4)
		}
		if len(writes) != 1 || writes[0] != 2 || oldOwned {
			t.Fatalf("writes %v (old owned %v), want only attempt 2's", writes, oldOwned)
		}
	})
}

// OwnershipLostError's message names the attempt, never the body.
func TestOwnershipLostErrorMessage(t *testing.T) {
	t.Parallel()
	err := &intake.OwnershipLostError{Identity: intake.Identity{UpdateID: 7, Attempt: 2, ClaimID: "c"}, Err: errBoom}
	if got, want := err.Error(), "intake: update 7 attempt 2 lost ownership: boom"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, errBoom) {
		t.Fatal("OwnershipLostError does not unwrap to its store error")
	}
}

// Port of reference test 12: a renewal answering after settlement changes
// nothing: no ownership loss, no store error.
func TestLateRenewalAfterSettlementChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func() (bool, error)
	}{
		{"refused", func() (bool, error) { return false, nil }},
		{"failed", func() (bool, error) { return false, errBoom }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaultStore()
				inFlight := make(chan struct{})
				answer := make(chan struct{})
				store.RenewFunc = func(ctx context.Context, id intake.Identity, until, now time.Time) (bool, error) {
					close(inFlight)
					<-answer // answers late, whatever its context says
					return tc.answer()
				}
				var events recorder
				var hctx context.Context
				r := newRunner(t, intake.Config{
					Store:         store,
					LeaseDuration: testLease,
					Handler: func(ctx context.Context, u intake.Update) error {
						hctx = ctx
						<-inFlight
						return nil
					},
					Observer: intake.Observer{
						LeaseLostFunc:  func(id intake.Identity) { events.add("lost") },
						StoreErrorFunc: func(s intake.Step, id int64, err error) { events.add("store error %s", s) },
					},
				})
				start(t, r)
				mustAccept(t, r, msg(1, 1), intake.Accepted)
				idle(t, r)
				close(answer)
				synctest.Wait()
				if got := events.get(); len(got) != 0 {
					t.Fatalf("events after a late renewal: %q", got)
				}
				var lost *intake.OwnershipLostError
				if errors.As(context.Cause(hctx), &lost) {
					t.Fatalf("handler context cause = %v after settlement", context.Cause(hctx))
				}
				if got := row(t, store, 1); got.State != intake.StateCompleted {
					t.Fatalf("row %q, want completed", got.State)
				}
			})
		})
	}
}

// Port of reference test 13: renewals are serialised, and the first
// lease's deadline cannot cancel an attempt whose renewal was granted.
func TestRenewalsSerialisedAndOldDeadlineCannotAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		var inFlight, peak, renewals atomic.Int32
		store.RenewFunc = func(ctx context.Context, id intake.Identity, until, now time.Time) (bool, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if renewals.Add(1) == 1 {
				time.Sleep(testLease / 2) // the first renewal is slow: ticks pass meanwhile
			}
			return store.Store.Renew(ctx, id, until, now)
		}
		var (
			errAtEnd error
			owned    bool
		)
		r := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
				time.Sleep(2 * testLease) // past the first lease's deadline
				errAtEnd = context.Cause(ctx)
				owned, _ = a.Owns(ctx)
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if errAtEnd != nil || !owned {
			t.Fatalf("after the first deadline: cause %v, owns %v; want no cause and owned", errAtEnd, owned)
		}
		if peak.Load() != 1 || renewals.Load() < 3 {
			t.Fatalf("peak in-flight renewals %d over %d renewals, want 1 over at least 3", peak.Load(), renewals.Load())
		}
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("row %q, want completed", got.State)
		}
	})
}

// A renewal that fails (a store error, not a refusal) keeps the last proven
// deadline: the handler's context ends when that lease ends.
func TestRenewErrorKeepsLastProvenDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.RenewFunc = func(context.Context, intake.Identity, time.Time, time.Time) (bool, error) {
			return false, errBoom
		}
		var steps recorder
		var lostAfter time.Duration
		var cause error
		r := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			Handler: func(ctx context.Context, u intake.Update) error {
				t0 := time.Now()
				<-ctx.Done()
				lostAfter, cause = time.Since(t0), context.Cause(ctx)
				return ctx.Err()
			},
			Observer: intake.Observer{StoreErrorFunc: func(s intake.Step, id int64, err error) {
				if errors.Is(err, errBoom) {
					steps.add("%s", s)
				}
			}},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		var lost *intake.OwnershipLostError
		if lostAfter != testLease || !errors.As(cause, &lost) {
			t.Fatalf("context ended after %v with %v, want after the lease (%v) with OwnershipLostError", lostAfter, cause, testLease)
		}
		if got := steps.get(); len(got) < 3 || got[0] != "renew" {
			t.Fatalf("store errors %q, want renew errors reported", got)
		}
	})
}

// Port of reference test 14: a terminal failure after owner loss is
// reported as retrying, since the reclaim runs the update again.
func TestTerminalFailureAfterOwnerLossReportsRetrying(t *testing.T) {
	for _, durable := range []bool{false, true} {
		name := "abandon"
		if durable {
			name = "exhaust"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaultStore()
				store.RenewFunc = func(context.Context, intake.Identity, time.Time, time.Time) (bool, error) { return false, nil }
				var failures recorder
				var attempts []int
				cfg := intake.Config{
					Store:         store,
					LeaseDuration: testLease,
					PendingGrace:  time.Nanosecond,
					AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
						attempts = append(attempts, a.Attempt)
						if a.Attempt == 1 {
							<-ctx.Done()
							time.Sleep(testLease) // the lease lapses before the handler gives up
							return errBoom
						}
						return nil
					},
					RetryFunc: func(error, int) (time.Duration, bool) { return 0, false },
					Observer: intake.Observer{FailureFunc: func(f intake.Failure) {
						failures.add("%d retrying=%v", f.Attempt, f.Retrying)
					}},
				}
				if durable {
					cfg.ExhaustionHandler = func(context.Context, intake.Exhaustion) error {
						t.Error("exhaustion delivered for an attempt that lost its row")
						return nil
					}
				}
				r := newRunner(t, cfg)
				start(t, r)
				mustAccept(t, r, msg(1, 1), intake.Accepted)
				idle(t, r)
				if got := failures.get(); len(got) != 1 || got[0] != "1 retrying=true" {
					t.Fatalf("failures %q, want [1 retrying=true]", got)
				}
				if n := sweep(t, r); n != 1 {
					t.Fatalf("reclaim sweep scheduled %d, want 1", n)
				}
				idle(t, r)
				if len(attempts) != 2 || attempts[1] != 2 {
					t.Fatalf("attempts %v, want [1 2]", attempts)
				}
			})
		})
	}
}

// Port of reference test 24: a store that fails a step is reported, and the
// update is not lost.
func TestStoreFailureReportedAndUpdateNotLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		var settles atomic.Int32
		store.SettleFunc = func(ctx context.Context, id intake.Identity, s intake.Settlement) (bool, error) {
			if settles.Add(1) == 1 {
				return false, errBoom
			}
			return store.Store.Settle(ctx, id, s)
		}
		var steps recorder
		var calls atomic.Int32
		r := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			Handler:       func(context.Context, intake.Update) error { calls.Add(1); return nil },
			Observer:      intake.Observer{StoreErrorFunc: func(s intake.Step, id int64, err error) { steps.add("%s %d", s, id) }},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if got := steps.get(); len(got) != 1 || got[0] != "settle 1" {
			t.Fatalf("store errors %q, want [settle 1]", got)
		}
		time.Sleep(testLease + time.Millisecond)
		if n := sweep(t, r); n != 1 {
			t.Fatalf("sweep after the lease lapsed scheduled %d, want 1", n)
		}
		idle(t, r)
		if calls.Load() != 2 {
			t.Fatalf("handler called %d times, want 2 (at least once)", calls.Load())
		}
	})
}

// Port of reference test 6: each attempt gets a new identity.
func TestRetryGetsNewIdentity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var ids []intake.Identity
		var leases []time.Duration
		r := newRunner(t, intake.Config{
			Store: memstore.New(),
			AttemptHandler: func(ctx context.Context, u intake.Update, a intake.Attempt) error {
				ids = append(ids, a.Identity)
				leases = append(leases, time.Until(a.LeaseUntil()))
				if a.Attempt == 1 {
					return errBoom
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return 0, true },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		sweep(t, r)
		idle(t, r)
		if len(ids) != 2 || ids[0].Attempt != 1 || ids[1].Attempt != 2 || ids[0].ClaimID == "" ||
			ids[1].ClaimID == "" || ids[0].ClaimID == ids[1].ClaimID || ids[0].UpdateID != 1 {
			t.Fatalf("identities %+v, want attempts 1 and 2 with distinct claim ids", ids)
		}
		if leases[0] != intake.DefaultLeaseDuration {
			t.Fatalf("LeaseUntil is %v away, want the lease duration", leases[0])
		}
	})
}

var _ = strings.Contains
