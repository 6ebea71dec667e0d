package main

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// The statements report names each variant's database by its variant,
// counts only what ran after the reset, divides by the updates, and leaves
// out the databases of no variant.
func TestPGStatementsReport(t *testing.T) {
	t.Parallel()
	var stats pgStatements
	cluster, err := pgtest.Start(t.Context(), pgtest.Options{Fast: true, Settings: stats.settings()})
	if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv(pgtest.EnvRequire) != "1" {
		t.Skipf("PostgreSQL is not installed (%v); set %s=1 to fail instead", err, pgtest.EnvRequire)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	if err := stats.attach(t.Context(), cluster); err != nil {
		t.Fatal(err)
	}
	exec := func(url string, sqls ...string) {
		t.Helper()
		c, err := pgx.Connect(t.Context(), url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(t.Context())
		for _, s := range sqls {
			if _, err := c.Exec(t.Context(), s); err != nil {
				t.Fatal(err)
			}
		}
	}
	mine, err := cluster.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	other, err := cluster.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	stats.name("serve-postgres", mine)
	exec(mine, "CREATE TABLE before_reset (x int)")
	if err := stats.reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	exec(mine, "CREATE TABLE counted (x int)")
	for range 4 {
		exec(mine, "INSERT INTO counted SELECT generate_series(1, 100)")
	}
	exec(other, "CREATE TABLE not_a_variant (x int)")

	var out bytes.Buffer
	if err := stats.report(t.Context(), &out, 2); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	t.Log(got)
	for _, want := range []string{"serve-postgres", "all statements", "INSERT INTO counted"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.Contains(line, "INSERT INTO counted") && !strings.Contains(line, " 2.00 calls") {
			t.Errorf("the insert made 4 times over 2 updates is not 2.00 calls an update: %q", line)
		}
	}
	for _, unwanted := range []string{"before_reset", "not_a_variant"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("report holds %q", unwanted)
		}
	}
}

// Without -pg-statements the report's hooks do nothing.
func TestPGStatementsOff(t *testing.T) {
	var stats *pgStatements
	if stats.settings() != nil {
		t.Error("settings without -pg-statements")
	}
	stats.name("serve-postgres", "postgres:///x")
	if err := stats.reset(t.Context()); err != nil {
		t.Error(err)
	}
	var out bytes.Buffer
	if err := stats.report(t.Context(), &out, 10); err != nil || out.Len() > 0 {
		t.Errorf("report without -pg-statements: %q, %v", out.String(), err)
	}
}
