package main

import (
	"log/slog"
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

func TestMemoryStoreFromEnv(t *testing.T) {
	closed := false
	st := &openedStore{kind: "sqlite", close: func() { closed = true }}
	if got := memoryStoreFromEnv(st, slog.New(slog.DiscardHandler)); got != st || closed {
		t.Fatalf("without %s: got a %q store (closed %v); want the one opened, open", envMemoryStore, got.kind, closed)
	}
	t.Setenv(envMemoryStore, "1")
	got := memoryStoreFromEnv(st, slog.New(slog.DiscardHandler))
	if got.kind != "memory" || !closed {
		t.Fatalf("with %s=1: got a %q store, opened one closed %v; want memory, closed", envMemoryStore, got.kind, closed)
	}
}
