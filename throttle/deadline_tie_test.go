package throttle_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/throttle"
)

// TestTurnAtTheDeadlineIsGranted: a call's deadline is the latest moment
// it may be granted (WithWaitDeadline), so a call whose turn comes at that
// very moment (its chat's pause, or the bot-wide window, ends then) is
// granted then, every time: neither refused at once (waiting lets it
// through) nor refused after its wait, whichever of the call's own timer
// and the limiter's wake-up runs first.
func TestTurnAtTheDeadlineIsGranted(t *testing.T) {
	t.Parallel()
	for range 20 { // the two timers fire at one instant, in either order
		synctest.Test(t, func(t *testing.T) {
			l := newLimiter(t, throttle.Config{MaxWait: 5 * time.Second})
			p, err := l.Wait(t.Context(), "sendMessage", 8)
			if err != nil {
				t.Fatal(err)
			}
			p.Limited(5 * time.Second)
			if d := send(t, l, 8); d != 5*time.Second {
				t.Fatalf("granted after %v, want the 5s pause, which ends at its deadline", d)
			}

			l = newLimiter(t, throttle.Config{Bot: throttle.Limit{Count: 1, Per: 3 * time.Second}, MaxWait: 10 * time.Second})
			send(t, l, 1)
			ctx := throttle.WithWaitDeadline(t.Context(), time.Now().Add(3*time.Second))
			start := time.Now()
			q, err := l.Wait(ctx, "sendMessage", 2)
			if err != nil {
				t.Fatalf("after %v: %v, want granted when the bot's window ends, at the deadline", time.Since(start), err)
			}
			q.Done()
			if d := time.Since(start); d != 3*time.Second {
				t.Fatalf("granted after %v, want 3s", d)
			}
		})
	}
}
