package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
)

// defaultDB is the --db of every command that opens the update store.
const defaultDB = "./tgrelay.db"

// openedStore is an open update store and what releases it.
type openedStore struct {
	// store is the store itself, a *sqlitestore.Store or a *pgstore.Store
	// and never a wrapper, so that its optional capabilities show to
	// whatever it is handed to (the relay, the journal reader).
	store intake.Store
	// AdminStore is the store's admin view, for the admin commands and
	// the metrics: both stores have one.
	intake.AdminStore
	// kind is "sqlite" or "postgres", for logs and the demo report.
	kind  string
	close func()
}

// Close releases the store's connections.
func (s *openedStore) Close() { s.close() }

// openStore opens the update store named by db: a postgres:// or
// postgresql:// URL for PostgreSQL (several processes on several machines may
// share it), anything else a SQLite file path (the embedded default). The
// choice is an explicit switch on the scheme, never a registry. The table is
// created or upgraded unless noCreate is set (when migrations own it).
func openStore(ctx context.Context, db, table string, noCreate bool) (*openedStore, error) {
	return openWatchedStore(ctx, db, table, noCreate, storeWatch{})
}

// storeWatch is what serve adds to openStore's arguments.
type storeWatch struct {
	// maxClockSkew is PostgreSQL's [pgstore.Config.MaxClockSkew] (zero:
	// its default; negative: no check); SQLite ignores it (one host, one
	// clock).
	maxClockSkew time.Duration
	// onFileChange hears when a SQLite store's path stops naming the open
	// database file (and when it names it again); see
	// [sqlitestore.Config.OnFileChange]. PostgreSQL stores ignore it:
	// their failures surface as errors and in readiness.
	onFileChange func(error)
	// log hears what a PostgreSQL store could not do in the background
	// ([pgstore.Config.Logger]); nil discards it.
	log *slog.Logger
}

// openWatchedStore is openStore with serve's watch on the store.
func openWatchedStore(ctx context.Context, db, table string, noCreate bool, w storeWatch) (*openedStore, error) {
	if db == "" {
		return nil, &usageError{msg: "--db is empty", hint: "Give a SQLite file path or a postgres:// URL."}
	}
	switch {
	case isPostgresURL(db):
		pool, err := pgxpool.New(ctx, db)
		if err != nil {
			// pgx's parse errors may quote the URL, password included.
			return nil, &usageError{msg: "--db does not parse as a PostgreSQL connection URL",
				hint: "Write it as postgres://USER:PASSWORD@HOST:PORT/DBNAME?sslmode=...; percent-encode a password's reserved characters (/ ? # @ : %)."}
		}
		maxClockSkew := w.maxClockSkew
		if maxClockSkew < 0 {
			maxClockSkew = -1
		}
		st, err := pgstore.New(ctx, pool, pgstore.Config{Table: table, NoCreate: noCreate, MaxClockSkew: maxClockSkew, Logger: w.log})
		if err != nil {
			pool.Close()
			return nil, fmt.Errorf("open PostgreSQL store: %w", err)
		}
		return &openedStore{store: st, AdminStore: st, kind: "postgres", close: pool.Close}, nil
	case strings.Contains(db, "://"):
		return nil, &usageError{msg: "--db scheme is not supported", hint: "Give a SQLite file path or a postgres:// URL."}
	default:
		if err := checkSQLitePath(db); err != nil {
			return nil, err
		}
		if noCreate {
			return nil, &usageError{msg: "--no-create applies to PostgreSQL only", hint: "The SQLite store always creates or upgrades its table."}
		}
		st, err := sqlitestore.Open(ctx, db, sqlitestore.Config{Table: table, OnFileChange: w.onFileChange})
		if err != nil {
			return nil, fmt.Errorf("open SQLite store %s: %w", db, err)
		}
		return &openedStore{store: st, AdminStore: st, kind: "sqlite", close: func() { _ = st.Close() }}, nil
	}
}

// isPostgresURL reports whether db names PostgreSQL rather than a SQLite
// file.
func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// keywordDSN matches the start of a PostgreSQL connection string in
// libpq's keyword/value form ("host=db dbname=bot password=…").
var keywordDSN = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|connect_timeout|application_name|options|target_session_attrs)\s*=`)

// refuseKeywordDSN refuses a --db that is not a postgres:// URL and yet
// was not meant as a SQLite file path: a PostgreSQL connection string in
// keyword/value form, which would otherwise become a new SQLite file named
// after it, password included (and that name would then be logged). The
// error never quotes db.
func refuseKeywordDSN(db string) error {
	if keywordDSN.MatchString(db) {
		return &usageError{msg: "--db is a PostgreSQL connection string in key=value form, which tgrelay does not read (a --db that is not a postgres:// URL is a SQLite file path)",
			hint: "Write it as a URL: postgres://USER:PASSWORD@HOST:PORT/DBNAME, with other settings as ?sslmode=... parameters."}
	}
	return nil
}

// checkSQLitePath refuses a --db that cannot be a SQLite file path, in
// words SQLite's "unable to open database file" does not give: a
// connection string (refuseKeywordDSN), a directory, a path whose
// directory does not exist.
func checkSQLitePath(db string) error {
	if err := refuseKeywordDSN(db); err != nil {
		return err
	}
	if fi, err := os.Stat(db); err == nil && fi.IsDir() {
		return &usageError{msg: fmt.Sprintf("--db %s is a directory: want the path of a SQLite file", db),
			hint: "Give a file path, such as " + filepath.Join(db, "tgrelay.db") + "."}
	}
	dir := filepath.Dir(db)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return &usageError{msg: fmt.Sprintf("--db %s: the directory %s does not exist", db, dir),
			hint: "Create the directory first (serve creates the database file, not its directory), or fix the path."}
	}
	return nil
}

// openExistingStore opens the update store of an admin command: it refuses
// a SQLite file that does not exist, and a PostgreSQL database without the
// update table, instead of creating an empty one (which would only hide a
// mistyped --db).
func openExistingStore(ctx context.Context, db, table string) (*openedStore, error) {
	hint := "Give the --db that serve uses (or TGRELAY_DB); admin commands never create a database."
	if db == "" || !isPostgresURL(db) && !strings.Contains(db, "://") {
		if err := checkSQLitePath(db); err != nil {
			return nil, err
		}
		if _, err := os.Stat(db); errors.Is(err, fs.ErrNotExist) {
			return nil, &usageError{msg: fmt.Sprintf("--db %s does not exist", db), hint: hint}
		}
		return openStore(ctx, db, table, false)
	}
	st, err := openStore(ctx, db, table, isPostgresURL(db))
	if errors.Is(err, pgstore.ErrNoTable) {
		return nil, &usageError{msg: "--db has no update table there (serve creates it on its first start)", hint: hint}
	}
	return st, err
}

// newSQLiteFile reports whether db is a SQLite file that does not exist
// yet (so opening it creates it).
func newSQLiteFile(db string) bool {
	if db == "" || strings.Contains(db, "://") {
		return false
	}
	_, err := os.Stat(db)
	return errors.Is(err, fs.ErrNotExist)
}
