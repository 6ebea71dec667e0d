package main

import (
	"io"
	"testing"
	"time"
)

// TestSoakShort runs the soak's code path for seconds at a tiny rate on
// SQLite: every update answered, no reply sent twice, rows pruned by the
// retention while serve runs.
func TestSoakShort(t *testing.T) {
	ctx, bin, dir := buildForTest(t)
	cfg := soakConfig{duration: 4 * time.Second, rate: 25, chats: 5, retention: time.Second,
		sample: time.Second, warmup: 2 * time.Second, mix: soakMix{reply: 0.3, failOnce: 0.1, poison: 0.05}}
	res, err := soakRun(ctx, bin, dir, "sqlite", cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.lost != 0 || res.doubles != 0 {
		t.Fatalf("%d lost, %d replies sent twice: want 0", res.lost, res.doubles)
	}
	if res.replies == 0 || res.exhaustions == 0 || len(res.samples) == 0 {
		t.Fatalf("replies %d, exhaustions %d, samples %d: the app's paths were not exercised", res.replies, res.exhaustions, len(res.samples))
	}
	if res.pruned <= 0 {
		t.Fatalf("no update row pruned with a 1s retention")
	}
}
