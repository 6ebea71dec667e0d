package relay_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// TestRelayNotReadyWhileItsDatabaseIsGone: readiness fails while the SQLite
// file is gone from its path, and passes again once it is back.
func TestRelayNotReadyWhileItsDatabaseIsGone(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, newRecorder())
	root := t.TempDir()
	dir := filepath.Join(root, "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	st, err := sqlitestore.Open(t.Context(), filepath.Join(dir, "relay.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	cfg.Store = st
	cfg.AdminListen = "127.0.0.1:0"
	r := start(t, cfg)
	if code, body := get(t, r.AdminURL()+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz with the database in place = %d %q, want 200", code, body)
	}
	if err := os.Rename(dir, filepath.Join(root, "moved")); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, r.AdminURL()+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz with the database file gone = %d %q, want 503", code, body)
	}
	if err := r.Ready(t.Context()); err == nil {
		t.Fatal("Ready with the database file gone = nil")
	}
	if err := os.Rename(filepath.Join(root, "moved"), dir); err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, r.AdminURL()+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after the database came back = %d %q, want 200", code, body)
	}
}
