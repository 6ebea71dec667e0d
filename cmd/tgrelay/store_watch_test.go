package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
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
	st, err := openWatchedStore(t.Context(), filepath.Join(dir, "relay.db"), "", false, storeWatch{onFileChange: w.changed})
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

// TestServeStoreWriteTellsVanishedFile: the first write to find the database
// file gone logs the gone line and drops the gauge's state by itself, before
// it returns (no background check needs to run first); later writes add no
// second line.
func TestServeStoreWriteTellsVanishedFile(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	w := newFileWatch(slog.New(slog.NewTextHandler(&logs, nil)))
	st, err := openWatchedStore(t.Context(), filepath.Join(dir, "relay.db"), "", false, storeWatch{onFileChange: w.changed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		if _, err := st.store.Add(t.Context(), intake.Incoming{UpdateID: id, Body: []byte(`{"update_id":1}`), ReceivedAt: time.Now()}); !errors.Is(err, sqlitestore.ErrDatabaseGone) {
			t.Fatalf("Add %d with the file gone = %v, want ErrDatabaseGone", id, err)
		}
		if w.ok() {
			t.Fatalf("after write %d found the file gone, tgrelay_store_file_ok's state is still ok", id)
		}
	}
	if n := strings.Count(logs.String(), "updates are refused with 503"); n != 1 {
		t.Fatalf("the gone line was logged %d times for one disappearance, want 1; log:\n%s", n, logs.String())
	}
}
