package sqlitestore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

//go:embed migration/*.up.sql
var migrationFS embed.FS

// tablePlaceholder is replaced in every migration by the validated table name.
const tablePlaceholder = "{{table}}"

// skipIfColumnDirective marks a migration that adds a column: it is skipped
// when the column already exists, and a failure is forgiven when the column
// exists afterwards (another process won the race).
const skipIfColumnDirective = "-- tgrelay:skip-if-column "

// Migration is one numbered schema step, read from the embedded
// migration/NNN_name.up.sql files, with the table name filled in.
type Migration struct {
	// Version is the NNN prefix of the file name, from 1 upwards.
	Version int
	// Name is the rest of the file name, without ".up.sql".
	Name string
	// SQL is the statement text, ready to run.
	SQL string

	// skipIfColumn is the column whose presence means the step is applied.
	skipIfColumn string
}

// Migrations returns the schema steps for table, in order, for teams that
// apply schema changes with their own tool. Every step is idempotent or
// guarded (see [Migration]), and [Open] and [New] apply them all themselves,
// so no version table is kept: a table created by an earlier release upgrades
// in place. It returns an error wrapping [ErrInvalidConfig] when table is not
// a valid name.
func Migrations(table string) ([]Migration, error) {
	if err := validateTable(table); err != nil {
		return nil, err
	}
	return loadMigrations(table)
}

// Schema returns the SQL of all [Migrations] for table as one script, for an
// empty database or a table made by the first migration alone: the step that
// adds claim_id is included as is, and fails on a table that already has the
// column (SQLite has no ADD COLUMN IF NOT EXISTS). [Open] and [New] skip it
// then.
func Schema(table string) (string, error) {
	ms, err := Migrations(table)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "-- %03d_%s\n%s", m.Version, m.Name, m.SQL)
	}
	return b.String(), nil
}

func loadMigrations(table string) ([]Migration, error) {
	names, err := fs.Glob(migrationFS, "migration/*.up.sql")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: list migrations: %w", err)
	}
	slices.Sort(names)
	ms := make([]Migration, 0, len(names))
	for i, name := range names {
		base := strings.TrimSuffix(path.Base(name), ".up.sql")
		num, rest, ok := strings.Cut(base, "_")
		v, convErr := strconv.Atoi(num)
		if !ok || convErr != nil || v != i+1 {
			return nil, fmt.Errorf("sqlitestore: migration file %s is out of sequence", name)
		}
		text, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("sqlitestore: read migration %s: %w", name, err)
		}
		m := Migration{Version: v, Name: rest, SQL: strings.ReplaceAll(string(text), tablePlaceholder, table)}
		for line := range strings.Lines(m.SQL) {
			if col, ok := strings.CutPrefix(line, skipIfColumnDirective); ok {
				m.skipIfColumn = strings.TrimSpace(col)
			}
		}
		ms = append(ms, m)
	}
	return ms, nil
}

// migrate applies every migration to db. beforeAlter, when non-nil, runs
// between the column check and the ALTER of a column-adding step (a test
// seam for the upgrade race).
func migrate(ctx context.Context, db *sql.DB, table string, beforeAlter func()) error {
	ms, err := loadMigrations(table)
	if err != nil {
		return err
	}
	for _, m := range ms {
		if m.skipIfColumn == "" {
			if _, err := db.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("sqlitestore: migration %03d_%s: %w", m.Version, m.Name, err)
			}
			continue
		}
		has, err := hasColumn(ctx, db, table, m.skipIfColumn)
		if err != nil {
			return fmt.Errorf("sqlitestore: migration %03d_%s: %w", m.Version, m.Name, err)
		}
		if has {
			continue
		}
		if beforeAlter != nil {
			beforeAlter()
		}
		if _, alterErr := db.ExecContext(ctx, m.SQL); alterErr != nil {
			// Another process may have added the column between the check
			// and the ALTER; only a still-missing column is a failure.
			has, err := hasColumn(ctx, db, table, m.skipIfColumn)
			if err != nil || !has {
				return fmt.Errorf("sqlitestore: migration %03d_%s: %w", m.Version, m.Name, alterErr)
			}
		}
	}
	return nil
}

// hasColumn reports whether table has a column named col.
func hasColumn(ctx context.Context, db *sql.DB, table, col string) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx,
		`SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2`, table, col).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read columns of %s: %w", table, err)
	}
	return n > 0, nil
}
