package sqlitestore_test

import (
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// callerStore returns a store over a handle of the test's own, which
// Close leaves open: what it prepared and did not close would stay
// prepared on it.
func callerStore(t *testing.T) (*sqlitestore.Store, *sql.DB) {
	t.Helper()
	db := callerDB(t)
	s, err := sqlitestore.New(t.Context(), db, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s, db
}

func TestStrictOrderAfterCloseBuildsNothing(t *testing.T) {
	t.Parallel()
	s, db := callerStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.DueInOrder(t.Context(), intake.DueQuery{Now: base, PendingBefore: base, Limit: 10}, "")
	if err == nil {
		t.Fatal("DueInOrder after Close succeeded; want the store's closed error")
	}
	if sqlitestore.StrictStatementsOpen(s) {
		t.Fatal("DueInOrder after Close left strict order's statements prepared on the caller's handle")
	}
	if n := chatIndexes(t, db); n != 0 {
		t.Fatalf("DueInOrder after Close built %d chat indexes, want none", n)
	}
}

// A strict order call whose build is under way when Close begins: Close
// waits for the build and closes what it prepared (the call itself may
// then fail, as any call racing Close may).
func TestCloseDuringStrictOrderBuildClosesItsStatements(t *testing.T) {
	t.Parallel()
	s, _ := callerStore(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	sqlitestore.OnTxStart(s, func() {
		once.Do(func() {
			close(entered)
			<-release
		})
	})
	built := make(chan error, 1)
	go func() {
		_, err := s.DueInOrder(t.Context(), intake.DueQuery{Now: base, PendingBefore: base, Limit: 10}, "")
		built <- err
	}()
	<-entered // the chat index's build holds the writer
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	// Let Close run as far as it can without the build, then let the
	// build finish.
	select {
	case err := <-closed:
		closed <- err
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	// The call races Close: once Close has closed the statements its build
	// prepared, the call's read may find them closed. What it must not do
	// is fail for any other reason.
	if err := <-built; err != nil && !strings.Contains(err.Error(), "closed") {
		t.Fatalf("DueInOrder: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if sqlitestore.StrictStatementsOpen(s) {
		t.Fatal("the strict statements of a build Close raced stayed prepared after Close")
	}
}
