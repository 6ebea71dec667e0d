package intake_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		attempt int
		want    time.Duration
	}{
		{0, 5 * time.Second}, {1, 5 * time.Second}, {2, 20 * time.Second}, {3, 80 * time.Second},
		{4, 320 * time.Second}, {5, 15 * time.Minute}, {6, 15 * time.Minute}, {1000, 15 * time.Minute},
	} {
		if got := intake.Backoff(tc.attempt); got != tc.want {
			t.Errorf("Backoff(%d) = %v, want %v", tc.attempt, got, tc.want)
		}
	}
}

func TestDefaultRetry(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		err     error
		attempt int
		delay   time.Duration
		retry   bool
	}{
		{"plain error is retried with backoff", errBoom, 2, 20 * time.Second, true},
		{"rate limit waits retry_after", &botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests: retry after 60", RetryAfter: 60 * time.Second}, 1, 60 * time.Second, true},
		{"short retry_after is honoured, not the backoff", &botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests", RetryAfter: time.Second}, 2, time.Second, true},
		{"server error is retried", &botapi.APIError{Method: "sendMessage", Code: 502, Description: "Bad Gateway"}, 1, 5 * time.Second, true},
		{"invalid message is abandoned", &botapi.APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: can't parse entities"}, 1, 0, false},
		{"blocked user is abandoned", &botapi.APIError{Method: "sendMessage", Code: 403, Description: "Forbidden: bot was blocked by the user"}, 1, 0, false},
		{"unknown 400 has no evidence and is retried", &botapi.APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: something new"}, 1, 5 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, ok := intake.DefaultRetry(tc.err, tc.attempt)
			if d != tc.delay || ok != tc.retry {
				t.Fatalf("DefaultRetry = %v, %v; want %v, %v", d, ok, tc.delay, tc.retry)
			}
		})
	}
}

// Port of reference test 5: a failure is retried from the stored body when
// due; a refusal that repeating cannot fix is abandoned.
func TestFailureRetriedWhenDueAndPermanentRefusalAbandoned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var rec recorder
		calls := map[int64]int{}
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				calls[u.ID]++ // one handler at a time per chat; chats differ by id here but are serialised by idle below
				switch {
				case u.ID == 2:
					return &botapi.APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: can't parse entities"}
				case calls[u.ID] == 1:
					return errBoom
				}
				return nil
			},
			MaxConcurrent: 1,
			Observer: intake.Observer{FailureFunc: func(f intake.Failure) {
				rec.add("%d/%d retrying=%v", f.UpdateID, f.Attempt, f.Retrying)
			}},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		mustAccept(t, r, msg(2, 2), intake.Accepted)
		idle(t, r)
		if got, want := rec.get(), []string{"1/1 retrying=true", "2/1 retrying=false"}; !slices.Equal(got, want) {
			t.Fatalf("failures %q, want %q", got, want)
		}
		// The retry runs in this process when due, without a sweep.
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		if got := row(t, store, 1); got.State != intake.StateFailed || got.Attempts != 1 {
			t.Fatalf("row 1 = %q after %d attempts before its retry was due, want failed after 1", got.State, got.Attempts)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		idle(t, r)
		if calls[1] != 2 || calls[2] != 1 {
			t.Fatalf("calls = %v, want 1:2 2:1", calls)
		}
		if got := row(t, store, 1); got.State != intake.StateCompleted {
			t.Fatalf("row 1 state %q, want completed", got.State)
		}
		if got := row(t, store, 2); got.State != intake.StateAbandoned || got.Error != "telegram: sendMessage failed: 400 Bad Request: can't parse entities" {
			t.Fatalf("row 2 = %q %q, want abandoned with Telegram's refusal", got.State, got.Error)
		}
		time.Sleep(time.Hour)
		if n := sweep(t, r); n != 0 {
			t.Fatalf("sweep an hour later scheduled %d", n)
		}
	})
}

// Port of reference test 7: an update stops after MaxAttempts.
func TestUpdateStopsAfterMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		var rec recorder
		r := newRunner(t, intake.Config{
			Store:       store,
			Handler:     func(ctx context.Context, u intake.Update) error { return errBoom },
			RetryFunc:   func(err error, attempt int) (time.Duration, bool) { return 0, true },
			MaxAttempts: 2,
			Observer: intake.Observer{FailureFunc: func(f intake.Failure) {
				rec.add("%d retrying=%v", f.Attempt, f.Retrying)
			}},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r) // the retry, due at once, runs in this process
		if got, want := rec.get(), []string{"1 retrying=true", "2 retrying=false"}; !slices.Equal(got, want) {
			t.Fatalf("failures %q, want %q", got, want)
		}
		if n := sweep(t, r); n != 0 {
			t.Fatalf("sweep after the last attempt scheduled %d", n)
		}
		if got := row(t, store, 1); got.State != intake.StateAbandoned || got.Error != "boom" {
			t.Fatalf("row = %q %q, want abandoned boom", got.State, got.Error)
		}
	})
}

// Counterpart of reference test 8: the policy and the observer see the
// handler's own error, and the store keeps its message.
func TestPolicySeesHandlersOwnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		type myErr struct{ error }
		var seen []error
		r := newRunner(t, intake.Config{
			Store:   store,
			Handler: func(ctx context.Context, u intake.Update) error { return myErr{errBoom} },
			RetryFunc: func(err error, attempt int) (time.Duration, bool) {
				seen = append(seen, err)
				return time.Minute, true
			},
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		var me myErr
		if len(seen) != 1 || !errors.As(seen[0], &me) {
			t.Fatalf("policy saw %v, want the handler's myErr", seen)
		}
		got := row(t, store, 1)
		if got.State != intake.StateFailed || got.Error != "boom" || !got.DueAt.Equal(time.Now().Add(time.Minute)) {
			t.Fatalf("row = %q %q due %v, want failed boom due in a minute", got.State, got.Error, got.DueAt)
		}
	})
}

// A panicking policy, or one answering a negative delay, cannot wedge a
// chat line: the default backoff is used and the next update of the chat
// runs.
func TestRetryPolicyIsGuarded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy func(error, int) (time.Duration, bool)
	}{
		{"panic", func(error, int) (time.Duration, bool) { panic("policy bug") }},
		{"negative delay", func(error, int) (time.Duration, bool) { return -time.Second, true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New()
				var rec recorder
				failed := false
				r := newRunner(t, intake.Config{
					Store: store,
					Handler: func(ctx context.Context, u intake.Update) error {
						rec.add("handled %d", u.ID)
						if u.ID == 1 && !failed {
							failed = true
							return errBoom
						}
						return nil
					},
					RetryFunc: tc.policy,
				})
				start(t, r)
				t0 := time.Now()
				mustAccept(t, r, msg(1, 1), intake.Accepted)
				mustAccept(t, r, msg(2, 1), intake.Accepted)
				idle(t, r)
				got := row(t, store, 1)
				if got.State != intake.StateFailed || !got.DueAt.Equal(t0.Add(intake.Backoff(1))) {
					t.Fatalf("row 1 = %q due %v, want failed due after Backoff(1)", got.State, got.DueAt.Sub(t0))
				}
				time.Sleep(intake.Backoff(1))
				synctest.Wait()
				idle(t, r)
				if got, want := rec.get(), []string{"handled 1", "handled 1", "handled 2"}; !slices.Equal(got, want) {
					t.Fatalf("events %q, want %q", got, want)
				}
			})
		})
	}
}

// Handler-controlled outcomes override the policy.
func TestHandlerOutcomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		r := newRunner(t, intake.Config{
			Store: store,
			Handler: func(ctx context.Context, u intake.Update) error {
				switch u.ID {
				case 1:
					return intake.Abandon(errBoom)
				case 2:
					return intake.RetryLater(errBoom, 42*time.Second)
				case 3:
					return intake.RetryLater(errBoom, 1000*time.Hour)
				}
				panic("handler bug")
			},
			RetryFunc: func(error, int) (time.Duration, bool) { return time.Second, true },
		})
		start(t, r)
		t0 := time.Now()
		for id := int64(1); id <= 4; id++ {
			mustAccept(t, r, msg(id, id), intake.Accepted)
		}
		idle(t, r)
		if got := row(t, store, 1); got.State != intake.StateAbandoned || got.Error != "boom" {
			t.Errorf("Abandon: row = %q %q, want abandoned boom", got.State, got.Error)
		}
		if got := row(t, store, 2); got.State != intake.StateFailed || !got.DueAt.Equal(t0.Add(42*time.Second)) {
			t.Errorf("RetryAfter: row = %q due %v, want failed due in 42s", got.State, got.DueAt.Sub(t0))
		}
		if got := row(t, store, 3); !got.DueAt.Equal(t0.Add(intake.MaxRetryDelay)) {
			t.Errorf("RetryAfter beyond the limit: due %v, want MaxRetryDelay", got.DueAt.Sub(t0))
		}
		if got := row(t, store, 4); got.State != intake.StateFailed || got.Error != "intake: handler panicked: handler bug" {
			t.Errorf("panic: row = %q %q, want failed with the panic", got.State, got.Error)
		}
		var ab *intake.AbandonError
		var ra *intake.RetryLaterError
		if !errors.As(intake.Abandon(errBoom), &ab) || !errors.Is(ab, errBoom) ||
			!errors.As(intake.RetryLater(errBoom, time.Second), &ra) || ra.Delay != time.Second || !errors.Is(ra, errBoom) {
			t.Errorf("outcome errors do not match with errors.As/Is")
		}
	})
}
