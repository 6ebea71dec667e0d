package sqlitestore_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// TestWriteWaitsForTheLockUnderTheBusyTimeout: the shared write
// transaction runs without its context's cancellation (runWrites), so what
// ends its wait for a write lock another process holds is the busy timeout.
// The write fails, and the store writes again once the lock is free.
func TestWriteWaitsForTheLockUnderTheBusyTimeout(t *testing.T) {
	t.Parallel()
	s, path := openStore(t, sqlitestore.Config{BusyTimeout: 200 * time.Millisecond})
	other, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(t.Context(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}

	// No deadline of the caller's: only the busy timeout can end the wait.
	in := intake.Incoming{UpdateID: 1, Body: []byte(`{"update_id":1}`), ReceivedAt: time.Unix(1_700_000_000, 0)}
	if added, err := s.Add(context.Background(), in); err == nil {
		t.Fatalf("Add while another process holds the write lock: added=%v and no error", added)
	}

	if _, err := conn.ExecContext(t.Context(), `ROLLBACK`); err != nil {
		t.Fatal(err)
	}
	if added, err := s.Add(t.Context(), in); err != nil || !added {
		t.Fatalf("Add once the lock is free: added=%v, %v", added, err)
	}
}
