// Package sqlschema is the schema plumbing the SQL stores share: the rule for
// table names, the loader of their numbered migration files, and the record
// of which migration a table is at.
//
// A store embeds its migrations as migration/NNN_name.up.sql, numbered from
// 001 without gaps; {{table}} in a file stands for the validated table name.
// The version a table is at is kept in one row of [VersionTable], keyed by
// the table's name in lower case. A store reads that row first and applies
// the migrations above it, in one transaction it holds exclusively, only
// when the row is behind; a current table is never locked or altered.
package sqlschema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// MaxTableLen is the longest table name accepted. PostgreSQL truncates
// identifiers at 63 bytes, and the schemas derive index and function names
// by appending up to eight bytes (such as "_settled") to the table name; a
// longer name could make two tables share a truncated index name.
const MaxTableLen = 55

// Placeholder stands for the table name in migration files.
const Placeholder = "{{table}}"

// VersionTable names the table that records, per update table, the number
// of the last migration applied to it.
const VersionTable = "tgrelay_schema_version"

// ErrInvalidTable is wrapped by the error [ValidateTable] returns.
var ErrInvalidTable = errors.New("invalid table name")

var tableRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// ValidateTable reports whether name is acceptable as a table name: an
// unquoted SQL identifier of ASCII letters, digits and underscores, not
// starting with a digit, 1 to [MaxTableLen] bytes. The name reaches SQL only
// after this check.
func ValidateTable(name string) error {
	if !tableRE.MatchString(name) || len(name) > MaxTableLen {
		return fmt.Errorf("%w %q: want letters, digits and underscores, not starting with a digit, at most %d bytes",
			ErrInvalidTable, name, MaxTableLen)
	}
	return nil
}

// Migration is one numbered schema step with the table name filled in.
type Migration struct {
	// Version numbers the steps from 1, in the order they apply.
	Version int
	// Name describes the step, such as "create_table".
	Name string
	// SQL is the step's statements, ready to run.
	SQL string
}

// Load reads the files matching dir/*.up.sql in fsys, in name order, and
// fills in table, which must already be valid. The files must be numbered
// 001, 002, ... without gaps.
func Load(fsys fs.FS, dir, table string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.up.sql"))
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	slices.Sort(names)
	out := make([]Migration, 0, len(names))
	for i, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".up.sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || name == "" || v != i+1 {
			return nil, fmt.Errorf("migration file %s: want %03d_name.up.sql", n, i+1)
		}
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: strings.ReplaceAll(string(b), Placeholder, table)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return out, nil
}

// Latest returns the version of the last of ms.
func Latest(ms []Migration) int { return ms[len(ms)-1].Version }

// key is the version row's key for table: its name in lower case, since
// both SQL dialects treat unquoted names case-insensitively.
func key(table string) string { return strings.ToLower(table) }

// CreateVersionTable creates [VersionTable] if it is missing.
const CreateVersionTable = `CREATE TABLE IF NOT EXISTS ` + VersionTable + ` (
    table_name TEXT PRIMARY KEY,
    version    INTEGER NOT NULL
)`

// SelectVersion returns the query for table's recorded version (no row when
// none is recorded). table must be valid, so it is safe as a literal.
func SelectVersion(table string) string {
	return `SELECT version FROM ` + VersionTable + ` WHERE table_name = '` + key(table) + `'`
}

// SetVersion returns the statement recording version for table.
func SetVersion(table string, version int) string {
	return `INSERT INTO ` + VersionTable + ` (table_name, version) VALUES ('` + key(table) + `', ` +
		strconv.Itoa(version) + `) ON CONFLICT (table_name) DO UPDATE SET version = excluded.version`
}

// Script returns every step of ms as one script, followed by the statements
// that record the last step's version, for teams that apply the schema with
// their own tool: a store then finds the table current and changes nothing.
func Script(ms []Migration, table string) string {
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "-- tgrelay migration %03d_%s\n", m.Version, m.Name)
		b.WriteString(strings.TrimSpace(m.SQL))
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "-- tgrelay: record the schema version\n%s;\n%s;\n", CreateVersionTable, SetVersion(table, Latest(ms)))
	return b.String()
}

// Tx is the part of a driver's transaction a migration run needs.
type Tx interface {
	// Exec runs statements without arguments.
	Exec(ctx context.Context, query string) error
	// QueryVersion runs a query returning at most one integer; found is
	// false when it returns no row.
	QueryVersion(ctx context.Context, query string) (version int, found bool, err error)
}

// Upgrade brings table to the last of ms inside tx, which the caller holds
// exclusively against other upgraders (SQLite's write lock, or a PostgreSQL
// advisory lock): it creates [VersionTable] if needed, reads the recorded
// version and applies only the steps above it, then records the new
// version. A version above the last of ms (a newer binary migrated the
// table) is left as it is. It returns the number of steps applied.
func Upgrade(ctx context.Context, tx Tx, table string, ms []Migration) (int, error) {
	if err := tx.Exec(ctx, CreateVersionTable); err != nil {
		return 0, fmt.Errorf("create %s: %w", VersionTable, err)
	}
	v, _, err := tx.QueryVersion(ctx, SelectVersion(table))
	if err != nil {
		return 0, fmt.Errorf("read schema version of %s: %w", table, err)
	}
	applied := 0
	for _, m := range ms {
		if m.Version <= v {
			continue
		}
		if err := tx.Exec(ctx, m.SQL); err != nil {
			return 0, fmt.Errorf("migration %03d_%s: %w", m.Version, m.Name, err)
		}
		applied++
	}
	if applied > 0 {
		if err := tx.Exec(ctx, SetVersion(table, Latest(ms))); err != nil {
			return 0, fmt.Errorf("record schema version of %s: %w", table, err)
		}
	}
	return applied, nil
}
