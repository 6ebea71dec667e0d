package pgstore

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

//go:embed migration/*.up.sql
var migrationFS embed.FS

// tablePlaceholder stands for the table name in the embedded migrations.
const tablePlaceholder = "{{table}}"

// MaxTableNameLen is the longest table name accepted. PostgreSQL truncates
// identifiers at 63 bytes, and the schema derives index and function names
// by appending up to eight bytes (for example "_settled") to the table name;
// a longer name could make two tables share a truncated index name.
const MaxTableNameLen = 55

var tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// ValidateTable reports whether name is acceptable as a table name: an
// unquoted SQL identifier of ASCII letters, digits and underscores, not
// starting with a digit, at most [MaxTableNameLen] bytes. The name is never
// quoted in SQL, so PostgreSQL folds it to lower case, as it does in an
// application's own unquoted SQL; a reserved word is refused by the server.
func ValidateTable(name string) error {
	if !tableNameRE.MatchString(name) || len(name) > MaxTableNameLen {
		return fmt.Errorf("pgstore: table name %q: want letters, digits and underscores, not starting with a digit, at most %d bytes", name, MaxTableNameLen)
	}
	return nil
}

// Migration is one numbered step of the schema, with the table name filled
// in.
type Migration struct {
	// Version numbers the steps from 1, in the order they apply.
	Version int
	// Name describes the step, such as "create_table".
	Name string
	// SQL is the step's DDL. Every statement is idempotent.
	SQL string
}

// Migrations returns the schema's steps for table, oldest first, for teams
// that apply migrations with their own tool. Every step is idempotent, so
// applying a step twice, or all steps to a current table, is harmless.
//
// Step 1 creates the table as stores without claim identities use it (the
// base methods need nothing more). Step 2 adds the claim_id column, the
// index of unacknowledged exhaustions and the function <table>_owns; fenced
// and durable methods need it.
func Migrations(table string) ([]Migration, error) {
	if err := ValidateTable(table); err != nil {
		return nil, err
	}
	names, err := fs.Glob(migrationFS, "migration/*.up.sql")
	if err != nil {
		return nil, fmt.Errorf("pgstore: list migrations: %w", err)
	}
	slices.Sort(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".up.sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("pgstore: migration file %s: want NNN_name.up.sql", n)
		}
		b, err := migrationFS.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("pgstore: read migration %s: %w", n, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: strings.ReplaceAll(string(b), tablePlaceholder, table)})
	}
	return out, nil
}

// Schema returns the complete DDL for table: every [Migrations] step in
// order, as one script. It is idempotent: it creates a missing table,
// upgrades a table made by an earlier version (adding claim_id), and changes
// nothing on a current one, so it may run at every deploy.
//
// A team whose migrations own the schema applies this script, and then
// constructs stores with [Config.NoCreate]. Two copies of the script
// running at once should be serialised by the migration tool; [New]
// serialises its own runs with an advisory lock.
func Schema(table string) (string, error) {
	ms, err := Migrations(table)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "-- tgrelay pgstore migration %03d_%s\n", m.Version, m.Name)
		b.WriteString(strings.TrimSpace(m.SQL))
		b.WriteString("\n\n")
	}
	return b.String(), nil
}
