package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"

	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

//go:embed migration/*.up.sql
var migrationFS embed.FS

// Migration is one numbered schema step, read from the embedded
// migration/NNN_name.up.sql files, with the table name filled in.
type Migration = sqlschema.Migration

// Migrations returns the schema steps for table, in order, for teams that
// apply schema changes with their own tool. [Open] and [New] apply them
// themselves: they read the version recorded in the table
// tgrelay_schema_version and apply only the steps above it, in one
// transaction. It returns an error wrapping [ErrInvalidConfig] when table is
// not a valid name.
func Migrations(table string) ([]Migration, error) {
	if err := validateTable(table); err != nil {
		return nil, err
	}
	return loadMigrations(table)
}

// Schema returns all [Migrations] for table as one script for an empty
// database, ending with the statements that record the schema version, so
// [Open] and [New] then find the table current and change nothing.
func Schema(table string) (string, error) {
	ms, err := Migrations(table)
	if err != nil {
		return "", err
	}
	return sqlschema.Script(ms, table), nil
}

func loadMigrations(table string) ([]Migration, error) {
	ms, err := sqlschema.Load(migrationFS, "migration", table)
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %w", err)
	}
	return ms, nil
}

// versionTableExists counts the version table in the schema.
const versionTableExists = `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = '` + sqlschema.VersionTable + `'`

// schemaVersion reads table's recorded schema version without locking
// anything: 0 when none is recorded.
func schemaVersion(ctx context.Context, db *sql.DB, table string) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, versionTableExists).Scan(&n); err != nil || n == 0 {
		return 0, err
	}
	var v int
	err := db.QueryRowContext(ctx, sqlschema.SelectVersion(table)).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// migrate brings table to the latest migration. A current table is only
// read; otherwise the steps run in one write transaction, which SQLite's
// write lock serialises with other processes upgrading the same file.
func migrate(ctx context.Context, db *sql.DB, table string) error {
	ms, err := loadMigrations(table)
	if err != nil {
		return err
	}
	v, err := schemaVersion(ctx, db, table)
	if err != nil {
		return fmt.Errorf("sqlitestore: read schema version of %s: %w", table, err)
	}
	if v >= sqlschema.Latest(ms) {
		return nil
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlitestore: migrate %s: %w", table, err)
	}
	defer tx.Rollback()
	if _, err := sqlschema.Upgrade(ctx, sqlTx{tx}, table, ms); err != nil {
		return fmt.Errorf("sqlitestore: migrate %s: %w", table, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlitestore: migrate %s: %w", table, err)
	}
	return nil
}

// sqlTx adapts a database/sql transaction to [sqlschema.Tx].
type sqlTx struct{ tx *sql.Tx }

func (t sqlTx) Exec(ctx context.Context, query string) error {
	_, err := t.tx.ExecContext(ctx, query)
	return err
}

func (t sqlTx) QueryVersion(ctx context.Context, query string) (int, bool, error) {
	var v int
	err := t.tx.QueryRowContext(ctx, query).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// checkCurrent fails unless table exists at the latest schema version; it
// changes nothing.
func checkCurrent(ctx context.Context, db *sql.DB, table string) error {
	ms, err := loadMigrations(table)
	if err != nil {
		return err
	}
	v, err := schemaVersion(ctx, db, table)
	if err != nil {
		return fmt.Errorf("sqlitestore: read schema version of %s: %w", table, err)
	}
	if latest := sqlschema.Latest(ms); v < latest {
		return fmt.Errorf("%w: table %s is at schema version %d, this store needs %d (Config.MustExist is set, so nothing is created or migrated)",
			ErrNotMigrated, table, v, latest)
	}
	return nil
}
