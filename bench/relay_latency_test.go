package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestRelayLatencyShort runs the relay-latency scenario at a low rate for
// a moment (SQLite only) and checks that every variant forwarded every
// update and that the RESULT line carries the keys BENCHMARKS.md quotes.
func TestRelayLatencyShort(t *testing.T) {
	ctx, bin, _ := buildForTest(t)
	var out bytes.Buffer
	if err := runRelayLatency(ctx, []string{"-bin", bin, "-pg=false", "-rates", "50", "-duration", "200ms", "-rounds", "1"}, &out); err != nil {
		t.Fatalf("relay-latency: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "RESULT relay-latency ") {
		t.Fatalf("last line %q, want the RESULT line\n%s", last, out.String())
	}
	for _, key := range []string{"fsync_p50_ms=", "fsync_p99_ms=", "sqlite_50_p50_ms=", "sqlite_50_added_p50_ms=", "sqlite_50_goal_p50=", "non_durable_50_p99_ms="} {
		if !strings.Contains(last, key) {
			t.Errorf("RESULT line lacks %s: %s", key, last)
		}
	}
}
