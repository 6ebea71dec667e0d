package main

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(prev) })

	tuneGC(func(name string) (string, bool) {
		if name == "GOGC" {
			return "50", true
		}
		return "", false
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the GC percent became %d; want it left at 100", got)
	}

	tuneGC(func(string) (string, bool) { return "", false })
	if got := debug.SetGCPercent(100); got != serveGCPercent {
		t.Errorf("without GOGC, the GC percent is %d; want %d", got, serveGCPercent)
	}
}
