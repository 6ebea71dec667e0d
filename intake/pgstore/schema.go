package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

//go:embed migration/*.up.sql
var migrationFS embed.FS

// MaxTableNameLen is the longest table name accepted. PostgreSQL truncates
// identifiers at 63 bytes, and the schema derives index and function names
// by appending up to eight bytes (for example "_settled") to the table name;
// a longer name could make two tables share a truncated index name.
const MaxTableNameLen = sqlschema.MaxTableLen

// ValidateTable reports whether name is acceptable as a table name: an
// unquoted SQL identifier of ASCII letters, digits and underscores, not
// starting with a digit, at most [MaxTableNameLen] bytes. The name is never
// quoted in SQL, so PostgreSQL folds it to lower case, as it does in an
// application's own unquoted SQL; a reserved word is refused by the server.
func ValidateTable(name string) error {
	if err := sqlschema.ValidateTable(name); err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	return nil
}

// Migration is one numbered step of the schema, with the table name filled
// in.
type Migration = sqlschema.Migration

// Migrations returns the schema's steps for table, oldest first, for teams
// that apply migrations with their own tool. [New] applies them itself: it
// reads the version recorded in the table tgrelay_schema_version and, only
// when it is behind, applies the steps above it under an advisory lock.
func Migrations(table string) ([]Migration, error) {
	if err := ValidateTable(table); err != nil {
		return nil, err
	}
	ms, err := sqlschema.Load(migrationFS, "migration", table)
	if err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	return ms, nil
}

// Schema returns the complete DDL for table: every [Migrations] step in
// order, then the statements that record the schema version, as one script
// for an empty database. A store constructed on the result finds the table
// current and changes nothing. Two copies of the script must not run at
// once; [New] serialises its own runs with an advisory lock.
func Schema(table string) (string, error) {
	ms, err := Migrations(table)
	if err != nil {
		return "", err
	}
	return sqlschema.Script(ms, table), nil
}

// schemaVersion reads table's recorded schema version with plain reads: no
// lock is taken, on the update table or elsewhere. It is 0 when none is
// recorded.
func schemaVersion(ctx context.Context, q querier, table string) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass($1::text) IS NOT NULL", sqlschema.VersionTable).Scan(&exists); err != nil || !exists {
		return 0, err
	}
	var v int
	err := q.QueryRow(ctx, sqlschema.SelectVersion(table)).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return v, err
}

// migrate brings table to the latest migration. When the recorded version
// is current, it only reads that version: no DDL runs and no lock is taken
// on the update table, so a store starting next to running ones never
// disturbs them. Otherwise it applies the missing steps in one transaction
// under a transaction-level advisory lock, rereading the version once it
// holds the lock, so processes starting at once upgrade the table once.
func migrate(ctx context.Context, pool *pgxpool.Pool, table string) error {
	ms, err := Migrations(table)
	if err != nil {
		return err
	}
	v, err := schemaVersion(ctx, pool, table)
	if err != nil {
		return fmt.Errorf("pgstore: New: read schema version of %s: %w", table, err)
	}
	if v >= sqlschema.Latest(ms) {
		return nil
	}
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		// One lock for every table's schema: the version table is shared,
		// and two CREATE TABLE IF NOT EXISTS of it could otherwise race.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('tgrelay.pgstore.schema'))"); err != nil {
			return err
		}
		_, err := sqlschema.Upgrade(ctx, pgTx{tx}, table, ms)
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: New: migrate %s: %w", table, err)
	}
	return nil
}

// pgTx adapts a pgx transaction to [sqlschema.Tx].
type pgTx struct{ tx pgx.Tx }

func (t pgTx) Exec(ctx context.Context, query string) error {
	_, err := t.tx.Exec(ctx, query)
	return err
}

func (t pgTx) QueryVersion(ctx context.Context, query string) (int, bool, error) {
	var v int
	err := t.tx.QueryRow(ctx, query).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}
