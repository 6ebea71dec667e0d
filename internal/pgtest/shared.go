package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/internal/leakcheck"
)

// shared is the one cluster of a test binary. It is package state on
// purpose: every test of the binary must share a single server, started on
// first use and stopped by Main. Nothing outside tests touches it.
var shared struct {
	mu      sync.Mutex
	main    bool // Main is running the tests
	started bool // a start was attempted (its outcome is kept)
	cluster *Cluster
	err     error
}

// createTimeout bounds creating or dropping one test database.
const createTimeout = 30 * time.Second

// Main runs the tests of a package that uses [URL], then stops the shared
// cluster (if one was started), then runs the goroutine leak check of
// [leakcheck], and exits. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()

	code := m.Run()

	shared.mu.Lock()
	if shared.cluster != nil {
		if err := shared.cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
			code = 1
		}
	}
	shared.mu.Unlock()

	if code == 0 {
		if leaked := leakcheck.Wait(leakcheck.DefaultWait); len(leaked) > 0 {
			fmt.Fprintf(os.Stderr, "leakcheck: %d goroutine(s) still running after the tests:\n\n%s\n",
				len(leaked), strings.Join(leaked, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}

// URL returns the URL of a new, empty database for this test, on the test
// binary's shared server: the server named by TGRELAY_PG_URL, or else a fast
// ([Options.Fast]) cluster started on first use. The database is dropped when
// the test ends when it lives on an external server; a started cluster is
// removed whole by [Main].
//
// Without PostgreSQL installed the test is skipped with a loud message, or
// fails when TGRELAY_REQUIRE_PG=1. The package's TestMain must be [Main].
func URL(t testing.TB) string {
	t.Helper()
	c, err := sharedCluster()
	if err != nil {
		if errors.Is(err, ErrNotInstalled) && os.Getenv(EnvRequire) != "1" {
			t.Skipf("\n"+
				"************************************************************\n"+
				"*** SKIPPING a PostgreSQL test: %v\n"+
				"*** Set %s to use a running server, or %s=1 to fail instead.\n"+
				"************************************************************", err, EnvURL, EnvRequire)
		}
		t.Fatalf("pgtest: no PostgreSQL for this test: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	dbURL, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !c.owned {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
			defer cancel()
			if err := c.DropDatabase(ctx, dbURL); err != nil {
				t.Errorf("pgtest: %v", err)
			}
		})
	}
	return dbURL
}

// sharedCluster starts or attaches the shared cluster once. A failed start is
// remembered, so a binary never starts more than one cluster.
func sharedCluster() (*Cluster, error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		return nil, errors.New("pgtest: the package's TestMain must call pgtest.Main(m), which stops the shared cluster")
	}
	if shared.started {
		return shared.cluster, shared.err
	}
	shared.started = true
	if u := os.Getenv(EnvURL); u != "" {
		shared.cluster, shared.err = Attach(u)
		return shared.cluster, shared.err
	}
	shared.cluster, shared.err = Start(context.Background(), Options{Fast: true})
	return shared.cluster, shared.err
}

// WriterURL returns the URL of dbURL's database (from [URL]) as a new role
// that may only read and write its tables and call its functions (those
// that exist when it is called): not the tables' owner, as a deployment
// that runs its migrations under another role has it. Roles are the
// server's, so each call makes a role of its own. The test is skipped
// when the server lets the role in by no password (an external server's
// authentication).
func WriterURL(t testing.TB, dbURL string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), createTimeout)
	defer cancel()
	role, err := newDatabaseName() // the same random form names the role
	if err != nil {
		t.Fatal(err)
	}
	role += "_writer"
	owner, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", dbURL, err)
	}
	defer owner.Close(context.Background())
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO " + role,
		"GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO " + role,
	} {
		if _, err := owner.Exec(ctx, q); err != nil {
			t.Fatalf("pgtest: %s: %v", q, err)
		}
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgtest: parse database URL: %v", err)
	}
	u.User = url.User(role)
	writer, err := pgx.Connect(ctx, u.String())
	if err != nil {
		t.Skipf("pgtest: this server lets no second role in (an external server's authentication): %v", err)
	}
	writer.Close(context.Background())
	return u.String()
}
