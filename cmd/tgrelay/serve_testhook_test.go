package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
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

func TestTuneProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })

	set := func(name string) (string, bool) { return "1", name == "GOMAXPROCS" }
	if was := tuneProcs(set); was != 0 || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("with GOMAXPROCS set: returned %d, GOMAXPROCS %d; want 0 and left at 1", was, runtime.GOMAXPROCS(0))
	}
	unset := func(string) (string, bool) { return "", false }
	if was := tuneProcs(unset); was != 1 || runtime.GOMAXPROCS(0) != minGoProcs {
		t.Errorf("one P, GOMAXPROCS unset: returned %d, GOMAXPROCS %d; want 1 and %d", was, runtime.GOMAXPROCS(0), minGoProcs)
	}
	runtime.GOMAXPROCS(3)
	if was := tuneProcs(unset); was != 0 || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("three Ps: returned %d, GOMAXPROCS %d; want 0 and left at 3", was, runtime.GOMAXPROCS(0))
	}
}

// oneCPUPrefix is the command that runs a program on one CPU, as a
// one-CPU machine would (Go's default GOMAXPROCS is then 1). It skips
// the test without taskset, or when GOMAXPROCS is set in the test's
// environment, which the commands would keep.
func oneCPUPrefix(t *testing.T) []string {
	t.Helper()
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		t.Skip("needs taskset (util-linux) to run on one CPU")
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); set {
		t.Skip("GOMAXPROCS is set in the test's environment, and the commands would keep it")
	}
	return []string{taskset, "-c", "0"}
}

// TestServeOnOneCPURunsTwoPs runs serve as a one-CPU machine would (an
// affinity of one CPU, so Go's default GOMAXPROCS is 1): it says it
// raised GOMAXPROCS to 2, and leaves an explicit GOMAXPROCS alone.
func TestServeOnOneCPURunsTwoPs(t *testing.T) {
	t.Parallel()
	oneCPU := oneCPUPrefix(t)
	ep := newBotEndpoint(t, nil)
	const raised = "serve: GOMAXPROCS raised: with one P, a store write waiting for the disk would stop the webhook (set GOMAXPROCS to choose)"
	for _, c := range []struct {
		env  []string
		want int
	}{{nil, 1}, {[]string{"GOMAXPROCS=1"}, 0}} {
		db := filepath.Join(t.TempDir(), "relay.db")
		r := startServeProcUnder(t, oneCPU, c.env, "--db", db, "--listen", "127.0.0.1:0", "--forward", ep.url())
		if err := r.stop(t); err != nil {
			t.Fatalf("serve exit: %v\n%s", err, r.stderr)
		}
		ls := r.logLines(raised)
		if len(ls) != c.want {
			t.Fatalf("env %v: %d lines saying GOMAXPROCS was raised, want %d; stderr:\n%s", c.env, len(ls), c.want, r.stderr)
		}
		if c.want == 1 && (ls[0]["gomaxprocs"] != float64(minGoProcs) || ls[0]["was"] != float64(1)) {
			t.Errorf("the line says %v; want gomaxprocs=%d, was=1", ls[0], minGoProcs)
		}
	}
}

// TestBroadcastOnOneCPURunsTwoPs: broadcast run on one CPU says it runs
// two Ps, and keeps an explicit GOMAXPROCS.
func TestBroadcastOnOneCPURunsTwoPs(t *testing.T) {
	t.Parallel()
	oneCPU := oneCPUPrefix(t)
	dir := t.TempDir()
	audience := filepath.Join(dir, "audience.txt")
	if err := os.WriteFile(audience, []byte("1\n2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const raised = "broadcast: running Go code on 2 Ps, not 1, so that a journal commit waiting for the disk does not hold up the sends (set GOMAXPROCS to choose)"
	for i, c := range []struct {
		env  []string
		want bool
	}{{nil, true}, {[]string{"GOMAXPROCS=1"}, false}} {
		argv := append(slices.Clone(oneCPU), tgrelayBinary(t), "broadcast", "run", "--name", fmt.Sprint("b", i),
			"--state-dir", filepath.Join(dir, "state"), "--audience", audience, "--text", "hi", "--dry-run", "--progress", "none")
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = childEnv(c.env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("broadcast run: %v\n%s", err, out)
		}
		if got := strings.Contains(string(out), raised); got != c.want {
			t.Errorf("env %v: says it raised GOMAXPROCS: %v, want %v; output:\n%s", c.env, got, c.want, out)
		}
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

func TestTraceFromEnv(t *testing.T) {
	path := filepath.Join(t.TempDir(), "serve.trace")
	t.Setenv(envTrace, path)
	stop, err := startCPUProfileFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	stop()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// An execution trace begins with its format's header.
	if !strings.HasPrefix(string(b), "go 1.") {
		t.Errorf("%s holds %d bytes that do not begin as an execution trace", envTrace, len(b))
	}

	t.Setenv(envTrace, filepath.Join(t.TempDir(), "missing", "serve.trace"))
	if _, err := startCPUProfileFromEnv(); err == nil || !strings.Contains(err.Error(), envTrace) {
		t.Errorf("a trace path that cannot be created: err = %v; want an error naming %s", err, envTrace)
	}
}
