package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestBroadcastCLIShort runs the scenario small, with the same build on
// both sides: every send of each run is counted, and the RESULT line
// carries the keys BENCHMARKS.md quotes.
func TestBroadcastCLIShort(t *testing.T) {
	ctx, bin, _ := buildForTest(t)
	var out bytes.Buffer
	if err := runBroadcastCLI(ctx, []string{"-bin", bin, "-bin-b", bin, "-recipients", "40", "-rate", "400", "-rounds", "1"}, &out); err != nil {
		t.Fatalf("broadcast-cli: %v\n%s", err, out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "RESULT broadcast-cli ") {
		t.Fatalf("last line %q, want the RESULT line\n%s", last, out.String())
	}
	for _, key := range []string{"tgrelay_sends_per_s=", "tgrelay_share=", "tgrelay_b_share=", "b_paired_ratio="} {
		if !strings.Contains(last, key) {
			t.Errorf("RESULT line lacks %s: %s", key, last)
		}
	}
}
