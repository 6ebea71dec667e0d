package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// buildDemoBinary builds this command into a temp dir: the demo runs serve
// as a child process of the binary, which a test binary cannot be.
func buildDemoBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tgrelay")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestDemoPasses(t *testing.T) {
	t.Parallel()
	bin := buildDemoBinary(t)
	var out bytes.Buffer
	err := runDemo(t.Context(), []string{"--relay-bin", bin, "--dir", t.TempDir()}, &out, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	text := out.String()
	for _, want := range []string{
		"relay     tgrelay serve started (pid ",
		"relay     Bot API gateway at http://127.0.0.1:",
		"then a simulated failure → 500, relay will retry",
		"the same reply again → answered from the journal (message ",
		"is poison → 400, refused for good",
		"→ 200, acknowledged",
		"7 replies in a row to Zoe in ",
		"attempt 1 (retried and completed since) → 409 stale, nothing sent",
		"relay     SIGKILL (pid ",
		"relay     restarted (pid ",
		"answered unknown from the journal (an earlier attempt's call was under way when the relay died), never resent → 200",
		"\nreport\n",
		"ok    recorded: 25 user messages, 25 rows in the store (0 missing)",
		"ok    settled: 24 completed, 1 abandoned; 0 pending/processing/failed, 0 unacknowledged exhaustions",
		"ok    replies: ",
		"of 23 messages (poison and burst excepted) got their echo exactly once; ",
		"0 wrong, 0 unexplained, 0 chats got a text twice",
		"completed on attempt 3 (bot saw attempts [1 2 3]); its reply reached the chat exactly once (2 retries answered from the journal)",
		"ok    burst: 7 replies in a row to one chat in ",
		"7 answered 200, 0 429s at the app; the ledger holds 7 of them",
		"ok    stale: a late reply from attempt 1 of update ",
		"was refused 409 (stale); 0 reached the chat",
		"exhausted, delivered to the exhaustion endpoint (true), acknowledged (true)",
		"(journaled without an outcome: true)",
		"12 of 12 completed and answered",
		"ok    sandbox: 0 updates left undelivered",
		"demo passed: 9 checks",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if strings.Contains(text, "FAIL") {
		t.Errorf("a check failed")
	}
	if t.Failed() {
		t.Log(text)
	}
}

func TestDemoRelayThatNeverStarts(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1) on this system")
	}
	var out bytes.Buffer
	err = runDemo(t.Context(), []string{"--relay-bin", bin, "--dir", t.TempDir()}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "relay exited before it was ready") {
		t.Fatalf("demo with a relay that exits: %v\n%s", err, out.String())
	}
}

// TestDemoTimeoutBeforeTheRelayIsReady: when --timeout ends while the
// relay is still starting, the error says so, not that the relay took
// longer than its own 30 s bound.
func TestDemoTimeoutBeforeTheRelayIsReady(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "slow-relay")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 30\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := time.Now()
	err := runDemo(t.Context(), []string{"--relay-bin", bin, "--dir", dir, "--timeout", "500ms"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "see --timeout") || strings.Contains(err.Error(), "within "+demoReadyTimeout.String()) {
		t.Fatalf("demo --timeout 500ms with a relay that never gets ready: %v\n%s", err, out.String())
	}
	if took := time.Since(start); took > demoReadyTimeout/2 {
		t.Errorf("the demo took %v to give up", took)
	}
}

func TestDemoUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--users", "1"},
		{"--users", "21"},
		{"--messages", "1"},
		{"--messages", "51"},
		{"--timeout", "0s"},
		{"extra"},
	} {
		var out bytes.Buffer
		err := runDemo(t.Context(), args, &out, &out)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}

func TestDemoViewAlignsTheEventColumn(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	v := newDemoView(&buf)
	v.printf("sandbox Telegram Bot API at %s", "http://x")
	v.printf("bot    replied")
	v.printf("dashboard http://y/")
	v.printf("phase 1: a heading stays as it is")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	col := -1
	for _, l := range lines[:3] {
		_, rest, _ := strings.Cut(l, "s  ") // after the elapsed time
		fields := strings.Fields(rest)
		at := strings.Index(rest, fields[1])
		if col == -1 {
			col = at
		} else if at != col {
			t.Errorf("event text starts at column %d, want %d:\n%s", at, col, buf.String())
		}
	}
	if !strings.HasSuffix(lines[3], "phase 1: a heading stays as it is") {
		t.Errorf("heading changed: %q", lines[3])
	}
}
