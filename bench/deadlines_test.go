package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// TestDeadlinesShort runs the deadlines scenario at tiny sizes (a load
// twice the app's capacity for a few seconds, 2 s deadlines) and checks
// that the RESULT line carries the keys BENCHMARKS.md quotes and that no
// payment was fulfilled twice (the scenario fails then). Without the
// deadline core in the binary it checks the baseline alone (serve without
// the --deadline-* flags), then skips.
func TestDeadlinesShort(t *testing.T) {
	ctx, bin, _ := buildForTest(t)
	tiny := []string{"-bin", bin, "-duration", "3s", "-rate", "40", "-work", "100ms", "-concurrency", "2", "-chats", "4",
		"-callback-rate", "3", "-pre-checkout-rate", "2", "-callback-deadline", "2s", "-pre-checkout-deadline", "2s"}
	check := func(out string, variants ...string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		last := lines[len(lines)-1]
		if !strings.HasPrefix(last, "RESULT deadlines ") {
			t.Fatalf("last line %q, want the RESULT line\n%s", last, out)
		}
		for _, v := range variants {
			for _, key := range []string{"_cb_in_time_pct=", "_pcq_in_time_pct=", "_pcq_timed_out=", "_cb_declined=", "_pcq_declined=", "_fulfilled_twice=0"} {
				if !strings.Contains(last, " "+v+key) {
					t.Errorf("RESULT line lacks %s%s: %s", v, key, last)
				}
			}
		}
		if !strings.Contains(out, "answered in time") {
			t.Errorf("no table:\n%s", out)
		}
	}
	var out bytes.Buffer
	err := runDeadlines(ctx, tiny, &out)
	if errors.Is(err, errNeedsDeadlineCore) {
		out.Reset()
		if err := runDeadlines(ctx, append(tiny, "-variants", "alike", "-alike-without-flags"), &out); err != nil {
			t.Fatalf("deadlines, baseline alone: %v\n%s", err, out.String())
		}
		check(out.String(), "alike")
		t.Skip("the baseline runs; the comparison needs the deadline core (issue 26 items 1-2) merged: " + err.Error())
	}
	if err != nil {
		t.Fatalf("deadlines: %v\n%s", err, out.String())
	}
	check(out.String(), "alike", "tgrelay")
	if !strings.Contains(out.String(), " goal=") {
		t.Errorf("RESULT line lacks goal=:\n%s", out.String())
	}
	t.Log(out.String())
}
