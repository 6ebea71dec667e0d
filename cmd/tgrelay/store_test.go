package main

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// TestDBKeywordConnectionString: a PostgreSQL connection string in libpq's
// key=value form is refused as a usage error by every command that takes
// --db, instead of being taken for a SQLite file path (which serve would
// create, named after the string, password included), and the password
// appears nowhere.
func TestDBKeywordConnectionString(t *testing.T) {
	t.Parallel()
	const password = "pg-pass-5ecr3t"
	// The "host=" directory does not exist, so that the command's
	// behaviour before this check (taking it for a SQLite path) fails
	// without creating a file.
	dsn := "host=" + filepath.Join(t.TempDir(), "nowhere") + " port=5432 dbname=bot password=" + password
	for _, args := range [][]string{
		{"serve", "--forward", "http://127.0.0.1:1/update", "--listen", "127.0.0.1:0", "--db", dsn},
		{"updates", "ls", "--db", dsn},
		{"doctor", "--forward", "http://127.0.0.1:1/update", "--db", dsn},
	} {
		code, stdout, stderr := runCapture(t, args...)
		out := stdout + stderr
		if code != exitUsage {
			t.Errorf("%s: exit %d, want %d:\n%s", args[0], code, exitUsage, out)
		}
		if !strings.Contains(out, "key=value form") || !strings.Contains(out, "postgres://USER:PASSWORD@HOST") {
			t.Errorf("%s: the output does not say to write --db as a postgres:// URL:\n%s", args[0], out)
		}
		if strings.Contains(out, password) {
			t.Errorf("%s: the password reached the output:\n%s", args[0], out)
		}
	}
	_, err := openStore(t.Context(), dsn, "", false)
	if _, ok := errors.AsType[*usageError](err); !ok || strings.Contains(err.Error(), password) {
		t.Errorf("openStore: %v; want a usage error without the password", err)
	}
}

// TestDBNotASQLiteFilePath: a --db that is a directory, or whose directory
// does not exist, is a usage error that says so, from serve and from the
// admin commands, instead of SQLite's "unable to open database file (14)".
func TestDBNotASQLiteFilePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct{ db, want string }{
		{dir, "--db " + dir + " is a directory"},
		{filepath.Join(dir, "missing", "bot.db"), "the directory " + filepath.Join(dir, "missing") + " does not exist"},
	} {
		for _, args := range [][]string{
			{"serve", "--forward", "http://127.0.0.1:1/update", "--listen", "127.0.0.1:0", "--db", tc.db},
			{"updates", "ls", "--db", tc.db},
		} {
			code, _, stderr := runCapture(t, args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "unable to open") {
				t.Errorf("%v: exit %d, stderr:\n%s\nwant %d with %q", args, code, stderr, exitUsage, tc.want)
			}
		}
	}
}

// TestDBPostgresURLDoesNotParse: a postgres:// --db that pgx cannot parse
// (here a password with an unescaped '/') is a usage error that says how
// to write it, once, and never quotes the password.
func TestDBPostgresURLDoesNotParse(t *testing.T) {
	t.Parallel()
	const password = "pg/pass-5ecr3t"
	db := "postgres://bot:" + password + "@127.0.0.1:5432/bot"
	for _, args := range [][]string{
		{"serve", "--forward", "http://127.0.0.1:1/update", "--listen", "127.0.0.1:0", "--db", db},
		{"updates", "ls", "--db", db},
	} {
		code, stdout, stderr := runCapture(t, args...)
		out := stdout + stderr
		if code != exitUsage || strings.Count(out, "does not parse") != 1 || !strings.Contains(out, "percent-encode") {
			t.Errorf("%s: exit %d:\n%s\nwant %d, one line saying --db does not parse and how to write it", args[0], code, out, exitUsage)
		}
		if strings.Contains(out, "5ecr3t") {
			t.Errorf("%s: the password reached the output:\n%s", args[0], out)
		}
	}
}
