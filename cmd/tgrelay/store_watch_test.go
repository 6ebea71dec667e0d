package main

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
)

// TestServeStoreNoticesVanishedFile: the store serve opens reports a deleted
// database directory through the log and the gauge's state, and reports it
// back when the directory returns.
func TestServeStoreNoticesVanishedFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	w := newFileWatch(slog.New(slog.NewTextHandler(&logs, nil)))
	st, err := openWatchedStore(t.Context(), filepath.Join(dir, "relay.db"), "", false, 0, w.changed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)

	waitFor := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("gave up waiting: %s; log:\n%s", what, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if !w.ok() {
		t.Fatal("file reported gone right after open")
	}
	moved := dir + ".moved"
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	// The state flips just before the line is logged: wait for both.
	waitFor("the gone report and its log line", func() bool {
		return !w.ok() && strings.Contains(logs.String(), "database file is gone")
	})
	if err := os.Rename(moved, dir); err != nil {
		t.Fatal(err)
	}
	waitFor("the back report and its log line", func() bool {
		return w.ok() && strings.Contains(logs.String(), "database file is back")
	})
}
