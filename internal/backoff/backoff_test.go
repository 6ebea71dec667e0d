package backoff_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
)

func TestDelay(t *testing.T) {
	const maxDuration = time.Duration(math.MaxInt64)
	tests := []struct {
		name    string
		c       backoff.Capped
		attempt int
		want    time.Duration
	}{
		{"first", backoff.Capped{Base: time.Second, Max: time.Minute}, 1, time.Second},
		{"below one counts as one", backoff.Capped{Base: time.Second, Max: time.Minute}, -7, time.Second},
		{"zero counts as one", backoff.Capped{Base: time.Second, Max: time.Minute}, 0, time.Second},
		{"doubles", backoff.Capped{Base: time.Second, Max: time.Minute}, 4, 8 * time.Second},
		{"capped", backoff.Capped{Base: time.Second, Max: time.Minute}, 7, time.Minute},
		{"cap not a power", backoff.Capped{Base: time.Second, Max: 5 * time.Second}, 4, 5 * time.Second},
		{"huge attempt", backoff.Capped{Base: time.Second, Max: time.Minute}, math.MaxInt, time.Minute},
		{"factor four", backoff.Capped{Base: 5 * time.Second, Factor: 4, Max: 15 * time.Minute}, 3, 80 * time.Second},
		{"factor one is constant", backoff.Capped{Base: time.Second, Factor: 1, Max: time.Minute}, 50, time.Second},
		{"negative factor is the default", backoff.Capped{Base: time.Second, Factor: -3, Max: time.Minute}, 3, 4 * time.Second},
		{"base above max", backoff.Capped{Base: time.Hour, Max: time.Minute}, 1, time.Minute},
		{"zero base", backoff.Capped{Max: time.Minute}, 5, 0},
		{"negative base", backoff.Capped{Base: -time.Second, Max: time.Minute}, 5, 0},
		{"no cap saturates", backoff.Capped{Base: time.Second}, 1000, maxDuration},
		{"no cap grows", backoff.Capped{Base: time.Second}, 3, 4 * time.Second},
		{"huge factor saturates", backoff.Capped{Base: time.Hour, Factor: math.MaxInt}, 3, maxDuration},
	}
	for _, tt := range tests {
		if got := tt.c.Delay(tt.attempt); got != tt.want {
			t.Errorf("%s: %+v.Delay(%d) = %v, want %v", tt.name, tt.c, tt.attempt, got, tt.want)
		}
	}
}

// Delay never decreases as attempts grow and never exceeds Max.
func TestDelayMonotonic(t *testing.T) {
	for _, c := range []backoff.Capped{
		{Base: time.Millisecond, Max: 30 * time.Second},
		{Base: 3 * time.Millisecond, Factor: 3, Max: 7 * time.Second},
		{Base: time.Nanosecond},
	} {
		prev := time.Duration(0)
		for a := 1; a < 200; a++ {
			d := c.Delay(a)
			if d < prev {
				t.Fatalf("%+v: Delay(%d) = %v < Delay(%d) = %v", c, a, d, a-1, prev)
			}
			if c.Max > 0 && d > c.Max {
				t.Fatalf("%+v: Delay(%d) = %v above Max", c, a, d)
			}
			prev = d
		}
	}
}

func TestSleepElapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := backoff.Sleep(t.Context(), 3*time.Second); err != nil {
			t.Fatalf("Sleep = %v, want nil", err)
		}
		if got := time.Since(start); got != 3*time.Second {
			t.Fatalf("slept %v, want 3s", got)
		}
	})
}

func TestSleepEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		err := backoff.Sleep(ctx, time.Hour)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Sleep = %v, want DeadlineExceeded", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Fatalf("slept %v, want 1s (the deadline)", got)
		}
	})
}

func TestSleepReturnsCause(t *testing.T) {
	cause := errors.New("server closed")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(cause)
	if err := backoff.Sleep(ctx, time.Hour); err != cause {
		t.Fatalf("Sleep = %v, want the cause %v", err, cause)
	}
}

func TestSleepZero(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{0, -time.Second} {
		if err := backoff.Sleep(ctx, d); err != nil {
			t.Errorf("Sleep(ended ctx, %v) = %v, want nil", d, err)
		}
	}
}
