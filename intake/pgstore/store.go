package pgstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// DefaultTable is the table a [Store] uses when [Config.Table] is empty.
const DefaultTable = "telegram_updates"

// Errors a caller can branch on with [errors.Is]. They arrive wrapped with
// the operation, the table and the server's own error.
var (
	// ErrNoTable reports that the store's table does not exist: it was never
	// created ([Config.NoCreate] is set and the schema was not applied) or
	// it was dropped.
	ErrNoTable = errors.New("pgstore: table does not exist")
	// ErrNotMigrated reports, with [Config.NoCreate] set, that the table's
	// recorded schema version is behind this store's migrations. Apply the
	// missing [Migrations] (or construct a store without NoCreate).
	ErrNotMigrated = errors.New("pgstore: table schema is behind")
)

// Config configures [New]. The zero value uses [DefaultTable] and creates it
// or applies the migrations it lacks.
type Config struct {
	// Table is the update table's name; see [ValidateTable]. Defaults to
	// [DefaultTable].
	Table string
	// NoCreate, when set, leaves the schema alone: New only checks that the
	// table exists and its recorded schema version is current, and fails
	// with [ErrNoTable] or [ErrNotMigrated] otherwise. Set it when your own
	// migrations apply [Schema] (or [Migrations]), and for tools that must
	// never create a table. When unset (the default), New applies the
	// migrations the table lacks.
	NoCreate bool
	// MaxClockSkew bounds how far this host's clock may be from the
	// database's. Every claim and heartbeat checks it in its own statement
	// (the SQL function <table>_clock) and fails with a [*ClockSkewError]
	// beyond it, changing nothing, so a host whose clock runs ahead never
	// takes a live lease or a live process's rows early. Zero means
	// [DefaultMaxClockSkew]; -1 checks nothing; other values are from 1 ms
	// to [MaxMaxClockSkew].
	MaxClockSkew time.Duration
	// Logger, when set, hears what the store does in the background and
	// could not: an ANALYZE of its young table that failed (see the
	// package doc, "Statistics"). Such a failure harms nothing but plans
	// until autovacuum analyzes the table; nil discards it.
	Logger *slog.Logger
}

// Store is an [intake.Store] with every optional capability on a
// PostgreSQL table, for many processes on many machines sharing one
// database.
//
// Every state change is one conditional SQL statement, so concurrent claims
// of one row by any number of processes cannot both win. Concurrent state
// changes made through one Store share a transaction and one commit (group
// commit); a write whose row another transaction holds locked runs alone
// instead, so it never stalls the others (see writes.go). A claim in strict
// chat order ([intake.ChatOrderStore.ClaimInOrder]) runs in a transaction of
// its own under its chat's advisory lock, so two processes' claims of one
// chat cannot both win either. Times are stored as Unix milliseconds of the
// intake's clock. [Store.Due] skips rows locked by
// other transactions (FOR UPDATE SKIP LOCKED), so concurrent sweepers do not
// stampede the same rows. [Store.OwnsTx] and [Store.OwnsSQLTx] fence a
// domain write inside the caller's own transaction.
//
// A Store is safe for concurrent use. It does not own the pool: closing the
// pool is the caller's job, and Store has no Close.
type Store struct {
	pool  *pgxpool.Pool
	table string
	q     queries
	// writes groups concurrent single-statement writes into shared
	// transactions (see writes.go).
	writes groupcommit.Group[writeReq, writeRes]
	hooks  *testHooks
	// skew is the clock bound in milliseconds (0: none); clock is this
	// host's clock, time.Now but in tests.
	skew  int64
	clock func() time.Time
	// growth analyzes the table while it is young (see analyze.go).
	growth growth
	// chat records that the chat index is built (see chatorder.go).
	chat struct {
		mu    sync.Mutex
		built atomic.Bool
	}
}

// Compile-time checks of the capability levels Store claims.
var (
	_ intake.Store          = (*Store)(nil)
	_ intake.ProcessStore   = (*Store)(nil)
	_ intake.ChatOrderStore = (*Store)(nil)
	_ intake.JournalStore   = (*Store)(nil)
	_ intake.AdminStore     = (*Store)(nil)
	_ intake.HealthChecker  = (*Store)(nil)
)

// ConfigError is an invalid [Config] field, the one config error type of
// every tgrelay package (intake.ConfigError is the same type).
type ConfigError = configerr.Error

// New returns a store over the caller's pool. Unless cfg.NoCreate is set it
// brings the table to the current schema first (see [Migrations]: only when
// the recorded version is behind, under an advisory lock, so a store
// starting next to running ones takes no lock on their table); with
// cfg.NoCreate it checks that the table exists and is current. Either way
// the store it returns has every capability it claims, or New fails. The
// pool stays the caller's; New keeps no reference to cfg.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("pgstore: New: nil pool")
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if err := ValidateTable(cfg.Table); err != nil {
		return nil, configerr.New("pgstore", "Table", "is refused: %w", err)
	}
	switch {
	case cfg.MaxClockSkew == 0:
		cfg.MaxClockSkew = DefaultMaxClockSkew
	case cfg.MaxClockSkew == -1:
		cfg.MaxClockSkew = 0
	case cfg.MaxClockSkew < time.Millisecond || cfg.MaxClockSkew > MaxMaxClockSkew:
		return nil, configerr.New("pgstore", "MaxClockSkew", "is %v: want 1ms to %v, or -1 for no check (zero means %v)",
			cfg.MaxClockSkew, MaxMaxClockSkew, DefaultMaxClockSkew)
	}
	s := &Store{pool: pool, table: cfg.Table, q: buildQueries(cfg.Table), skew: cfg.MaxClockSkew.Milliseconds(), clock: time.Now}
	s.growth.analyze = func(ctx context.Context) error {
		_, err := pool.Exec(ctx, "ANALYZE "+cfg.Table)
		return err
	}
	if log := cfg.Logger; log != nil {
		table := cfg.Table
		s.growth.failed = func(err error) {
			log.Warn("pgstore: background ANALYZE failed; autovacuum will analyze the table later", "table", table, "error", err.Error())
		}
	}
	s.writes = groupcommit.Group[writeReq, writeRes]{CommitFunc: s.commitWrites, Max: maxWriteBatch, Bound: writeBound}
	if !cfg.NoCreate {
		if err := migrate(ctx, pool, cfg.Table); err != nil {
			return nil, err
		}
		return s, nil
	}
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1::text) IS NOT NULL", cfg.Table).Scan(&exists); err != nil {
		return nil, fmt.Errorf("pgstore: New: check table %s: %w", cfg.Table, err)
	}
	if !exists {
		return nil, fmt.Errorf("%w: %s (Config.NoCreate is set: apply pgstore.Schema(%q) first)", ErrNoTable, cfg.Table, cfg.Table)
	}
	ms, err := Migrations(cfg.Table)
	if err != nil {
		return nil, err
	}
	v, err := schemaVersion(ctx, pool, cfg.Table)
	if err != nil {
		return nil, fmt.Errorf("pgstore: New: read schema version of %s: %w", cfg.Table, err)
	}
	if latest := ms[len(ms)-1].Version; v < latest {
		return nil, fmt.Errorf("%w: %s is at schema version %d, this store needs %d (Config.NoCreate is set: apply the missing pgstore.Migrations(%q))",
			ErrNotMigrated, cfg.Table, v, latest, cfg.Table)
	}
	return s, nil
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return s.table }

// fail wraps a database error with the operation, mapping a missing table to
// [ErrNoTable].
func (s *Store) fail(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case clockSkewCode:
			return s.skewError(op, pgErr)
		case "42P01": // undefined_table
			return fmt.Errorf("%w: %s (%s; apply pgstore.Schema(%q) or leave Config.NoCreate unset): %w",
				ErrNoTable, s.table, op, s.table, err)
		}
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// ms converts an intake time to stored Unix milliseconds.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts stored Unix milliseconds back to a time, in UTC.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// body returns b, or an empty non-nil slice: the column is NOT NULL.
func body(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Add implements [intake.Store.Add] with INSERT … ON CONFLICT DO NOTHING.
func (s *Store) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	tag, err := s.pool.Exec(ctx, s.q.add, u.UpdateID, body(u.Body), ms(u.ReceivedAt), u.Chat)
	if err != nil {
		return false, s.fail("add", err)
	}
	s.growth.grew(int(tag.RowsAffected()))
	return tag.RowsAffected() == 1, nil
}

// addPending records a batch without claims as one multi-row INSERT (one
// statement, one transaction, one commit). Duplicates within us are removed
// before the insert, so the first one wins.
func (s *Store) addPending(ctx context.Context, us []intake.AddRequest) ([]intake.AddResult, error) {
	out := make([]intake.AddResult, len(us))
	if len(us) == 0 {
		return out, nil
	}
	first := make(map[int64]int, len(us)) // update id → index of its first occurrence
	ids := make([]int64, 0, len(us))
	bodies := make([][]byte, 0, len(us))
	ats := make([]int64, 0, len(us))
	chats := make([]string, 0, len(us))
	for i, u := range us {
		if _, dup := first[u.UpdateID]; dup {
			continue
		}
		first[u.UpdateID] = i
		ids = append(ids, u.UpdateID)
		bodies = append(bodies, body(u.Body))
		ats = append(ats, ms(u.ReceivedAt))
		chats = append(chats, u.Chat)
	}
	rows, err := s.pool.Query(ctx, s.q.addBatch, ids, bodies, ats, chats)
	if err != nil {
		return nil, s.fail("add batch", err)
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, s.fail("add batch", err)
	}
	for _, id := range inserted {
		out[first[id]].Added = true
	}
	s.growth.grew(len(inserted))
	return out, nil
}

// AddBatch implements [intake.Store.AddBatch] as one multi-row INSERT (one
// statement, one transaction, one commit) in which a claimed request's row
// is inserted processing, at attempt 1, due at its lease end, with a fresh
// random claim id (UUID v4). Duplicates within reqs are removed before the
// insert, so the first one wins. It runs on the pool, beside the shared
// transaction of the single-row writes (see writes.go), which only writes
// rows it has locked and never waits: an insert can wait for another
// transaction's uncommitted insert of the same update id, and PostgreSQL
// flushes concurrent commits together anyway.
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
		return nil, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	claimed := false
	for _, rq := range reqs {
		if rq.Claim != nil {
			if err := rq.Claim.Validate(); err != nil {
				return nil, fmt.Errorf("pgstore: %s: %w", op, err)
			}
			claimed = true
		}
	}
	if !claimed {
		return s.addPending(ctx, reqs)
	}
	out := make([]intake.AddResult, len(reqs))
	first := make(map[int64]int, len(reqs)) // update id → index of its first occurrence
	var (
		ids      = make([]int64, 0, len(reqs))
		bodies   = make([][]byte, 0, len(reqs))
		ats      = make([]int64, 0, len(reqs))
		states   = make([]string, 0, len(reqs))
		attempts = make([]int32, 0, len(reqs))
		dues     = make([]int64, 0, len(reqs))
		claims   = make([]*string, 0, len(reqs))
		owners   = make([]*string, 0, len(reqs))
		chats    = make([]string, 0, len(reqs))
	)
	claimIDs := make([]string, len(reqs))
	var owner *string
	if p.Process != "" {
		owner = &p.Process
	}
	for i, rq := range reqs {
		if _, dup := first[rq.UpdateID]; dup {
			continue
		}
		first[rq.UpdateID] = i
		received := ms(rq.ReceivedAt)
		ids = append(ids, rq.UpdateID)
		bodies = append(bodies, body(rq.Body))
		ats = append(ats, received)
		chats = append(chats, rq.Chat)
		if rq.Claim == nil {
			states, attempts, dues, claims = append(states, "pending"), append(attempts, 0), append(dues, received), append(claims, nil)
			owners = append(owners, nil)
			continue
		}
		claimIDs[i] = uuid.NewString()
		states, attempts = append(states, "processing"), append(attempts, 1)
		dues, claims = append(dues, ms(rq.Claim.LeaseUntil)), append(claims, &claimIDs[i])
		owners = append(owners, owner)
	}
	// This host's clock is read once a connection is in hand, so a wait for
	// the pool never reads as skew (see writeReq.clockArg).
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.fail(op, err)
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, s.q.addBatchClaimed, ids, bodies, ats, states, attempts, dues, claims, owners, chats,
		ms(s.clock()), s.skew)
	if err != nil {
		return nil, s.fail(op, err)
	}
	inserted, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, s.fail(op, err)
	}
	for _, id := range inserted {
		i := first[id]
		out[i].Added = true
		if reqs[i].Claim != nil {
			out[i].Identity = intake.Identity{UpdateID: id, Attempt: 1, ClaimID: claimIDs[i]}
		}
	}
	s.growth.grew(len(inserted))
	return out, nil
}

// Claim implements [intake.Store.Claim] as one conditional UPDATE that
// either takes the row, storing a fresh random claim id (UUID v4), or, when
// its attempts are spent, exhausts it: the row keeps its last claim id (or
// gets a fresh one if it never had one) and becomes an unacknowledged
// exhaustion.
func (s *Store) Claim(ctx context.Context, updateID int64, opts intake.ClaimOpts) (intake.Identity, bool, error) {
	return s.claim(ctx, "claim", updateID, opts, intake.ProcessClaim{}, false)
}

// ClaimAs implements [intake.ProcessStore.ClaimAs]: [Store.Claim] recording
// p.Process as the row's owner, counting a crash on a takeover from a
// lapsed owner in the same UPDATE.
func (s *Store) ClaimAs(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.claim(ctx, "claim as", updateID, opts, p, false)
}

// ClaimInOrder implements [intake.ChatOrderStore.ClaimInOrder]: the table
// keeps each row's chat (migration 005), and a strict claim checks its
// chat's rows in its own UPDATE, under a per-chat advisory lock (see
// claimInOrder).
func (s *Store) ClaimInOrder(ctx context.Context, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) (intake.Identity, bool, error) {
	return s.claim(ctx, "claim in order", updateID, opts, p, true)
}

func (s *Store) claim(ctx context.Context, op string, updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim, strict bool) (intake.Identity, bool, error) {
	if err := opts.Validate(); err != nil {
		return intake.Identity{}, false, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	if err := p.Validate(); err != nil {
		return intake.Identity{}, false, fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var (
		state    string
		attempts int
		claimID  string
	)
	r := writeReq{
		updateID: updateID, sql: s.q.claim,
		args: append(s.claimArgs(updateID, opts, p), uuid.NewString()), clockArg: claimClockArg,
		dest: []any{&state, &attempts, &claimID},
	}
	var n int64
	var err error
	if strict {
		r.sql = s.q.claimStrict
		if err = s.strictOrder(ctx); err == nil {
			n, err = s.claimInOrder(ctx, r)
		}
		if err != nil {
			err = s.fail(op, err)
		}
	} else {
		n, err = s.write(ctx, op, r)
	}
	if err != nil {
		return intake.Identity{}, false, err
	}
	if n == 0 || intake.State(state) != intake.StateProcessing {
		return intake.Identity{}, false, nil
	}
	return intake.Identity{UpdateID: updateID, Attempt: attempts, ClaimID: claimID}, true, nil
}

// claimArgs are the parameters $1 to $10 of the claim statements; $9,
// this host's clock, is stamped when the statement is sent.
func (s *Store) claimArgs(updateID int64, opts intake.ClaimOpts, p intake.ProcessClaim) []any {
	return []any{updateID, ms(opts.Now), ms(opts.LeaseUntil), opts.MaxAttempts, intake.AttemptsSpentText,
		p.Process, p.MaxCrashes, intake.CrashesSpentText, int64(0), s.skew}
}

// claimClockArg is the position of this host's clock among claimArgs.
const claimClockArg = 9

// claimInOrder runs the strict claim r in a transaction of its own, after
// taking the transaction-level advisory lock of the row's chat (chatLock).
//
// Under READ COMMITTED a statement sees what was committed when it began.
// Two strict claims of one chat running at once (say of a later update,
// and of an earlier one that arrived late, or that an operator requeued)
// could each check the other's row before the other's claim committed, and
// both take their row. With the lock, strict claims of a chat run one at a
// time, and each, a statement that starts only once the lock is held, sees
// the claims that held it before: of two, the second finds the first's
// live lease and refuses. The check itself needs no lock on other rows:
// every other write only settles rows, which releases a chat and can never
// make a check wrong. A row without a chat takes no lock.
//
// It costs the claim its share of group commit: one transaction, two round
// trips and a commit of its own. The transaction holds the advisory lock
// and, once the claim ran, the row's lock, and waits for nothing else
// while holding them, so it cannot deadlock with the shared transactions,
// which never wait.
func (s *Store) claimInOrder(ctx context.Context, r writeReq) (int64, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	s.stampClock(r) // once the connection is in hand, as write does
	b := &pgx.Batch{}
	b.BeginTx(pgx.TxOptions{})
	b.Queue(s.q.chatLock, r.updateID)
	b.Queue(r.sql.alone, r.args...)
	br := conn.SendBatch(ctx, b)
	tx := br.Tx()
	defer func() { _ = tx.Rollback(ctx) }() // no-op once committed
	n, err := readInOrder(br, r)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit of a claim in chat order: %w", err)
	}
	return n, nil
}

// readInOrder reads claimInOrder's round trip: the begin, the lock, the
// claim.
func readInOrder(br pgx.BatchResults, r writeReq) (int64, error) {
	if _, err := br.Exec(); err != nil {
		return 0, err
	}
	if _, err := br.Exec(); err != nil {
		return 0, err
	}
	err := br.QueryRow().Scan(r.dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return 1, nil
}

// Renew implements [intake.Store.Renew].
func (s *Store) Renew(ctx context.Context, id intake.Identity, leaseUntil, now time.Time) (bool, error) {
	n, err := s.write(ctx, "renew", writeReq{updateID: id.UpdateID, sql: s.q.renew, args: []any{id.UpdateID, id.Attempt, ms(leaseUntil), ms(now), id.ClaimID}})
	return n == 1, err
}

// Settle implements [intake.Store.Settle].
func (s *Store) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	if err := checkSettlement(st); err != nil {
		return false, err
	}
	v := &settleVals{attempt: id.Attempt, state: string(st.State), at: ms(st.At), retryAt: ms(st.RetryAt),
		errText: st.Error, claimID: id.ClaimID}
	r := writeReq{updateID: id.UpdateID, settle: v}
	rec := st.Attempt
	if rec != nil {
		// The record rides on the settlement (intake.Settlement.Attempt).
		v.rec, v.process, v.started, v.ended = true, rec.Process, ms(rec.StartedAt), ms(rec.EndedAt)
		v.outcome, v.recErr, v.status = string(rec.Outcome), rec.Error, rec.Status
		v.header, v.body = sqlschema.EncodeHeader(rec.Header), body(rec.Body)
	}
	switch {
	case rec == nil:
		r.sql = s.q.settle
		r.args = []any{id.UpdateID, v.attempt, v.state, v.at, v.retryAt, v.errText, v.claimID}
	case st.State == intake.StateCompleted:
		// A completed row keeps its completing attempt's record.
		r.sql = s.attemptSQL().settleDone
		r.args = []any{id.UpdateID, v.attempt, v.at, v.claimID,
			v.process, v.started, v.ended, v.outcome, v.recErr, v.status, v.header, v.body}
	default:
		r.sql = s.attemptSQL().settleRecorded
		r.args = []any{id.UpdateID, v.attempt, v.state, v.at, v.retryAt, v.errText, v.claimID,
			v.process, v.started, v.ended, v.outcome, v.recErr, v.status, v.header, v.body}
	}
	n, err := s.write(ctx, "settle", r)
	return n == 1, err
}

func checkSettlement(st intake.Settlement) error {
	if err := st.Validate(); err != nil {
		return fmt.Errorf("pgstore: settle: %w", err)
	}
	return nil
}

// Due implements [intake.Store.Due]. Rows locked by another transaction (a
// claim in flight, a domain transaction holding [Store.OwnsTx], another
// sweeper's [Store.DueTx]) are skipped (FOR UPDATE SKIP LOCKED) rather than
// waited for; run on the pool, the locks last only for the statement.
func (s *Store) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	return s.due(ctx, s.pool, q, false, "")
}

// DueInOrder implements [intake.ChatOrderStore.DueInOrder], skipping
// locked rows as [Store.Due] does.
func (s *Store) DueInOrder(ctx context.Context, q intake.DueQuery, chat string) ([]intake.StoredUpdate, error) {
	return s.due(ctx, s.pool, q, true, chat)
}

// DueTx is [Store.Due] inside the caller's transaction: the listed rows stay
// locked until tx ends, so sweepers that each list a page in their own
// transaction get disjoint pages.
func (s *Store) DueTx(ctx context.Context, tx pgx.Tx, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	return s.due(ctx, tx, q, false, "")
}

// querier is what a pool and a pgx transaction have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (s *Store) due(ctx context.Context, db querier, q intake.DueQuery, strict bool, chat string) ([]intake.StoredUpdate, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: due: %w", err)
	}
	if strict {
		if err := s.strictOrder(ctx); err != nil {
			return nil, s.fail("due", err)
		}
	}
	var (
		rows pgx.Rows
		err  error
	)
	switch {
	case strict && chat != "":
		rows, err = db.Query(ctx, s.q.dueChat, ms(q.Now), ms(q.PendingBefore), q.Limit, chat)
	case strict:
		rows, err = db.Query(ctx, s.q.dueStrict, ms(q.Now), ms(q.PendingBefore), q.Limit)
	default:
		rows, err = db.Query(ctx, s.q.due, ms(q.Now), ms(q.PendingBefore), q.Limit)
	}
	if err != nil {
		return nil, s.fail("due", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (intake.StoredUpdate, error) {
		var (
			u        intake.StoredUpdate
			received int64
		)
		err := r.Scan(&u.UpdateID, &u.Body, &received)
		u.ReceivedAt = fromMS(received)
		return u, err
	})
	if err != nil {
		return nil, s.fail("due", err)
	}
	return out, nil
}

// Prune implements [intake.Store.Prune].
func (s *Store) Prune(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, s.q.prune, ms(before))
	if err != nil {
		return 0, s.fail("prune", err)
	}
	return int(tag.RowsAffected()), nil
}

// Owns implements [intake.Store.Owns]. It selects the row FOR UPDATE,
// but on the pool that lock ends with the statement, so it proves nothing
// about a later write. To fence a domain write, check ownership inside the
// write's transaction: [Store.OwnsTx] with a pgx transaction,
// [Store.OwnsSQLTx] with a database/sql one, or the SQL function
// <table>_owns from any language.
func (s *Store) Owns(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	return s.owns(ctx, s.pool, "owns", id, at)
}

// OwnsTx reports, inside the caller's pgx transaction tx, whether id still
// holds a live lease at at, and locks the update's row (FOR UPDATE) when it
// does. The lock lasts until tx commits or rolls back, so no other worker
// can reclaim the update in between: a domain write made in tx after OwnsTx
// reported true commits only under the live claim, and a reclaim waits for
// it. Write only when it reports true; roll back otherwise. It fences a
// stale attempt only: a retry of the same update owns it again and writes
// again; [Store.Once] also records the effect, for exactly once.
//
// tx must be on the store's database. See [Store.OwnsSQLTx] for database/sql
// transactions and [Store.Owns] for the unfenced check.
func (s *Store) OwnsTx(ctx context.Context, tx pgx.Tx, id intake.Identity, at time.Time) (bool, error) {
	return s.owns(ctx, tx, "owns in transaction", id, at)
}

func (s *Store) owns(ctx context.Context, db querier, op string, id intake.Identity, at time.Time) (bool, error) {
	var owned bool
	err := db.QueryRow(ctx, s.q.owns, id.UpdateID, id.Attempt, id.ClaimID, ms(at)).Scan(&owned)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.fail(op, err)
	}
	return owned, nil
}

// Exhaust implements [intake.Store.Exhaust].
func (s *Store) Exhaust(ctx context.Context, id intake.Identity, at time.Time, errText string) (bool, error) {
	n, err := s.write(ctx, "exhaust", writeReq{updateID: id.UpdateID, sql: s.q.exhaust, args: []any{id.UpdateID, id.Attempt, id.ClaimID, ms(at), errText}})
	return n == 1, err
}

// DueExhaustions implements [intake.Store.DueExhaustions]. A row
// without a claim id (possible only through writes from outside the store)
// cannot be acknowledged and is not listed; [Store.List] shows it and
// [Store.Requeue] revives it.
func (s *Store) DueExhaustions(ctx context.Context, q intake.ExhaustionQuery) ([]intake.Exhaustion, error) {
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: due exhaustions: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.q.dueExhaustions, q.After, q.Limit)
	if err != nil {
		return nil, s.fail("due exhaustions", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (intake.Exhaustion, error) {
		var (
			e      intake.Exhaustion
			at     int64
			errTxt *string
		)
		err := r.Scan(&e.UpdateID, &e.Body, &e.Attempt, &e.ClaimID, &at, &errTxt)
		e.ExhaustedAt = fromMS(at)
		if errTxt != nil {
			e.Error = *errTxt
		}
		return e, err
	})
	if err != nil {
		return nil, s.fail("due exhaustions", err)
	}
	return out, nil
}

// AcknowledgeExhaustion implements [intake.Store.AcknowledgeExhaustion].
func (s *Store) AcknowledgeExhaustion(ctx context.Context, id intake.Identity, at time.Time) (bool, error) {
	n, err := s.write(ctx, "acknowledge exhaustion", writeReq{updateID: id.UpdateID, sql: s.q.acknowledge, args: []any{id.UpdateID, id.Attempt, id.ClaimID, ms(at)}})
	return n == 1, err
}
