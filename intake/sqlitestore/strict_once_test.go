package sqlitestore_test

import (
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// The first strict call builds the chat index and prepares strict order's
// statements, once for the store: a strict listing after it is a read and
// nothing else. A store that built them again on every call would turn
// each strict read into a write transaction (and leave statements open
// that Close does not know of).
func TestStrictOrderIsBuiltOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := storeOfOneChat(t, filepath.Join(t.TempDir(), "intake.db"))
	defer s.Close()
	q := intake.DueQuery{Now: base, PendingBefore: base, Limit: 10}
	if _, err := s.DueInOrder(ctx, q, ""); err != nil {
		t.Fatal(err)
	}
	var txs atomic.Int32
	sqlitestore.OnTxStart(s, func() { txs.Add(1) })
	for _, chat := range []string{"", "7", "", "7"} {
		rows, err := s.DueInOrder(ctx, q, chat)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 1 || rows[0].UpdateID != 1 {
			t.Fatalf("DueInOrder(chat %q) = %v, want update 1 alone (2 is behind it)", chat, rows)
		}
	}
	if n := txs.Load(); n != 0 {
		t.Fatalf("4 strict listings after the first started %d write transactions, want none: strict order was built again", n)
	}
}
