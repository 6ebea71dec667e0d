package main

import (
	"context"
	"io"
	"os"
	"sync"
	"testing"
	"time"
)

// The short versions of the crash scenarios: a few kills, a few hundred
// updates or recipients (crash-pg's three processes and cluster take too
// long for a test). They share one build of the tgrelay binary and are
// skipped with -short.

var binDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tgrelay-bench-test-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

var buildOnce = sync.OnceValues(func() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return buildTgrelay(ctx, binDir, "", io.Discard)
})

func buildForTest(t *testing.T) (context.Context, string, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and kills the tgrelay binary")
	}
	t.Parallel()
	bin, err := buildOnce()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx, bin, t.TempDir()
}

func TestCrashServeShort(t *testing.T) {
	ctx, bin, dir := buildForTest(t)
	res, err := crashServeRun(ctx, bin, dir, 200, 100, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.kills < 2 || res.lost != 0 || res.delivered != 200 || res.notCompleted != 0 {
		t.Fatalf("%+v: want 2+ kills, nothing lost, every update delivered and completed", res)
	}
}

func TestCrashBroadcastShort(t *testing.T) {
	ctx, bin, dir := buildForTest(t)
	res, err := crashBroadcastRun(ctx, bin, dir, 150, 60, 2, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.kills < 1 || res.twiceNotUncertain != 0 || res.status.Pending != 0 || res.once+res.never+res.twice != 150 {
		t.Fatalf("%+v: want kills, no unrecorded second copy, nothing pending", res)
	}
}
