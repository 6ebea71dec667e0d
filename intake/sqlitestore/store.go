package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// Defaults and limits of [Config].
const (
	// DefaultTable is the table name used when Config.Table is empty.
	DefaultTable = "telegram_updates"
	// DefaultSynchronous is the synchronous mode used by Open when
	// Config.Synchronous is empty.
	DefaultSynchronous = "FULL"
	// DefaultBusyTimeout is how long Open's connections wait for another
	// connection's lock when Config.BusyTimeout is zero.
	DefaultBusyTimeout = 5 * time.Second
	// MaxBusyTimeout is the largest accepted Config.BusyTimeout.
	MaxBusyTimeout = 10 * time.Minute
	// DefaultReadConns is the size of Open's reader pool when
	// Config.ReadConns is zero.
	DefaultReadConns = 4
	// MaxReadConns is the largest accepted Config.ReadConns.
	MaxReadConns = 64
	// ReaderCacheKiB bounds the page cache of each reader connection
	// [Open] makes. SQLite's default, 2 MiB per connection, let the
	// readers' caches fill for most of an hour under a steady load (a
	// dozen MiB of memory outside Go's heap with the default pool, which
	// the soak scenario read as growth); the readers serve sweeps, checks
	// and operator pages, which the operating system's cache of the file
	// serves as well. The writer keeps SQLite's default.
	ReaderCacheKiB = 512
)

// ErrInvalidConfig is wrapped by every error that rejects a [Config] field or
// a path; the message names the field.
var ErrInvalidConfig = errors.New("sqlitestore: invalid config")

// ErrNoDatabase is wrapped by the error of [Open] with Config.MustExist set
// when the path names no file. The error wraps [fs.ErrNotExist] too.
var ErrNoDatabase = errors.New("sqlitestore: no database at the path")

// ErrNotMigrated is wrapped by the error of [Open] with Config.MustExist set
// when the database lacks the update table or has it at an older schema.
var ErrNotMigrated = errors.New("sqlitestore: table schema is missing or behind")

// Config configures [Open] and [New]. The zero value is valid: table
// "telegram_updates", synchronous=FULL, a 5 s busy timeout and four reader
// connections. Open and New copy it; later changes have no effect.
type Config struct {
	// Table is the name of the update table: ASCII letters, digits and
	// underscores, not starting with a digit, at most 55 bytes, checked
	// before it reaches any SQL. Defaults to [DefaultTable].
	Table string

	// Synchronous is SQLite's synchronous mode for the writer connection of
	// [Open]: "FULL" or "NORMAL". Defaults to [DefaultSynchronous].
	//
	// With FULL every commit fsyncs the write-ahead log before it returns, so
	// an update [intake.Store.Add] reported is on disk before Telegram is
	// answered, even across a power loss or an OS crash.
	//
	// NORMAL is an opt-in for throughput: the database stays consistent, but
	// the last transactions committed before a power loss or an OS crash may
	// be rolled back (a crash of this process alone loses nothing). An update
	// lost that way was already answered 200, so Telegram does not deliver it
	// again: it is gone. Choose NORMAL only if that is acceptable.
	//
	// Must be empty with [New], which uses the caller's handle as configured.
	Synchronous string

	// BusyTimeout is how long a connection of [Open] waits for a lock held by
	// another connection or process before failing with SQLITE_BUSY; whole
	// milliseconds, at most [MaxBusyTimeout]. Zero means
	// [DefaultBusyTimeout]. Must be zero with [New].
	BusyTimeout time.Duration

	// ReadConns is the number of read-only connections [Open] keeps for
	// listing and ownership reads, besides its single writer connection;
	// 1 to [MaxReadConns]. Zero means [DefaultReadConns]. Must be zero with
	// [New].
	ReadConns int

	// MustExist, when set, makes [Open] open an existing database only: it
	// creates no file and no table, and fails with [ErrNoDatabase] when the
	// path names no file, or [ErrNotMigrated] when the table is missing or
	// behind this store's schema. Set it for admin tools, which must never
	// leave an empty database behind a mistyped path. Must be false with
	// [New].
	MustExist bool

	// FileCheckInterval is how often a background check looks whether the
	// path still names the open database file (see [ErrDatabaseGone]); every
	// commit checks it too. From 1 ms to [MaxFileCheckInterval]; zero means
	// [DefaultFileCheckInterval].
	FileCheckInterval time.Duration

	// OnFileChange, when set, is called when the answer to "does the path
	// still name the open database file?" changes, by whichever check saw
	// it first (a commit, [Store.Health], the background check), once per
	// change: with an error wrapping [ErrDatabaseGone] that says why when
	// the path stops naming the open file, and with nil when it names it
	// again. Log it and count it; it is called with the check's lock held,
	// so it must not block nor call the store.
	OnFileChange func(err error)
}

// Store is an [intake.Store] with every optional capability on one SQLite
// table (see the package doc). Its methods are safe for
// concurrent use, and several processes may share one database file: every
// state change is one conditional statement, serialised by SQLite's write
// lock.
//
// Times are stored as integer milliseconds since the Unix epoch.
type Store struct {
	table string
	// w runs every write; for Open it has exactly one connection.
	w *sql.DB
	// r runs plain reads; it is w for New.
	r *sql.DB
	// owned reports whether Close closes w and r (Open) or not (New).
	owned bool

	// file watches whether the path still names the open database file.
	file *fileWatch
	// created reports that Open created the database file.
	created bool

	q    queries
	adds addStmts
	// strict holds strict chat order's statements once the first strict
	// call has built the chat index (chatorder.go); strictMu serializes
	// that build, and Close against it (strictClosed).
	strict       atomic.Pointer[strictStmts]
	strictMu     sync.Mutex
	strictClosed bool
	// journal holds the journal's prepared statements and deferred
	// outcomes (journal.go).
	journal journalState
	// writes groups concurrent single-statement writes into shared
	// transactions (see writes.go).
	writes groupcommit.Group[writeReq, error]
	// settles holds the batched settlements' statements (settles.go).
	settles settleStmts
	// parkFor bounds how long a settlement under load waits for another
	// write's transaction (settles.go); tests lengthen it.
	parkFor time.Duration
	// txStart and txDone, when set (by tests), are called as each group of
	// writes starts, once its batch is formed, and after each
	// write transaction, with how many settlements ran batched in it and
	// how it ended.
	txStart func()
	txDone  func(settles int, err error)

	// procs holds the process locks of the processes registered here
	// (process.go).
	procs *procLocker

	closeOnce sync.Once
	closeErr  error
}

// Compile-time checks of the capabilities Store claims.
var (
	_ intake.Store          = (*Store)(nil)
	_ intake.ProcessStore   = (*Store)(nil)
	_ intake.ChatOrderStore = (*Store)(nil)
	_ intake.JournalStore   = (*Store)(nil)
	_ intake.AdminStore     = (*Store)(nil)
	_ intake.HealthChecker  = (*Store)(nil)
)

// Open opens (creating if needed) the SQLite database file at path in WAL
// mode, creates the update table or applies the migrations it lacks (see
// [Migrations]) and returns a
// store that owns its connections: one writer connection, opened with
// BEGIN IMMEDIATE transactions, and a pool of read-only connections. Call
// [Store.Close] to release them.
//
// path is a plain file path; an empty path, ":memory:" and "file:" URIs are
// refused (an in-memory database is private to each connection, so use
// memstore instead; Open builds its own URI to set its options).
func Open(ctx context.Context, path string, cfg Config) (*Store, error) {
	return open(ctx, path, cfg)
}

func open(ctx context.Context, path string, cfg Config) (*Store, error) {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("%w: path %q must be a plain file path", ErrInvalidConfig, path)
	}
	cfg, err := cfg.withDefaults(true)
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(path)
	created := errors.Is(statErr, fs.ErrNotExist)
	if created && cfg.MustExist {
		return nil, fmt.Errorf("%w %s (Config.MustExist is set): %w", ErrNoDatabase, path, statErr)
	}
	busy := strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)
	base := "file:" + escapePath(path) + "?_pragma=busy_timeout(" + busy + ")"
	if cfg.MustExist {
		// SQLite itself refuses to create the file, should it vanish
		// between the check above and the open.
		base += "&mode=rw"
	}

	// WAL mode is persistent: a database this store made is in it already,
	// and with MustExist nothing is changed before the schema check.
	// A database this store creates gives the pages its prunes free back
	// to the file system (incremental auto-vacuum, see Prune), so the
	// file follows the rows rather than the largest backlog it ever held.
	// The setting takes only before the first table is made: on an older
	// database it changes nothing.
	journal := "&_pragma=auto_vacuum(incremental)&_pragma=journal_mode(WAL)"
	if cfg.MustExist {
		journal = ""
	}
	w, err := sql.Open("sqlite", base+journal+
		"&_pragma=synchronous("+cfg.Synchronous+")&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	// The first connection switches the file to WAL before any reader opens
	// it, and surfaces an unusable path here rather than on first use.
	if err := pingWaiting(ctx, w, cfg.BusyTimeout); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s: %w", path, err)
	}

	// Each reader keeps a small page cache of its own (ReaderCacheKiB);
	// the file's pages stay in the operating system's cache anyway.
	r, err := sql.Open("sqlite", base+"&_pragma=query_only(1)&_pragma=cache_size(-"+strconv.Itoa(ReaderCacheKiB)+")")
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlitestore: open %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(cfg.ReadConns)
	r.SetMaxIdleConns(cfg.ReadConns)

	s, err := build(ctx, w, r, true, cfg)
	if err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	s.created = created
	return s, nil
}

// New wraps a database handle the caller opened with the "sqlite" driver of
// modernc.org/sqlite, creates the update table or applies the migrations it
// lacks, and returns a
// store that uses db for reads and writes. Close does not close db.
//
// The caller configures db: WAL mode, a busy_timeout, a synchronous mode
// (FULL for the guarantee described at [Config.Synchronous]) and, for
// [Store.OwnsTx], _txlock=immediate. One open connection
// (db.SetMaxOpenConns(1)) avoids SQLITE_BUSY between the handle's own
// connections. Config.Synchronous, BusyTimeout and ReadConns must be zero.
func New(ctx context.Context, db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: nil *sql.DB passed to New", ErrInvalidConfig)
	}
	cfg, err := cfg.withDefaults(false)
	if err != nil {
		return nil, err
	}
	return build(ctx, db, db, false, cfg)
}

// withDefaults validates cfg and fills its defaults. forOpen tells whether
// the connection options apply.
func (cfg Config) withDefaults(forOpen bool) (Config, error) {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if err := validateTable(cfg.Table); err != nil {
		return cfg, err
	}
	switch {
	case cfg.FileCheckInterval == 0:
		cfg.FileCheckInterval = DefaultFileCheckInterval
	case cfg.FileCheckInterval < time.Millisecond || cfg.FileCheckInterval > MaxFileCheckInterval:
		return cfg, badField("FileCheckInterval", "is %v: want 1ms to %v", cfg.FileCheckInterval, MaxFileCheckInterval)
	}
	if !forOpen {
		switch {
		case cfg.Synchronous != "":
			return cfg, badField("Synchronous", "applies only to Open; configure the handle given to New")
		case cfg.BusyTimeout != 0:
			return cfg, badField("BusyTimeout", "applies only to Open; configure the handle given to New")
		case cfg.ReadConns != 0:
			return cfg, badField("ReadConns", "applies only to Open")
		case cfg.MustExist:
			return cfg, badField("MustExist", "applies only to Open")
		}
		return cfg, nil
	}
	switch cfg.Synchronous {
	case "":
		cfg.Synchronous = DefaultSynchronous
	case "FULL", "NORMAL":
	default:
		return cfg, badField("Synchronous", "is %q: want \"FULL\" or \"NORMAL\"", cfg.Synchronous)
	}
	switch {
	case cfg.BusyTimeout == 0:
		cfg.BusyTimeout = DefaultBusyTimeout
	case cfg.BusyTimeout < 0 || cfg.BusyTimeout > MaxBusyTimeout || cfg.BusyTimeout%time.Millisecond != 0:
		return cfg, badField("BusyTimeout", "is %v: want whole milliseconds in (0, %v]", cfg.BusyTimeout, MaxBusyTimeout)
	}
	switch {
	case cfg.ReadConns == 0:
		cfg.ReadConns = DefaultReadConns
	case cfg.ReadConns < 1 || cfg.ReadConns > MaxReadConns:
		return cfg, badField("ReadConns", "is %d: want 1 to %d", cfg.ReadConns, MaxReadConns)
	}
	return cfg, nil
}

// validateTable checks a table name against the SQL stores' rule.
func validateTable(table string) error {
	if err := sqlschema.ValidateTable(table); err != nil {
		return badField("Table", "is refused: %w", err)
	}
	return nil
}

// badField returns the *[ConfigError] of an invalid Config field; it
// matches [ErrInvalidConfig] with errors.Is.
func badField(field, format string, args ...any) error {
	return &configerr.Error{Pkg: "sqlitestore", Field: field, Err: fmt.Errorf(format, args...), Kind: ErrInvalidConfig}
}

// ConfigError is an invalid [Config] field, the one config error type of
// every tgrelay package (intake.ConfigError is the same type); it matches
// [ErrInvalidConfig].
type ConfigError = configerr.Error

// escapePath percent-encodes the characters that end or escape the path of
// an SQLite URI filename.
func escapePath(p string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(p)
}

func build(ctx context.Context, w, r *sql.DB, owned bool, cfg Config) (*Store, error) {
	table := cfg.Table
	if cfg.MustExist {
		if err := checkCurrent(ctx, w, table); err != nil {
			return nil, err
		}
	} else if err := migrate(ctx, w, table); err != nil {
		return nil, err
	}
	file, err := databaseFile(ctx, w)
	if err != nil {
		return nil, err
	}
	fw, err := newFileWatch(file)
	if err != nil {
		return nil, err
	}
	s := &Store{table: table, w: w, r: r, owned: owned, file: fw, procs: newProcLocker(file), parkFor: defaultParkFor}
	s.writes = groupcommit.Group[writeReq, error]{CommitFunc: s.commitWrites, Max: maxWriteBatch, Bound: writeBound}
	if err := errors.Join(s.q.prepare(ctx, w, r, table), s.settles.prepare(ctx, w, table)); err != nil {
		s.q.close()
		s.settles.close()
		return nil, err
	}
	fw.watch(cfg.FileCheckInterval, cfg.OnFileChange)
	return s, nil
}

// Table returns the name of the update table.
func (s *Store) Table() string { return s.table }

// DB returns the handle the store writes through: for [Open], its single
// writer connection, whose transactions begin with BEGIN IMMEDIATE. Open a
// domain transaction on it for [Store.OwnsTx]. While such a transaction is
// open it holds that one connection, so do not call the store's writing
// methods from inside it: they wait for the connection, which is a deadlock
// when the goroutine holding the transaction is the one waiting. The
// store's reads ([Store.Owns], [Store.Due], ...) use other connections.
//
// SQLite has one writer: a transaction open on DB holds the write lock, and
// every commit of the store waits for it, the webhook's included (a 2 s
// transaction holds Telegram's 200 for 2 s). Keep such transactions short
// and free of network calls; read through [Store.ReadDB]. [Store.Once] is
// the short, exactly-once form of a fenced domain write.
func (s *Store) DB() *sql.DB { return s.w }

// errClosed answers, after Close, the calls that would prepare statements:
// adds of a batch size not used yet, journal writes and the first strict
// order call.
var errClosed = errors.New("the store is closed")

// Close releases the store's prepared statements and, for a store from
// [Open], its connections. It is safe to call more than once; later calls
// return the first result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.writes.Waiting() > 0 {
			_ = s.do(context.Background(), writeReq{}) // deferred settlements ride on this flush
		}
		s.flushDeferred() // outcomes waiting for an intent to carry them
		s.procs.close()
		s.file.close()
		s.closeErr = errors.Join(s.adds.close(), s.q.close(), s.settles.close(), s.journal.close(), s.closeStrict())
		if s.owned {
			s.closeErr = errors.Join(s.closeErr, s.r.Close(), s.w.Close())
		}
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlitestore: close: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// ms converts an intake time to stored milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts stored milliseconds back to a UTC time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// nonNil returns b, or an empty non-nil slice for a nil b: every body
// column is NOT NULL, and the driver binds a nil slice as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// eachID calls f with each id rows returns (a RETURNING update_id), then
// closes rows. It stops at the first error, f's included.
func eachID(rows *sql.Rows, f func(id int64) error) error {
	for rows.Next() {
		var id int64
		err := rows.Scan(&id)
		if err == nil {
			err = f(id)
		}
		if err != nil {
			rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}

// newClaimID returns a fresh, random claim id.
func newClaimID() string { return uuid.NewString() }

// Add implements [intake.Store.Add] as a transaction of its own: one
// commit, one fsync per update. The intake records through
// [Store.AddBatch], which shares commits.
func (s *Store) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	var n int64
	err := s.runTx(ctx, []writeReq{{op: execOp(s.q.add, &n, u.UpdateID, nonNil(u.Body), ms(u.ReceivedAt), u.Chat)}})
	if err != nil {
		return false, fmt.Errorf("sqlitestore: add %d: %w", u.UpdateID, err)
	}
	return n > 0, nil
}

// AddBatch implements [intake.Store.AddBatch]: the whole batch is one
// transaction and one durable commit; on error nothing is recorded. Rows
// are inserted up to [batchRows] to a statement, through statements
// prepared once per row count (see addChunks and addStmts); a claimed row is inserted
// already claimed (processing, attempt 1, the lease end as due time, a
// fresh claim id) in the same statement.
func (s *Store) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	return s.addBatch(ctx, "add batch", reqs, intake.ProcessClaim{})
}

// AddBatchAs implements [intake.ProcessStore.AddBatchAs]: [Store.AddBatch]
// whose claimed rows record p.Process as their owner.
func (s *Store) AddBatchAs(ctx context.Context, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	return s.addBatch(ctx, "add batch as", reqs, p)
}

func (s *Store) addBatch(ctx context.Context, op string, reqs []intake.AddRequest, p intake.ProcessClaim) ([]intake.AddResult, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	out := make([]intake.AddResult, len(reqs))
	if len(reqs) == 0 {
		return out, nil
	}
	// A context already done records nothing. Preparing a statement of a
	// new size used to fail on it; with a few sizes, all soon prepared,
	// nothing else would stop it before the write.
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	claimIDs := make([]string, len(reqs))
	for i, rq := range reqs {
		if rq.Claim == nil {
			continue
		}
		if err := rq.Claim.Validate(); err != nil {
			return nil, fmt.Errorf("sqlitestore: %s: %w", op, err)
		}
		claimIDs[i] = newClaimID()
	}
	// Prepared before the transaction takes the writer connection: at most
	// three sizes (addChunks).
	chunks := addChunks(len(reqs))
	stmts := make([]*sql.Stmt, len(chunks))
	var err error
	for i, n := range chunks {
		if i > 0 && n == chunks[i-1] {
			stmts[i] = stmts[i-1]
			continue
		}
		if stmts[i], err = s.adds.get(ctx, s.w, s.table, n); err != nil {
			return nil, fmt.Errorf("sqlitestore: %s: %w", op, err)
		}
	}
	args := make([]any, 0, addColumns*chunks[0])
	// The inserts are one write of the shared write transaction (see
	// writes.go), so a batch of adds and concurrent claims and settlements
	// commit together; alone, or when another write of it fails, the batch
	// is a transaction of its own, all or nothing.
	added := make(map[int64]bool, len(reqs))
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		clear(added)
		start := 0
		for k, n := range chunks {
			chunk := reqs[start : start+n]
			args = args[:0]
			for i, rq := range chunk {
				received := ms(rq.ReceivedAt)
				if rq.Claim == nil {
					args = append(args, rq.UpdateID, nonNil(rq.Body), "pending", 0, received, received, nil, nil, rq.Chat)
				} else {
					var owner any
					if p.Process != "" {
						owner = p.Process
					}
					args = append(args, rq.UpdateID, nonNil(rq.Body), "processing", 1, ms(rq.Claim.LeaseUntil), received, claimIDs[start+i], owner, rq.Chat)
				}
			}
			rows, err := tx.StmtContext(ctx, stmts[k]).QueryContext(ctx, args...)
			if err != nil {
				return err
			}
			if err := eachID(rows, func(id int64) error { added[id] = true; return nil }); err != nil {
				return err
			}
			start += n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: %s: %w", op, err)
	}
	// The first occurrence of an inserted id is the one that inserted it.
	for i, rq := range reqs {
		if !added[rq.UpdateID] {
			continue
		}
		delete(added, rq.UpdateID)
		out[i].Added = true
		if rq.Claim != nil {
			out[i].Identity = intake.Identity{UpdateID: rq.UpdateID, Attempt: 1, ClaimID: claimIDs[i]}
		}
	}
	return out, nil
}

// Claim implements [intake.Store.Claim]. Taking the row and spending it
// (attempts already at opts.MaxAttempts) are one conditional UPDATE, so no
// other claim can come between the check and the change.
func (s *Store) Claim(ctx context.Context, updateID int64, opts intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.claim(ctx, updateID, opts, intake.ProcessClaim{}, false)
}

// ClaimAs implements [intake.ProcessStore.ClaimAs]: [Store.Claim] recording
// p.Process as the row's owner, counting a crash on a takeover from a
// lapsed owner in the same UPDATE.
func (s *Store) ClaimAs(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.claim(ctx, updateID, opts, p, false)
}

// ClaimInOrder implements [intake.ChatOrderStore.ClaimInOrder]: the table
// keeps each row's chat (migration 005), and a strict claim checks its
// chat's earlier rows in the same UPDATE, which runs under SQLite's write
// lock, so processes sharing the file keep each chat in order too. The
// first strict call (this or [Store.DueInOrder]) builds the chat index
// the check reads, which the table keeps from then on.
func (s *Store) ClaimInOrder(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.claim(ctx, updateID, opts, p, true)
}

func (s *Store) claim(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim, strict bool) (intake.Identity, bool, error) {
	if err := opts.Validate(); err != nil {
		return intake.Identity{}, false, fmt.Errorf("sqlitestore: claim %d: %w", updateID, err)
	}
	if err := p.Validate(); err != nil {
		return intake.Identity{}, false, fmt.Errorf("sqlitestore: claim %d: %w", updateID, err)
	}
	var (
		state    string
		attempts int
		claimID  string
	)
	found := false
	st := s.q.claim
	if strict {
		p, err := s.strictOrder(ctx)
		if err != nil {
			return intake.Identity{}, false, fmt.Errorf("sqlitestore: claim %d: %w", updateID, err)
		}
		st = p.claim
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		err := tx.StmtContext(ctx, st).QueryRowContext(ctx, updateID, ms(opts.Now), ms(opts.LeaseUntil),
			opts.MaxAttempts, newClaimID(), intake.AttemptsSpentText,
			p.Process, p.MaxCrashes, intake.CrashesSpentText).Scan(&state, &attempts, &claimID)
		if errors.Is(err, sql.ErrNoRows) {
			found = false
			return nil
		}
		found = err == nil
		return err
	})
	if err != nil {
		return intake.Identity{}, false, fmt.Errorf("sqlitestore: claim %d: %w", updateID, err)
	}
	if !found {
		return intake.Identity{}, false, nil
	}
	if intake.State(state) != intake.StateProcessing {
		return intake.Identity{}, false, nil // spent: exhausted instead
	}
	return intake.Identity{UpdateID: updateID, Attempt: attempts, ClaimID: claimID}, true, nil
}

// Renew implements [intake.Store.Renew].
func (s *Store) Renew(ctx context.Context, id intake.Identity, leaseUntil, now time.Time) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.renew, &n, id.UpdateID, id.Attempt, ms(leaseUntil), ms(now), id.ClaimID)); err != nil {
		return false, fmt.Errorf("sqlitestore: renew %d: %w", id.UpdateID, err)
	}
	return n > 0, nil
}

// checkSettlement refuses a settlement that fails its Validate.
func checkSettlement(updateID int64, st intake.Settlement) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("sqlitestore: settle %d: %w", updateID, err)
	}
	return nil
}

// Settle implements [intake.Store.Settle].
func (s *Store) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if err := checkSettlement(id.UpdateID, st); err != nil {
		return false, err
	}
	var n int64
	opErr, err := s.writes.Defer(ctx, writeReq{settle: &settleWrite{id: id, st: st, n: &n}}, s.parkFor)
	if err == nil {
		err = opErr
	}
	if err != nil {
		return false, fmt.Errorf("sqlitestore: settle %d: %w", id.UpdateID, err)
	}
	return n > 0, nil
}

// Owns implements [intake.Store.Owns] as a plain read outside any
// transaction: its answer can be stale by the time the caller acts on it.
// For a domain write, use [Store.OwnsTx] inside that write's transaction.
func (s *Store) Owns(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	return scanOwns(s.q.owns.QueryRowContext(ctx, id.UpdateID, id.Attempt, id.ClaimID, ms(at)), id.UpdateID)
}

// OwnsTx is [Store.Owns] inside the caller's own write transaction tx, on
// the same database file: call it first, make the domain write only when it
// reports true, and commit. The answer then holds until the commit, so a
// handler whose lease was lost (and whose update another worker reclaimed)
// can never commit its write. It fences a stale attempt only: a later
// attempt of the same update (a retry after the handler wrote and then
// failed) owns the update again and writes again. For exactly-once effects
// use [Store.Once], which also records the effect in the transaction.
//
// The check is a conditional UPDATE that changes nothing, so it takes
// SQLite's write lock for tx: from then until tx ends no other connection
// or process can commit anything to the file, a reclaim included.
//
// Begin tx with BEGIN IMMEDIATE: through [Store.DB] of a store from [Open],
// or a handle opened with _txlock=immediate. Then the write lock is taken at
// BEGIN, waiting under busy_timeout for other writers. In a deferred
// transaction that has already read, taking the lock here fails at once
// with SQLITE_BUSY_SNAPSHOT whenever another connection committed since
// that read, without waiting: still safe (the write is refused with an
// error), but it fails work that IMMEDIATE would have let wait its turn.
//
// While the path no longer names the open database file, OwnsTx fails with
// [ErrDatabaseGone]: a domain write committed into that file would not
// survive a restart.
func (s *Store) OwnsTx(ctx context.Context, tx *sql.Tx, id intake.Identity, at time.Time) (bool, error) {
	if _, err := s.file.check(); err != nil {
		return false, err
	}
	return scanOwns(tx.QueryRowContext(ctx, s.q.ownsTxSQL, id.UpdateID, id.Attempt, id.ClaimID, ms(at)), id.UpdateID)
}

func scanOwns(row *sql.Row, updateID int64) (bool, error) {
	var one int
	err := row.Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sqlitestore: owns %d: %w", updateID, err)
	}
	return true, nil
}

// Due implements [intake.Store.Due].
func (s *Store) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	return s.due(ctx, q, false, "")
}

// DueInOrder implements [intake.ChatOrderStore.DueInOrder].
func (s *Store) DueInOrder(ctx context.Context, q intake.DueQuery, chat string) ([]intake.StoredUpdate, error) {
	return s.due(ctx, q, true, chat)
}

func (s *Store) due(ctx context.Context, q intake.DueQuery, strict bool, chat string) ([]intake.StoredUpdate, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: due: %w", err)
	}
	var (
		rows *sql.Rows
		err  error
	)
	var p *strictStmts
	if strict {
		if p, err = s.strictOrder(ctx); err != nil {
			return nil, fmt.Errorf("sqlitestore: due: %w", err)
		}
	}
	switch {
	case strict && chat != "":
		rows, err = p.dueChat.QueryContext(ctx, ms(q.PendingBefore), ms(q.Now), q.Limit, chat)
	case strict:
		rows, err = p.due.QueryContext(ctx, ms(q.PendingBefore), ms(q.Now), q.Limit)
	default:
		rows, err = s.q.due.QueryContext(ctx, ms(q.PendingBefore), ms(q.Now), q.Limit)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: due: %w", err)
	}
	defer rows.Close()
	var out []intake.StoredUpdate
	for rows.Next() {
		var (
			u        intake.StoredUpdate
			received int64
		)
		if err := rows.Scan(&u.UpdateID, &u.Body, &received); err != nil {
			return nil, fmt.Errorf("sqlitestore: due: %w", err)
		}
		u.ReceivedAt = fromMS(received)
		out = append(out, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: due: %w", err)
	}
	return out, nil
}

// Prune implements [intake.Store.Prune].
func (s *Store) Prune(ctx context.Context, before time.Time) (int, error) {
	res, err := s.q.prune.ExecContext(ctx, ms(before))
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: prune: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlitestore: prune: %w", err)
	}
	if n > 0 {
		// Give freed pages back, at most vacuumPages a prune (the sweep
		// prunes every few seconds, so a large backlog's pages go back over
		// a few sweeps). On a database without incremental auto-vacuum
		// this does nothing.
		if _, err := s.w.ExecContext(ctx, vacuumSQL); err != nil {
			return int(n), fmt.Errorf("sqlitestore: prune: give pages back: %w", err)
		}
	}
	return int(n), nil
}

// vacuumPages bounds the pages one Prune gives back to the file system.
const vacuumPages = 4096

// vacuumSQL gives back up to vacuumPages free pages.
var vacuumSQL = "PRAGMA incremental_vacuum(" + strconv.Itoa(vacuumPages) + ")"

// Exhaust implements [intake.Store.Exhaust].
func (s *Store) Exhaust(ctx context.Context, id intake.Identity, at time.Time, errText string) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.exhaust, &n, id.UpdateID, id.Attempt, id.ClaimID, ms(at), errText)); err != nil {
		return false, fmt.Errorf("sqlitestore: exhaust %d: %w", id.UpdateID, err)
	}
	return n > 0, nil
}

// DueExhaustions implements [intake.Store.DueExhaustions]. A row
// without a claim id (possible only through writes from outside the store)
// cannot be acknowledged and is not listed.
func (s *Store) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("sqlitestore: due exhaustions: %w", err)
	}
	var (
		rows *sql.Rows
		err  error
	)
	if q.After == nil {
		rows, err = s.q.dueExhaustions.QueryContext(ctx, q.Limit)
	} else {
		rows, err = s.q.dueExhaustionsAfter.QueryContext(ctx, q.Limit, *q.After)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: due exhaustions: %w", err)
	}
	defer rows.Close()
	var out []intake.Exhaustion
	for rows.Next() {
		var (
			e     intake.Exhaustion
			at    int64
			errTx sql.NullString
		)
		if err := rows.Scan(&e.UpdateID, &e.Body, &e.Attempt, &e.ClaimID, &at, &errTx); err != nil {
			return nil, fmt.Errorf("sqlitestore: due exhaustions: %w", err)
		}
		e.ExhaustedAt = fromMS(at)
		e.Error = errTx.String
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlitestore: due exhaustions: %w", err)
	}
	return out, nil
}

// AcknowledgeExhaustion implements [intake.Store.AcknowledgeExhaustion].
func (s *Store) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	var n int64
	if err := s.write(ctx, execOp(s.q.acknowledge, &n, id.UpdateID, id.Attempt, id.ClaimID, ms(at))); err != nil {
		return false, fmt.Errorf("sqlitestore: acknowledge %d: %w", id.UpdateID, err)
	}
	return n > 0, nil
}
