package main

import (
	"io"
	"testing"
)

// TestCrashPaymentsShort kills serve and the payments app twice each
// under 200 payments: every one fulfilled exactly once, every update
// completed.
func TestCrashPaymentsShort(t *testing.T) {
	ctx, bin, dir := buildForTest(t)
	res, err := crashPaymentsRun(ctx, bin, dir, 200, 60, 4, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.serveKills < 2 || res.appKills < 2 || !res.exactlyOnce() || res.fulfilled != 200 {
		t.Fatalf("%+v: want 2+ kills of serve and of the app, every payment fulfilled exactly once and completed", res)
	}
}
