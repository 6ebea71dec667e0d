// Package pgtest runs a real, throwaway PostgreSQL for tests, benchmarks and
// CI.
//
// [Start] creates a cluster from the installed Debian binaries
// (/usr/lib/postgresql/*/bin) in a fresh directory, listening only on a Unix
// socket inside that directory (so parallel test binaries never fight over a
// port), and [Cluster.Stop] shuts it down and removes the directory.
// PostgreSQL refuses to run as root; when the process runs as root the
// cluster's processes run as the postgres user instead. [Cluster.CreateDatabase]
// hands out fresh, isolated databases on it.
//
// Tests use [URL], which shares one cluster per test binary and gives every
// test its own database. The package's TestMain must be [Main], which stops
// that cluster after the tests and runs the goroutine leak check:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Two environment variables steer it:
//
//   - TGRELAY_PG_URL, when set, names an existing server (a postgres:// URL
//     of a role allowed to CREATE DATABASE). No cluster is started; fresh
//     databases are created on that server and dropped after each test.
//   - TGRELAY_REQUIRE_PG=1 turns the loud skip that [URL] gives when
//     PostgreSQL is not installed into a test failure, so CI can never pass
//     by silently skipping.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Environment variables read by [URL] and [Main].
const (
	// EnvURL names an existing server to use instead of starting a cluster.
	EnvURL = "TGRELAY_PG_URL"
	// EnvRequire, set to "1", makes a missing PostgreSQL fail tests instead of
	// skipping them.
	EnvRequire = "TGRELAY_REQUIRE_PG"
)

// Defaults of [Options].
const (
	// DefaultMaxConnections is the server's max_connections: enough for
	// parallel tests, each with its own pool, and a few worker processes.
	DefaultMaxConnections = 200
	// DefaultStartTimeout bounds initdb plus server start-up.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout bounds a fast shutdown before the server is killed.
	DefaultStopTimeout = 15 * time.Second
	// DefaultBinGlob is where Debian installs the server binaries.
	DefaultBinGlob = "/usr/lib/postgresql/*/bin"
)

// socketPort names the Unix socket file (.s.PGSQL.<port>); nothing listens
// on TCP.
const socketPort = 5432

// ErrNotInstalled reports that no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("pgtest: PostgreSQL server binaries (initdb, postgres) not found; install Debian's postgresql package")

// Options configure [Start]. The zero value is a durable cluster (fsync on)
// found under [DefaultBinGlob].
type Options struct {
	// Fast turns off fsync, synchronous_commit and full_page_writes. Data
	// survives a client crash but not a machine crash, which is what tests
	// need. Leave it off for benchmarks that measure durable commits.
	Fast bool
	// MaxConnections is the server's max_connections. Zero means
	// [DefaultMaxConnections].
	MaxConnections int
	// BinDir is the directory holding initdb and postgres. Empty means the
	// newest version under [DefaultBinGlob], then the PATH.
	BinDir string
	// StartTimeout bounds initdb and start-up. Zero means
	// [DefaultStartTimeout].
	StartTimeout time.Duration
	// Settings are further server settings, each "name=value" as
	// postgres -c takes it (such as
	// "shared_preload_libraries=pg_stat_statements"); they apply after
	// the ones above.
	Settings []string
}

// Cluster is a running PostgreSQL server: either one that [Start] created and
// owns, or an existing one named by a URL ([Attach]). Its methods are safe
// for concurrent use.
type Cluster struct {
	adminURL string // URL of the maintenance database, used to create databases
	owned    bool   // Stop shuts the server down and removes dir

	dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the postmaster process ended
	log    string        // server log file

	mu      sync.Mutex
	stopped bool
	stopErr error
}

// Start initialises a new cluster in a fresh temporary directory and starts
// it, listening on a Unix socket in that directory only. It waits until the
// server accepts connections. The caller must call [Cluster.Stop].
//
// It returns an error wrapping [ErrNotInstalled] when no server binaries are
// found. When the process runs as root, initdb and postgres run as the
// postgres user (which must exist) on a directory chowned to it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.MaxConnections == 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.MaxConnections < 1 {
		return nil, fmt.Errorf("pgtest: Options.MaxConnections %d: must be at least 1", opts.MaxConnections)
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	if opts.StartTimeout < 0 {
		return nil, fmt.Errorf("pgtest: Options.StartTimeout %v: must be positive", opts.StartTimeout)
	}
	for _, kv := range opts.Settings {
		if name, _, ok := strings.Cut(kv, "="); !ok || name == "" || strings.HasPrefix(name, "-") {
			return nil, fmt.Errorf("pgtest: Options.Settings %q: want name=value", kv)
		}
	}
	bin, err := findBinDir(opts.BinDir)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()

	cred, uid, gid, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "tgrelay-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: temp dir: %w", err)
	}
	c := &Cluster{owned: true, dir: dir, log: filepath.Join(dir, "server.log"), exited: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			c.kill()
			_ = os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, fmt.Errorf("pgtest: chown %s to postgres: %w", dir, err)
		}
	}
	data := filepath.Join(dir, "data")

	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}

	logf, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pgtest: server log: %w", err)
	}
	defer logf.Close()
	args := []string{
		"-D", data,
		"-k", dir,
		"-p", strconv.Itoa(socketPort),
		"-c", "listen_addresses=",
		"-c", "max_connections=" + strconv.Itoa(opts.MaxConnections),
		"-c", "shared_buffers=64MB",
		"-c", "unix_socket_permissions=0777",
	}
	if opts.Fast {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	} else {
		args = append(args, "-c", "fsync=on")
	}
	for _, kv := range opts.Settings {
		args = append(args, "-c", kv)
	}
	// Not CommandContext: the server must outlive the start-up context.
	c.cmd = exec.Command(filepath.Join(bin, "postgres"), args...)
	c.cmd.Dir = dir
	c.cmd.Stdout = logf
	c.cmd.Stderr = logf
	c.cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: cred,
		Setpgid:    true,
		// If this process dies without Stop, the postmaster gets an
		// immediate-shutdown signal instead of running on forever.
		Pdeathsig: syscall.SIGQUIT,
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgtest: start postgres: %w", err)
	}
	go func() {
		_ = c.cmd.Wait()
		close(c.exited)
	}()

	c.adminURL = (&url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Path:     "/postgres",
		RawQuery: url.Values{"host": {dir}, "port": {strconv.Itoa(socketPort)}, "sslmode": {"disable"}}.Encode(),
	}).String()
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// Attach returns a Cluster for an existing server. adminURL must name a
// database the role can connect to and a role allowed to CREATE DATABASE.
// [Cluster.Stop] on it does nothing to the server.
func Attach(adminURL string) (*Cluster, error) {
	if _, err := pgx.ParseConfig(adminURL); err != nil {
		return nil, fmt.Errorf("pgtest: parse server URL: %w", err)
	}
	return &Cluster{adminURL: adminURL}, nil
}

// waitReady polls until the server accepts a connection, the postmaster
// exits, or ctx ends. Polling is the only signal a starting server offers.
func (c *Cluster) waitReady(ctx context.Context) error {
	const pollEvery = 50 * time.Millisecond
	var last error
	for {
		conn, err := pgx.Connect(ctx, c.adminURL)
		if err == nil {
			err = conn.Ping(ctx)
			_ = conn.Close(context.Background())
			if err == nil {
				return nil
			}
		}
		last = err
		t := time.NewTimer(pollEvery)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("pgtest: server did not become ready: %w (last error: %v)\n%s", ctx.Err(), last, c.logTail())
		case <-c.exited:
			t.Stop()
			return fmt.Errorf("pgtest: postgres exited during start-up\n%s", c.logTail())
		case <-t.C:
		}
	}
}

// AdminURL returns the URL of the server's maintenance database. Tests should
// use databases from [Cluster.CreateDatabase] instead.
func (c *Cluster) AdminURL() string { return c.adminURL }

// Dir returns the directory holding the cluster's data, socket and log, or ""
// for an attached server.
func (c *Cluster) Dir() string { return c.dir }

// CreateDatabase creates a new, empty database with a unique name and returns
// its URL.
func (c *Cluster) CreateDatabase(ctx context.Context) (string, error) {
	name, err := newDatabaseName()
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: connect to server: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("pgtest: create database %s: %w", name, err)
	}
	return c.databaseURL(name)
}

// DropDatabase drops a database made by [Cluster.CreateDatabase], ending its
// open connections first.
func (c *Cluster) DropDatabase(ctx context.Context, dbURL string) error {
	u, err := url.Parse(dbURL)
	if err != nil {
		return fmt.Errorf("pgtest: parse database URL: %w", err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	if !validDatabaseName(name) {
		return fmt.Errorf("pgtest: %q is not a database made by CreateDatabase", name)
	}
	conn, err := pgx.Connect(ctx, c.adminURL)
	if err != nil {
		return fmt.Errorf("pgtest: connect to server: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgtest: drop database %s: %w", name, err)
	}
	return nil
}

func (c *Cluster) databaseURL(name string) (string, error) {
	u, err := url.Parse(c.adminURL)
	if err != nil {
		return "", fmt.Errorf("pgtest: parse server URL: %w", err)
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// Stop shuts an owned server down (fast shutdown, then a kill after
// [DefaultStopTimeout]) and removes its directory. It is idempotent and does
// nothing to an attached server.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped || !c.owned {
		c.stopped = true
		return c.stopErr
	}
	c.stopped = true
	if c.cmd != nil && c.cmd.Process != nil {
		_ = c.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		t := time.NewTimer(DefaultStopTimeout)
		select {
		case <-c.exited:
		case <-t.C:
			c.stopErr = fmt.Errorf("pgtest: server did not stop within %v; killed it", DefaultStopTimeout)
			c.kill()
		}
		t.Stop()
	}
	if err := os.RemoveAll(c.dir); err != nil && c.stopErr == nil {
		c.stopErr = fmt.Errorf("pgtest: remove %s: %w", c.dir, err)
	}
	return c.stopErr
}

// kill ends the postmaster and its children at once and waits for it.
func (c *Cluster) kill() {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	<-c.exited
}

func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.log)
	if err != nil {
		return ""
	}
	const tail = 4 << 10
	if len(b) > tail {
		b = b[len(b)-tail:]
	}
	return "server log:\n" + string(bytes.TrimSpace(b))
}

// findBinDir picks the directory of initdb and postgres.
func findBinDir(dir string) (string, error) {
	has := func(d string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, name)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("pgtest: Options.BinDir %s: %w", dir, ErrNotInstalled)
		}
		return dir, nil
	}
	matches, _ := filepath.Glob(DefaultBinGlob)
	// Newest major version first: /usr/lib/postgresql/<major>/bin.
	slices.SortFunc(matches, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, m := range matches {
		if has(m) {
			return m, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", ErrNotInstalled
}

// credential returns the identity to run the server as: nil (this process's
// own) unless this process is root, when it is the postgres user.
func credential() (*syscall.Credential, int, int, error) {
	if os.Geteuid() != 0 {
		return nil, 0, 0, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, 0, 0, fmt.Errorf("pgtest: running as root needs a postgres user to run the server as: %w", err)
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	if err := errors.Join(err1, err2); err != nil {
		return nil, 0, 0, fmt.Errorf("pgtest: postgres user ids: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, uid, gid, nil
}

const databasePrefix = "tgrelay_test_"

func newDatabaseName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("pgtest: random database name: %w", err)
	}
	return databasePrefix + hex.EncodeToString(b[:]), nil
}

func validDatabaseName(name string) bool {
	rest, ok := strings.CutPrefix(name, databasePrefix)
	if !ok || len(rest) != 16 {
		return false
	}
	_, err := hex.DecodeString(rest)
	return err == nil
}
