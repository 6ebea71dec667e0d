package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// A table at step 8 whose chat index a strict call of that build made,
// with migration 005's IN predicate, is taken forward by migration 009
// without it: the next open drops that index, and the next strict call
// builds it with the live index's predicate. A table that kept the old
// one would pay for its IN list in every write of a live row, the cost
// migration 009 removes.
func TestUpgradeDropsAChatIndexBuiltAtStep8(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "intake.db")
	// The table as a build at step 8 left it once strict order was asked
	// of it: the chat index of migration 005, step 8 recorded.
	db := closedTableOfOneChat(t, path, false)
	old := migratedChatIndexDef(t)
	if _, err := db.ExecContext(ctx, old); err != nil {
		t.Fatalf("migration 005's chat index: %v\n%s", err, old)
	}
	if _, err := db.ExecContext(ctx, `UPDATE tgrelay_schema_version SET version = 8 WHERE table_name = 'telegram_updates'`); err != nil {
		t.Fatal(err)
	}

	again, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
	if err != nil {
		t.Fatalf("this build on a table at step 8: %v", err)
	}
	defer again.Close()
	if def := indexDef(t, db, "telegram_updates_chat"); def != "" {
		t.Fatalf("reopened past migration 009, the table keeps the chat index a build at step 8 made:\n%s", def)
	}
	strictOrderRebuilt(t, again, db, base, "after the upgrade")
}
