package main

import (
	"testing"
	"time"
)

// TestPairedRounds: pairedRounds counts the rounds the second build won and
// takes the median of the per-round ratios.
func TestPairedRounds(t *testing.T) {
	run := func(ups float64) relayResult {
		return relayResult{n: 1000, forwarded: time.Duration(1000 / ups * float64(time.Second))}
	}
	a := []relayResult{run(5000), run(4000), run(3000), run(6000)}
	b := []relayResult{run(5500), run(3600), run(3300), run(6600)}
	wins, ratio := pairedRounds(a, b)
	if wins != 3 {
		t.Errorf("wins = %d, want 3", wins)
	}
	// Per-round ratios 1.1, 0.9, 1.1, 1.1: the median of four is 1.1.
	if ratio < 1.099 || ratio > 1.101 {
		t.Errorf("median ratio = %.4f, want 1.1", ratio)
	}
	if w, r := pairedRounds(nil, b); w != 0 || r != 0 {
		t.Errorf("no rounds of a: %d, %v; want 0, 0", w, r)
	}
}
