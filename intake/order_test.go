package intake_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// A retry runs in this process at its due time, not at the next sweep: a
// 429 with retry_after 1 runs again 1 s later although the sweep runs every
// 30 s.
func TestRetryRunsAtItsDueTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		calls := make(chan time.Time, 4)
		n := 0
		r := newRunner(t, intake.Config{
			Store: store, // default SweepInterval: 30 s
			Handler: func(context.Context, intake.Update) error {
				calls <- time.Now()
				n++
				if n == 1 {
					return &botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests: retry after 1", RetryAfter: time.Second}
				}
				return nil
			},
		})
		start(t, r)
		t0 := time.Now()
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		<-calls
		if second := <-calls; second.Sub(t0) != time.Second {
			t.Fatalf("retry ran after %v, want 1s (Telegram's retry_after)", second.Sub(t0))
		}
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("row = %q, want completed", got.State)
		}
	})
}

// orderRun accepts "one" and "two" in chat 1 and "other" in chat 2; "one"
// fails once with a 1 s retry. It returns the handled order.
func orderRun(t *testing.T, outOfOrder bool) []string {
	var rec recorder
	failed := false
	t0 := time.Now() // the bubble's clock moves only when every goroutine waits
	r := newRunner(t, intake.Config{
		Store:           memstore.New(),
		RetryOutOfOrder: outOfOrder,
		Handler: func(_ context.Context, u intake.Update) error {
			name := map[int64]string{1: "one", 2: "two", 3: "other"}[u.ID]
			rec.add("%s@%v", name, time.Since(t0).Round(time.Millisecond))
			if u.ID == 1 && !failed {
				failed = true
				return errBoom
			}
			return nil
		},
		RetryFunc: func(error, int) (time.Duration, bool) { return time.Second, true },
	})
	start(t, r)
	mustAccept(t, r, msg(1, 1), intake.Accepted)
	mustAccept(t, r, msg(2, 1), intake.Accepted)
	mustAccept(t, r, msg(3, 2), intake.Accepted)
	idle(t, r)
	time.Sleep(time.Second)
	synctest.Wait()
	idle(t, r)
	return rec.get()
}

// By default a failed update holds its chat's later updates until it
// succeeds: the chat sees "one" before "two". Other chats are not held.
// With RetryOutOfOrder the chat's later updates run while it waits.
func TestFailedUpdateHoldsItsChat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		got := orderRun(t, false)
		want := []string{"one@0s", "other@0s", "one@1s", "two@1s"}
		if !sameChatOrder(got, want) {
			t.Fatalf("handled %q, want %q", got, want)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		got := orderRun(t, true)
		want := []string{"one@0s", "two@0s", "other@0s", "one@1s"}
		if !sameChatOrder(got, want) {
			t.Fatalf("RetryOutOfOrder: handled %q, want %q", got, want)
		}
	})
}

// sameChatOrder compares the events with "other" (another chat, which runs
// in parallel) taken out, and checks "other" ran at once.
func sameChatOrder(got, want []string) bool {
	strip := func(s []string) []string {
		return slices.DeleteFunc(slices.Clone(s), func(e string) bool { return e == "other@0s" })
	}
	return slices.Contains(got, "other@0s") && slices.Equal(strip(got), strip(want))
}

// Close does not wait for a retry's due time: the held chat is dropped from
// memory and its rows stay in the store for the next start.
func TestCloseDoesNotWaitForHeldRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		r, err := intake.New(intake.Config{
			Store:     store,
			Handler:   func(_ context.Context, u intake.Update) error { return errBoom },
			RetryFunc: func(error, int) (time.Duration, bool) { return time.Hour, true },
		})
		if err != nil {
			t.Fatal(err)
		}
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		mustAccept(t, r, msg(2, 1), intake.Accepted)
		idle(t, r)
		t0 := time.Now()
		if err := r.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d != 0 {
			t.Fatalf("Close took %v with a retry held for an hour", d)
		}
		if got := row(t, store, 1); got.State != intake.StateFailed {
			t.Errorf("row 1 = %q, want failed (its retry waits in the store)", got.State)
		}
		if got := row(t, store, 2); got.State != intake.StatePending {
			t.Errorf("row 2 = %q, want pending (held behind 1, never run)", got.State)
		}
	})
}
