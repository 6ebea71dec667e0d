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

// callbackQuery is the body of a callback query pressed on a message of
// chat.
func callbackQuery(id, chat int64) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"callback_query":{"id":"q%d","from":{"id":%d},"message":{"message_id":1,"chat":{"id":%d,"type":"private"}},"data":"x"}}`, id, id, chat, chat)
}

// deadlineStores runs f with a store that records claimed (memstore) and
// one that adds, then claims (faultStore).
func deadlineStores(t *testing.T, f func(t *testing.T, store intake.Store, admin interface {
	Get(context.Context, int64) (intake.Row, bool, error)
})) {
	t.Run("claim on add", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { s := memstore.New(); f(t, s, s) })
	})
	t.Run("add then claim", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) { s := newFaultStore(); f(t, s, s) })
	})
}

func TestUpdateKindAndDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex // updates with a deadline run beside MaxConcurrent
		got := map[int64]intake.Update{}
		r := newRunner(t, intake.Config{
			Store: memstore.New(),
			Handler: func(ctx context.Context, u intake.Update) error {
				mu.Lock()
				defer mu.Unlock()
				got[u.ID] = u
				return nil
			},
			MaxConcurrent: 1,
		})
		start(t, r)
		received := time.Now()
		for _, b := range []string{
			string(callbackQuery(1, 5)),
			`{"update_id":2,"inline_query":{"id":"i","from":{"id":5},"query":"q","offset":""}}`,
			`{"update_id":3,"pre_checkout_query":{"id":"p","from":{"id":5},"currency":"XTR","total_amount":1,"invoice_payload":"o"}}`,
			`{"update_id":4,"shipping_query":{"id":"s","from":{"id":5},"invoice_payload":"o"}}`,
			`{"update_id":5,"message":{"message_id":9,"chat":{"id":5,"type":"private"},"successful_payment":{"currency":"XTR","total_amount":1,"invoice_payload":"o","telegram_payment_charge_id":"c"}}}`,
		} {
			mustAccept(t, r, []byte(b), intake.Accepted)
		}
		idle(t, r)
		for id, want := range map[int64]struct {
			kind string
			d    time.Duration
		}{
			1: {"callback_query", 15 * time.Second},
			2: {"inline_query", 10 * time.Second},
			3: {"pre_checkout_query", 10 * time.Second},
			4: {"shipping_query", 10 * time.Second},
			5: {"message", 0},
		} {
			u := got[id]
			var wantDeadline time.Time
			if want.d > 0 {
				wantDeadline = received.Add(want.d).Truncate(time.Millisecond)
			}
			if u.Kind != want.kind || !u.Deadline.Equal(wantDeadline) || u.ReceivedAt.IsZero() {
				t.Errorf("update %d: kind %q deadline %v received %v, want %q %v", id, u.Kind, u.Deadline, u.ReceivedAt, want.kind, wantDeadline)
			}
		}
	})
}

// A callback query is forwarded while its chat's message waits for its
// retry, and while every ordinary handler slot is taken.
func TestDeadlineUpdateRunsOnItsOwnLane(t *testing.T) {
	t.Parallel()
	deadlineStores(t, func(t *testing.T, store intake.Store, admin interface {
		Get(context.Context, int64) (intake.Row, bool, error)
	}) {
		var rec recorder
		release := make(chan struct{})
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				rec.add("%d %s", u.ID, u.Kind)
				switch u.ID {
				case 1:
					return errBoom // chat 7's message fails: its retry holds the chat
				case 2:
					<-release // chat 8's message takes the only ordinary slot
				}
				return nil
			},
			MaxConcurrent: 1,
		})
		start(t, r)
		mustAccept(t, r, msg(1, 7), intake.Accepted)
		synctest.Wait()
		mustAccept(t, r, msg(2, 8), intake.Accepted)
		synctest.Wait()
		mustAccept(t, r, callbackQuery(3, 7), intake.Accepted)
		synctest.Wait()
		if got, want := rec.get(), []string{"1 message", "2 message", "3 callback_query"}; !slices.Equal(got, want) {
			t.Fatalf("handled %q, want %q: the callback query ran while its chat was held and the slot taken", got, want)
		}
		if got := row(t, admin, 1); got.State != intake.StateFailed {
			t.Fatalf("message 1 is %q, want failed, waiting for its retry", got.State)
		}
		close(release)
		idle(t, r)
	})
}

// A callback query whose handler keeps failing is retried while a retry
// can be due before its deadline, then ends expired: no exhaustion, no
// delivery, one late call and one expiry.
func TestFailingDeadlineUpdateExpires(t *testing.T) {
	t.Parallel()
	deadlineStores(t, func(t *testing.T, store intake.Store, admin interface {
		Get(context.Context, int64) (intake.Row, bool, error)
	}) {
		var rec recorder
		var exhaustions, failures atomic.Int32
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				rec.add("attempt at %v", time.Since(u.ReceivedAt).Round(time.Second))
				return errBoom
			},
			ExhaustionHandler: func(ctx context.Context, e intake.Exhaustion) error {
				exhaustions.Add(1)
				return nil
			},
			Deadlines: intake.Deadlines{LateFunc: func(ctx context.Context, u intake.Update) {
				dl, _ := ctx.Deadline()
				rec.add("late %d %s at %v, ctx until %v", u.ID, u.Kind, time.Since(u.ReceivedAt).Round(time.Second), dl.Sub(u.ReceivedAt))
			}},
			Observer: intake.Observer{
				ExpireFunc: func(e intake.Expiry) {
					rec.add("expired %d/%d %s", e.UpdateID, e.Attempt, e.Kind)
				},
				FailureFunc: func(f intake.Failure) { failures.Add(1) },
			},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		time.Sleep(time.Hour)
		synctest.Wait()
		// Attempts at 0 s and 5 s; the next backoff (20 s) would land past
		// the 15 s deadline, so the update ends at once, and the late call
		// (declining it) is made then, not 2 s before the deadline.
		want := []string{"attempt at 0s", "attempt at 5s", "expired 1/2 callback_query", "late 1 callback_query at 5s, ctx until 15s"}
		if got := rec.get(); !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		if n := exhaustions.Load(); n != 0 {
			t.Fatalf("%d exhaustions delivered, want none: an expiry is no exhaustion", n)
		}
		if n := failures.Load(); n != 2 {
			t.Fatalf("%d failures observed, want 2", n)
		}
		got := row(t, admin, 1)
		if !got.Expired() || got.StateName() != "expired" || got.Unacknowledged() || got.SettledAt.IsZero() ||
			!strings.Contains(got.Error, "callback_query") || !strings.HasSuffix(got.Error, "last failure: boom") {
			t.Fatalf("row %+v: want expired (abandoned, settled) with the last failure", got)
		}
	})
}

// A handler still running Margin before the deadline gets the late call
// beside it; its context ends at the deadline and the update expires.
func TestLateCallBeforeDeadlineWhileHandlerRuns(t *testing.T) {
	t.Parallel()
	deadlineStores(t, func(t *testing.T, store intake.Store, admin interface {
		Get(context.Context, int64) (intake.Row, bool, error)
	}) {
		var rec recorder
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				<-ctx.Done()
				rec.add("handler ended at %v: %v", time.Since(u.ReceivedAt).Round(time.Millisecond), ctx.Err())
				return ctx.Err()
			},
			Deadlines: intake.Deadlines{PreCheckoutQuery: 4 * time.Second, Margin: time.Second,
				LateFunc: func(ctx context.Context, u intake.Update) {
					rec.add("late at %v", time.Since(u.ReceivedAt).Round(time.Millisecond))
				}},
			Observer: intake.Observer{ExpireFunc: func(e intake.Expiry) { rec.add("expired %d", e.UpdateID) }},
		})
		start(t, r)
		mustAccept(t, r, []byte(`{"update_id":1,"pre_checkout_query":{"id":"p","from":{"id":5},"currency":"XTR","total_amount":1,"invoice_payload":"o"}}`), intake.Accepted)
		time.Sleep(time.Minute)
		synctest.Wait()
		want := []string{"late at 3s", "handler ended at 4s: context deadline exceeded", "expired 1"}
		if got := rec.get(); !slices.Equal(got, want) {
			t.Fatalf("events %q, want %q", got, want)
		}
		if !row(t, admin, 1).Expired() {
			t.Fatal("row not expired")
		}
	})
}

// An update found after its deadline (recorded, then the process died)
// is expired by its claim without running the handler; a message
// recorded with it is handled.
func TestSweptUpdatePastDeadlineExpiresUnhandled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		long := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
		for _, in := range []intake.Incoming{
			{UpdateID: 1, Body: callbackQuery(1, 7), ReceivedAt: long},
			{UpdateID: 2, Body: msg(2, 7), ReceivedAt: long, Chat: "7"},
		} {
			if ok, err := store.Add(t.Context(), in); !ok || err != nil {
				t.Fatalf("Add: %v %v", ok, err)
			}
		}
		var rec recorder
		var late atomic.Int32
		r := newRunner(t, intake.Config{
			Store:     store,
			Handler:   func(ctx context.Context, u intake.Update) error { rec.add("handled %d", u.ID); return nil },
			Deadlines: intake.Deadlines{LateFunc: func(context.Context, intake.Update) { late.Add(1) }},
		})
		start(t, r)
		idle(t, r)
		synctest.Wait()
		if got, want := rec.get(), []string{"handled 2"}; !slices.Equal(got, want) {
			t.Fatalf("handled %q, want %q", got, want)
		}
		if got := row(t, store, 1); !got.Expired() || got.Attempts != 1 || strings.Contains(got.Error, "last failure") {
			t.Fatalf("row 1 %+v, want expired on its first claim, with no failure", got)
		}
		if late.Load() != 0 {
			t.Fatalf("late called %d times for an update past its deadline", late.Load())
		}
	})
}

// With its deadline off, a callback query is an ordinary update: held
// behind its chat's failed message.
func TestDeadlineOffHoldsTheChat(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var rec recorder
		r := newRunner(t, intake.Config{
			Store: memstore.New(),
			Handler: func(ctx context.Context, u intake.Update) error {
				rec.add("%d at %v", u.ID, time.Since(u.ReceivedAt).Round(time.Second))
				if u.ID == 1 && time.Since(u.ReceivedAt) < time.Second {
					return errBoom
				}
				return nil
			},
			Deadlines: intake.Deadlines{CallbackQuery: -1},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 7), intake.Accepted)
		mustAccept(t, r, callbackQuery(2, 7), intake.Accepted)
		time.Sleep(time.Minute)
		synctest.Wait()
		if got, want := rec.get(), []string{"1 at 0s", "1 at 5s", "2 at 5s"}; !slices.Equal(got, want) {
			t.Fatalf("handled %q, want %q", got, want)
		}
	})
}

// A non-retryable failure of an update with a deadline is an exhaustion,
// as for any update: the app refused it, time did not run out.
func TestDeadlineUpdateAbandonedIsExhausted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		r := newRunner(t, intake.Config{
			Store:           store,
			Handler:         func(ctx context.Context, u intake.Update) error { return intake.Abandon(errBoom) },
			KeepExhaustions: true,
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		idle(t, r)
		if got := row(t, store, 1); got.Expired() || !got.Unacknowledged() {
			t.Fatalf("row %+v, want an unacknowledged exhaustion", got)
		}
	})
}

func TestDeadlinesConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		d    intake.Deadlines
		want string
	}{
		{intake.Deadlines{CallbackQuery: -2}, "Deadlines.CallbackQuery"},
		{intake.Deadlines{ShippingQuery: 2 * time.Hour}, "Deadlines.ShippingQuery"},
		{intake.Deadlines{Margin: -1}, "Deadlines.Margin"},
		{intake.Deadlines{MaxConcurrent: -1}, "Deadlines.MaxConcurrent"},
	} {
		_, err := intake.New(intake.Config{Store: memstore.New(), Handler: func(context.Context, intake.Update) error { return nil }, Deadlines: tc.d})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New with %+v: %v, want an error naming %s", tc.d, err, tc.want)
		}
	}
	d := intake.Deadlines{InlineQuery: -1, PreCheckoutQuery: 3 * time.Second}
	for kind, want := range map[string]time.Duration{"callback_query": 15 * time.Second, "inline_query": 0, "pre_checkout_query": 3 * time.Second, "message": 0, "": 0} {
		if got := d.For(kind); got != want {
			t.Errorf("For(%q) = %v, want %v", kind, got, want)
		}
	}
}

// refusingClaims refuses every claim, as when another process holds the
// update.
type refusingClaims struct{ *faultStore }

func (refusingClaims) Claim(context.Context, int64, intake.ClaimOpts) (intake.Identity, bool, error) {
	return intake.Identity{}, false, nil
}

func (refusingClaims) ClaimAs(context.Context, int64, intake.ClaimOpts, intake.ProcessClaim) (intake.Identity, bool, error) {
	return intake.Identity{}, false, nil
}

// An update whose claim is refused (another process has it) is not
// declined by this process: the late call is for updates this process
// ended unanswered or still holds.
func TestNoLateCallForAnUpdateClaimedElsewhere(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		var late, handled atomic.Int32
		r := newRunner(t, intake.Config{
			Store:     refusingClaims{newFaultStore()},
			Handler:   func(context.Context, intake.Update) error { handled.Add(1); return nil },
			Deadlines: intake.Deadlines{LateFunc: func(context.Context, intake.Update) { late.Add(1) }},
		})
		start(t, r)
		mustAccept(t, r, callbackQuery(1, 7), intake.Accepted)
		time.Sleep(time.Minute)
		synctest.Wait()
		if late.Load() != 0 || handled.Load() != 0 {
			t.Fatalf("late calls %d, handled %d; want neither for an update this process never claimed", late.Load(), handled.Load())
		}
	})
}
