package forward_test

import (
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
)

func TestRetryAfterHeader(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"-5", 0},
		{"30", 30 * time.Second},
		{"abc", 0},
		{"1.5", 0},
		{"Sun, 29 Nov 2026 12:00:10 GMT", 10 * time.Second},
		{"Sun, 29 Nov 2026 11:00:00 GMT", 0},
		{"Mon, 30 Nov 2026 12:00:00 GMT", forward.MaxRetryAfter}, // a date is capped too
		{"99999999999999999999", 0},
		{"4000", forward.MaxRetryAfter},
	} {
		if got := forward.RetryAfterHeader(tc.in, now); got != tc.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func FuzzRetryAfterHeader(f *testing.F) {
	for _, s := range []string{"", "1", "-1", "Sun, 29 Nov 2026 12:00:10 GMT", "9223372036854775807"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d := forward.RetryAfterHeader(s, now)
		if d < 0 || d > forward.MaxRetryAfter {
			t.Fatalf("retryAfter(%q) = %v, outside 0..%v", s, d, forward.MaxRetryAfter)
		}
	})
}
