package intake_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A retry that would be due exactly at the update's deadline answers
// nobody: the failure ends the update expired at once, reported as
// expiring, rather than scheduling a retry that would only expire.
func TestRetryDueAtTheDeadlineExpires(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var rec recorder
		r := newRunner(t, intake.Config{
			Store:   store,
			Handler: func(context.Context, intake.Update) error { return errBoom },
			// The failure is at the update's arrival (the clock stands
			// still), so the retry would be due exactly at its deadline.
			RetryFunc: func(error, int) (time.Duration, bool) { return intake.DefaultCallbackQueryDeadline, true },
			Observer: intake.Observer{
				FailureFunc: func(f intake.Failure) { rec.add("failure %d expiring=%v", f.Attempt, f.Expiring) },
				ExpireFunc:  func(e intake.Expiry) { rec.add("expired %d/%d", e.UpdateID, e.Attempt) },
			},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		idle(t, r)
		if got, want := rec.get(), []string{"failure 1 expiring=true", "expired 1/1"}; !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		if got := row(t, store, 1); !got.Expired() || got.Attempts != 1 {
			t.Fatalf("row %+v, want expired after its first attempt", got)
		}
	})
}

// An expiry is reported to ExpireFunc, not to SettleFunc, though the row
// is settled abandoned.
func TestExpiryIsNoSettlementForTheObserver(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		r := newRunner(t, intake.Config{
			Store:   memstore.New(),
			Handler: func(context.Context, intake.Update) error { return errBoom },
			// A retry due at the deadline: the failure ends the update
			// expired.
			RetryFunc: func(error, int) (time.Duration, bool) { return intake.DefaultCallbackQueryDeadline, true },
			Observer: intake.Observer{
				SettleFunc: func(id intake.Identity, s intake.State) { rec.add("settled %d %s", id.UpdateID, s) },
				ExpireFunc: func(e intake.Expiry) { rec.add("expired %d", e.UpdateID) },
			},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		idle(t, r)
		if got, want := rec.get(), []string{"expired 1"}; !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}

// A handler that succeeded disarms its update's late call at once, even
// while its completion takes long to commit: LateFunc declines only what
// was not answered.
func TestNoLateCallAfterSuccessWhileTheCompletionCommits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.SettleFunc = func(ctx context.Context, id intake.Identity, s intake.Settlement) (bool, error) {
			time.Sleep(intake.DefaultCallbackQueryDeadline) // a slow commit, past the margin
			return store.Store.Settle(ctx, id, s)
		}
		var late recorder
		r := newRunner(t, intake.Config{
			Store:         store,
			LeaseDuration: time.Minute,
			Handler:       func(context.Context, intake.Update) error { return nil },
			Deadlines: intake.Deadlines{LateFunc: func(ctx context.Context, u intake.Update) {
				late.add("late %d", u.ID)
			}},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		idle(t, r)
		if got := late.get(); len(got) != 0 {
			t.Fatalf("late calls %q for an update its handler answered", got)
		}
	})
}

// Updates with a deadline have MaxQueued of their own, and no more: with
// it reached, a further one is left in the store.
func TestDeadlineLaneRespectsMaxQueued(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		release := make(chan struct{})
		r := newRunner(t, intake.Config{
			Store:     store,
			MaxQueued: 1,
			Handler: func(ctx context.Context, u intake.Update) error {
				<-release
				return nil
			},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		mustAccept(t, r, callbackQuery(2, 8), intake.Accepted)
		synctest.Wait()
		got := row(t, store, 2)
		close(release)
		if got.State != intake.StatePending {
			t.Fatalf("update 2 is %q while the deadline lane's MaxQueued (1) was reached, want pending", got.State)
		}
	})
}

// Under strict chat order an update with a deadline is recorded without
// its chat key, so the store does not hold it behind its chat's failed
// message.
func TestStrictOrderDoesNotHoldADeadlineUpdate(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var handled recorder
		r := newRunner(t, intake.Config{
			Store:     store,
			ChatOrder: intake.ChatOrderStrict,
			Handler: func(ctx context.Context, u intake.Update) error {
				handled.add("%d", u.ID)
				if u.ID == 1 {
					return errBoom
				}
				return nil
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return time.Hour, true },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 7), intake.Accepted)
		idle(t, r) // the message waits for its retry, holding chat 7
		mustAccept(t, r, callbackQuery(2, 7), intake.Accepted)
		idle(t, r)
		if got, want := handled.get(), []string{"1", "2"}; !slices.Equal(got, want) {
			t.Fatalf("handled %q, want %q: the callback query was held behind its chat", got, want)
		}
	})
}

// The share of MaxQueued of ordinary updates does not count the updates
// with a deadline (they have their own), and does count the exhaustions
// being delivered.
func TestOrdinaryShareOfMaxQueued(t *testing.T) {
	t.Parallel()
	t.Run("deadline updates do not fill it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := memstore.New()
			release := make(chan struct{})
			r := newRunner(t, intake.Config{
				Store:     store,
				MaxQueued: 1,
				Handler: func(ctx context.Context, u intake.Update) error {
					if u.ID == 1 {
						<-release
					}
					return nil
				},
			})
			start(t, r)
			mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
			mustAccept(t, r, msg(2, 8), intake.Accepted)
			synctest.Wait()
			got := row(t, store, 2)
			close(release)
			if got.State != intake.StateCompleted {
				t.Fatalf("message is %q beside a callback query with MaxQueued 1, want completed", got.State)
			}
		})
	})
	t.Run("deliveries fill it", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			store := memstore.New()
			release := make(chan struct{})
			r := newRunner(t, intake.Config{
				Store:     store,
				MaxQueued: 1,
				Handler: func(ctx context.Context, u intake.Update) error {
					if u.ID == 1 {
						return intake.Abandon(errBoom)
					}
					return nil
				},
				ExhaustionHandler: func(context.Context, intake.Exhaustion) error {
					<-release
					return nil
				},
			})
			start(t, r)
			mustAccept(t, r, msg(1, 7), intake.Accepted)
			synctest.Wait() // update 1's exhaustion is being delivered
			mustAccept(t, r, msg(2, 8), intake.Accepted)
			synctest.Wait()
			got := row(t, store, 2)
			close(release)
			if got.State != intake.StatePending {
				t.Fatalf("update 2 is %q while a delivery took MaxQueued (1), want pending", got.State)
			}
		})
	})
}

// A closing runner makes no late call: the update's row stays in the store
// for whoever handles it next.
func TestNoLateCallWhileClosing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var late recorder
		r := newRunner(t, intake.Config{
			Store:         memstore.New(),
			LeaseDuration: time.Minute,
			Handler: func(ctx context.Context, u intake.Update) error {
				<-release // ignores its context
				return nil
			},
			Deadlines: intake.Deadlines{LateFunc: func(ctx context.Context, u intake.Update) {
				late.add("late %d", u.ID)
			}},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		synctest.Wait()
		closed := make(chan error, 1)
		go func() { closed <- r.Close(context.Background()) }()
		synctest.Wait()
		time.Sleep(intake.DefaultCallbackQueryDeadline - intake.DefaultDeadlineMargin) // the late call's time
		synctest.Wait()
		close(release)
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		if got := late.get(); len(got) != 0 {
			t.Fatalf("late calls %q while closing, want none", got)
		}
	})
}

// An expiry the store refuses to record (the attempt lost its row) is no
// expiry: ExpireFunc is not told, and the loss is.
func TestRefusedExpiryIsNotReported(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := newFaultStore()
		store.SettleFunc = func(context.Context, intake.Identity, intake.Settlement) (bool, error) { return false, nil }
		var rec recorder
		r := newRunner(t, intake.Config{
			Store:     store,
			Handler:   func(context.Context, intake.Update) error { return errBoom },
			RetryFunc: func(error, int) (time.Duration, bool) { return intake.DefaultCallbackQueryDeadline, true },
			Observer: intake.Observer{
				ExpireFunc:    func(e intake.Expiry) { rec.add("expired %d", e.UpdateID) },
				LeaseLostFunc: func(id intake.Identity) { rec.add("lost %d", id.UpdateID) },
			},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		idle(t, r)
		if got, want := rec.get(), []string{"lost 1"}; !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
	})
}
