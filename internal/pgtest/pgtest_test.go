package pgtest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func TestURLGivesAWorkingDatabase(t *testing.T) {
	t.Parallel()
	conn := connect(t, URL(t))
	var n int
	if err := conn.QueryRow(t.Context(), "SELECT 40 + 2").Scan(&n); err != nil {
		t.Fatalf("query: %v", err)
	}
	if n != 42 {
		t.Fatalf("SELECT 40 + 2 = %d", n)
	}
	var db string
	if err := conn.QueryRow(t.Context(), "SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	if !validDatabaseName(db) {
		t.Fatalf("current_database() = %q, want a fresh test database", db)
	}
	if os.Getenv(EnvURL) == "" {
		var fsync string
		if err := conn.QueryRow(t.Context(), "SHOW fsync").Scan(&fsync); err != nil {
			t.Fatal(err)
		}
		if fsync != "off" {
			t.Errorf("shared test cluster fsync = %q, want off (fast mode)", fsync)
		}
	}
}

func TestURLDatabasesAreIsolated(t *testing.T) {
	t.Parallel()
	a, b := connect(t, URL(t)), connect(t, URL(t))
	if _, err := a.Exec(t.Context(), "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	var found bool
	if err := b.QueryRow(t.Context(), "SELECT to_regclass('only_in_a') IS NOT NULL").Scan(&found); err != nil {
		t.Fatal(err)
	}
	if found {
		t.Fatal("a table created in one test database is visible in another")
	}
}

func TestURLSharesOneCluster(t *testing.T) {
	t.Parallel()
	URL(t)
	URL(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.started || shared.cluster == nil {
		t.Fatal("no shared cluster recorded after URL")
	}
}

// TestStartAndStop starts a second, durable cluster of its own to check
// Start's options and that Stop ends the server and removes its directory.
func TestStartAndStop(t *testing.T) {
	t.Parallel()
	if os.Getenv(EnvURL) != "" {
		t.Skipf("%s is set: this test needs local server binaries", EnvURL)
	}
	URL(t) // skips loudly, or fails under TGRELAY_REQUIRE_PG, without PostgreSQL
	c, err := Start(t.Context(), Options{MaxConnections: 37, Settings: []string{"work_mem=5MB"}})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = c.Stop()
		}
	})
	dbURL, err := c.CreateDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dbURL)
	for setting, want := range map[string]string{"fsync": "on", "max_connections": "37", "listen_addresses": "", "work_mem": "5MB"} {
		var got string
		if err := conn.QueryRow(t.Context(), "SELECT current_setting($1)", setting).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}
	if os.Geteuid() == 0 {
		var super string
		if err := conn.QueryRow(t.Context(), "SELECT current_user").Scan(&super); err != nil || super != "postgres" {
			t.Errorf("current_user = %q, %v; want postgres", super, err)
		}
	}
	_ = conn.Close(t.Context())

	if err := c.DropDatabase(t.Context(), dbURL); err != nil {
		t.Fatalf("DropDatabase: %v", err)
	}
	if _, err := pgx.Connect(t.Context(), dbURL); err == nil {
		t.Fatal("connected to a dropped database")
	}

	dir := c.Dir()
	stopped = true
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-c.exited:
	default:
		t.Fatal("postmaster still running after Stop")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cluster dir %s after Stop: %v, want it removed", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, c.AdminURL()); err == nil {
		_ = conn.Close(ctx)
		t.Fatal("connected to a stopped cluster")
	}
}

func TestStartWithoutBinaries(t *testing.T) {
	t.Parallel()
	_, err := Start(t.Context(), Options{BinDir: t.TempDir()})
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start with an empty BinDir: %v, want ErrNotInstalled", err)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for name, opts := range map[string]Options{
		"MaxConnections": {MaxConnections: -1},
		"StartTimeout":   {StartTimeout: -time.Second},
		"Settings":       {Settings: []string{"work_mem"}},
	} {
		_, err := Start(t.Context(), opts)
		if err == nil || !strings.Contains(err.Error(), "Options."+name) {
			t.Errorf("Start(%+v) = %v, want an error naming Options.%s", opts, err, name)
		}
	}
}

func TestDropDatabaseRefusesForeignNames(t *testing.T) {
	t.Parallel()
	c, err := Attach("postgres://nobody@127.0.0.1:1/postgres")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DropDatabase(t.Context(), "postgres://nobody@127.0.0.1:1/postgres"); err == nil {
		t.Fatal("DropDatabase accepted a database it did not create")
	}
}
