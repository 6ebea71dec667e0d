package telegramtest

import (
	"testing"
	"time"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{Webhook: WebhookConfig{Backoff: time.Second, MaxBackoff: 5 * time.Second}}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		if got := s.backoff(i + 1); got != w {
			t.Errorf("backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	if got := s.backoff(1000); got != 5*time.Second {
		t.Errorf("backoff(1000) = %v, want the cap", got)
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	l := Limit{Count: 2, Per: time.Second}
	var w window
	t0 := time.Unix(0, 0)
	// Sends every 400 ms: 0 and 400 fit; 800 waits 200 ms (until 0 leaves
	// the window); 1200 fits (0 left); 1600 fits (400 left); 2000 waits
	// 200 ms for 1200 to leave.
	want := []time.Duration{0, 0, 200 * time.Millisecond, 0, 0, 200 * time.Millisecond}
	for i, wantWait := range want {
		now := t0.Add(time.Duration(i) * 400 * time.Millisecond)
		got := w.wait(now, l)
		if got != wantWait {
			t.Errorf("at %v: wait = %v, want %v", now.Sub(t0), got, wantWait)
		}
		if got == 0 {
			w.add(now, l)
		}
		if len(w.times) > l.Count {
			t.Fatalf("window keeps %d times, over its Count %d", len(w.times), l.Count)
		}
	}
}
