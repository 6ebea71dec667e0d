package intake_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// A renewal the store confirmed moves the lease's deadline: when later
// renewals fail (store errors), the handler's context ends when the last
// confirmed lease ends, not when the first one would have.
func TestRenewedDeadlineEndsHandlerWhenRenewalsFail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		var renewals atomic.Int32
		store.RenewFunc = func(ctx context.Context, id intake.Identity, until, now time.Time) (bool, error) {
			if renewals.Add(1) == 1 {
				return store.Store.Renew(ctx, id, until, now)
			}
			return false, errBoom
		}
		var lostAfter time.Duration
		var cause error
		r := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			Handler: func(ctx context.Context, u intake.Update) error {
				t0 := time.Now()
				select {
				case <-ctx.Done():
				case <-time.After(10 * testLease):
				}
				lostAfter, cause = time.Since(t0), context.Cause(ctx)
				return errBoom
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		// The first renewal, at a quarter of the lease, confirmed the lease
		// through a quarter past its first end.
		want := testLease + testLease/4
		var lost *intake.OwnershipLostError
		if lostAfter != want || !errors.As(cause, &lost) {
			t.Fatalf("context ended after %v with %v, want after %v with OwnershipLostError", lostAfter, cause, want)
		}
	})
}

// An attempt loses its lease once: a refused renewal stops it, its
// renewals stop, and neither the lapse of the lease it last proved nor the
// refused settlement that follows reports the loss again.
func TestLeaseLostReportedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.RenewFunc = func(context.Context, intake.Identity, time.Time, time.Time) (bool, error) { return false, nil }
		var lost atomic.Int32
		r := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			Handler: func(ctx context.Context, u intake.Update) error {
				time.Sleep(2 * testLease) // ignores its context, past the lease's end
				return nil
			},
			Observer: intake.Observer{LeaseLostFunc: func(intake.Identity) { lost.Add(1) }},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if n := lost.Load(); n != 1 {
			t.Fatalf("LeaseLostFunc called %d times, want once", n)
		}
		// The handler ran for eight renewal periods; the refused renewal
		// was the last.
		if n := store.Calls("Renew"); n != 1 {
			t.Fatalf("%d renewals, want the refused one only: they stop once the lease was lost", n)
		}
	})
}

// A terminal failure the store refuses to record (an abandonment, or with
// exhaustions kept an exhaustion) means the attempt lost its row: the loss
// is reported, once.
func TestRefusedTerminalFailureReportsLoss(t *testing.T) {
	for _, keep := range []bool{false, true} {
		name := "abandon"
		if keep {
			name = "exhaust"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newFaultStore()
				store.SettleFunc = func(context.Context, intake.Identity, intake.Settlement) (bool, error) { return false, nil }
				store.ExhaustFunc = func(context.Context, intake.Identity, time.Time, string) (bool, error) { return false, nil }
				var lost atomic.Int32
				r := newRunner(t, intake.Config{
					Store:           store,
					KeepExhaustions: keep,
					Handler:         func(context.Context, intake.Update) error { return errBoom },
					RetryFunc:       func(error, int) (time.Duration, bool) { return 0, false },
					Observer:        intake.Observer{LeaseLostFunc: func(intake.Identity) { lost.Add(1) }},
				})
				start(t, r)
				mustAccept(t, r, msg(1, 1), intake.Accepted)
				idle(t, r)
				if n := lost.Load(); n != 1 {
					t.Fatalf("LeaseLostFunc called %d times, want once", n)
				}
			})
		})
	}
}

// The renewals of an attempt end when its handler returns: no renewal is
// sent for a settled row.
func TestRenewalsEndWithTheHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		r := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: testLease,
			Handler: func(ctx context.Context, u intake.Update) error {
				time.Sleep(testLease/4 + time.Millisecond) // past the first renewal
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		before := store.Calls("Renew")
		time.Sleep(4 * testLease)
		synctest.Wait()
		if after := store.Calls("Renew"); before != 1 || after != before {
			t.Fatalf("%d renewals while the handler ran, %d after it returned; want 1 and none", before, after-before)
		}
	})
}
