package sqlitestore

import (
	"context"
	"fmt"

	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

// SchemaVersion returns the schema version recorded for the store's table
// (0 when none is) and the latest version this store knows, for
// diagnostics such as `tgrelay doctor`. A recorded version above latest
// means a newer tgrelay migrated the table. It only reads.
func (s *Store) SchemaVersion(ctx context.Context) (recorded, latest int, err error) {
	ms, err := loadMigrations(s.table)
	if err != nil {
		return 0, 0, err
	}
	v, err := schemaVersion(ctx, s.r, s.table)
	if err != nil {
		return 0, 0, fmt.Errorf("sqlitestore: read schema version of %s: %w", s.table, err)
	}
	return v, sqlschema.Latest(ms), nil
}
