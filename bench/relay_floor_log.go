package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// The log-shaped contract floor (floor-log-*): the writes DESIGN's
// guarantees ask for an update handled once, laid out so that nothing is
// ever rewritten. A table row that is updated costs SQLite a rewrite of
// the whole row and of each index entry that moves, and its page is
// written to the WAL again; an append costs one new cell in a page the
// batch writes anyway. So this floor keeps apart what changes at
// different times:
//
//   - log_rows: the update as received, with the claim that fences it
//     (update_id, body, claim_id, attempts, chat, received_at), written
//     once before the 200 and never changed;
//   - log_live: the lease of each live row, keyed by its end (due_at,
//     update_id, claim_id), the only thing a sweep reads; the row's
//     entry is inserted with it and deleted by its settlement, fenced by
//     its claim (the delete must find it);
//   - log_done: each settlement, with its attempt's record (claim, start,
//     end, the app's status and answer), appended.
//
// Adds and settlements share one group commit: a settlement is queued,
// and the next commit, whichever starts it, carries it (floorLog), so a
// settlement costs no commit of its own. It measures whether a layout
// that never rewrites a row lifts the contract floor, and by how much
// (BENCHMARKS.md, relay, session 28).

// floorLogFlushAfter is how long a settlement waits for an add's
// transaction to carry it before it starts one of its own.
const floorLogFlushAfter = 5 * time.Millisecond

// floorLog is the log-shaped contract floor over an engine's tables.
//
// A settlement waits for nothing: the forward worker queues it and goes
// on, and the next transaction, whichever starts it, writes every queued
// settlement in two multi-row statements. Nobody waits on a completion's
// durability (a completion lost in a crash is handled again, which at
// least once allows), so this is the least a settlement can cost the
// path it is made on. With wait, each settlement waits for the commit
// that carries it instead, as a store's Settle does (floor-log-wait).
type floorLog struct {
	eng   floorLogEngine
	group *groupcommit.Group[[]floorRow, []bool]
	wait  bool

	mu      sync.Mutex
	queued  []floorSettle
	flusher *time.Timer
}

// floorLogEngine writes the log floor's tables on one engine.
type floorLogEngine interface {
	// commit writes settles, then the rows of batches, in one durable
	// transaction, and reports which rows were new. A settlement whose
	// lease entry is not there under its claim fails the transaction.
	commit(ctx context.Context, settles []floorSettle, batches [][]floorRow) ([][]bool, error)
	count(ctx context.Context) (int64, error)
	close()
}

func newFloorLog(eng floorLogEngine, wait bool) *floorLog {
	f := &floorLog{eng: eng, wait: wait}
	f.group = &groupcommit.Group[[]floorRow, []bool]{CommitFunc: f.commit, Max: floorMaxBatch, Bound: floorCommitBound}
	return f
}

// commit is the group's: a batch of adds, and every settlement queued.
func (f *floorLog) commit(ctx context.Context, batches [][]floorRow) ([][]bool, error) {
	f.mu.Lock()
	settles := f.queued
	f.queued = nil
	f.mu.Unlock()
	return f.eng.commit(ctx, settles, batches)
}

func (f *floorLog) add(ctx context.Context, rows []floorRow) ([]bool, error) {
	due := time.Now().Add(intake.DefaultLeaseDuration).UnixMilli()
	for _, r := range rows {
		*r.due = due
	}
	return f.group.Do(ctx, rows)
}

// settleRow queues row's settlement for the next transaction: an add's,
// or, when none comes within floorLogFlushAfter, one of its own. Without
// f.wait it returns at once; with it, once that transaction committed.
func (f *floorLog) settleRow(ctx context.Context, row floorRow, started time.Time, answer []byte) error {
	f.mu.Lock()
	f.queued = append(f.queued, floorSettle{id: row.id, claimID: row.claimID, due: *row.due, started: started, ended: time.Now(), answer: answer})
	if f.wait {
		f.mu.Unlock()
		// A request with no adds rides in the next batch, whose commit
		// takes every settlement queued before it began.
		_, err := f.group.Defer(ctx, nil, floorLogFlushAfter)
		return err
	}
	if len(f.queued) == 1 {
		if f.flusher == nil {
			f.flusher = time.AfterFunc(floorLogFlushAfter, f.flush)
		} else {
			f.flusher.Reset(floorLogFlushAfter)
		}
	}
	f.mu.Unlock()
	return nil
}

// flush commits the queued settlements if no add has carried them.
func (f *floorLog) flush() {
	f.mu.Lock()
	n := len(f.queued)
	f.mu.Unlock()
	if n > 0 {
		_, _ = f.group.Do(context.Background(), nil)
	}
}

func (*floorLog) keepsChat() {}

func (*floorLog) leasesRows() {}

func (*floorLog) settle(context.Context, []floorSettle) error {
	return fmt.Errorf("floor-log: settles row by row (settleRow)")
}

func (f *floorLog) count(ctx context.Context) (int64, error) { return f.eng.count(ctx) }

// close commits the settlements still queued, stops the flush timer, and
// closes the engine: a timer firing later would find it closed.
func (f *floorLog) close() {
	f.flush()
	f.mu.Lock()
	if f.flusher != nil {
		f.flusher.Stop()
	}
	f.mu.Unlock()
	f.eng.close()
}

// floorLogSQLite is the log floor's tables on SQLite, opened as the bare
// floor is (as sqlitestore opens its writer).
type floorLogSQLite struct {
	db     *sql.DB
	insRow *sql.Stmt
	stmts  map[string]*sql.Stmt // multi-row statements by name and rows
}

func openFloorLogSQLite(ctx context.Context, path string, wait bool) (*floorLog, error) {
	db, err := openFloorSQLiteDB(path)
	if err != nil {
		return nil, fmt.Errorf("floor-log sqlite: %w", err)
	}
	s := &floorLogSQLite{db: db, stmts: make(map[string]*sql.Stmt)}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS log_rows (update_id INTEGER PRIMARY KEY, body TEXT NOT NULL,
			claim_id INTEGER NOT NULL, attempts INTEGER NOT NULL, chat TEXT NOT NULL, received_at INTEGER NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS log_live (due_at INTEGER NOT NULL, update_id INTEGER NOT NULL, claim_id INTEGER NOT NULL,
			PRIMARY KEY (due_at, update_id)) WITHOUT ROWID`,
		`CREATE TABLE IF NOT EXISTS log_done (update_id INTEGER NOT NULL, claim_id INTEGER NOT NULL,
			settled_at INTEGER NOT NULL, started_at INTEGER NOT NULL, ended_at INTEGER NOT NULL, status INTEGER NOT NULL DEFAULT 200, answer BLOB NOT NULL DEFAULT x'')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			return nil, fmt.Errorf("floor-log sqlite: %w", err)
		}
	}
	if s.insRow, err = db.PrepareContext(ctx, `INSERT INTO log_rows (update_id, body, claim_id, attempts, chat, received_at) VALUES (?1, ?2, ?3, 1, ?4, ?5) ON CONFLICT DO NOTHING`); err != nil {
		db.Close()
		return nil, fmt.Errorf("floor-log sqlite: %w", err)
	}
	for _, c := range []struct {
		name string
		q    func(n int) string
	}{
		{"del", func(n int) string {
			return `DELETE FROM log_live WHERE (due_at, update_id, claim_id) IN (VALUES ` + floorValues(n, 3) + `)`
		}},
		{"done", func(n int) string {
			return `INSERT INTO log_done (update_id, claim_id, settled_at, started_at, ended_at, answer) VALUES ` + floorValues(n, 6)
		}},
		{"live", func(n int) string {
			return `INSERT INTO log_live (due_at, update_id, claim_id) VALUES ` + floorValues(n, 3)
		}},
	} {
		if err := s.prepareChunks(ctx, c.name, c.q); err != nil {
			db.Close()
			return nil, fmt.Errorf("floor-log sqlite: %w", err)
		}
	}
	return newFloorLog(s, wait), nil
}

// floorLogChunks are the row counts of the multi-row statements, each
// prepared at open: a list of n rows runs as chunks of these sizes, the
// largest first (37 = 32 + 4 + 1).
var floorLogChunks = []int{64, 32, 16, 8, 4, 2, 1}

// prepareChunks prepares q(n) for every chunk size, keyed by name and size.
func (s *floorLogSQLite) prepareChunks(ctx context.Context, name string, q func(n int) string) error {
	for _, n := range floorLogChunks {
		st, err := s.db.PrepareContext(ctx, q(n))
		if err != nil {
			return err
		}
		s.stmts[fmt.Sprint(name, n)] = st
	}
	return nil
}

// execChunks runs the statements named name over the rows of args, cols
// values each, in chunks, and returns the rows they changed.
func (s *floorLogSQLite) execChunks(ctx context.Context, tx *sql.Tx, name string, cols int, args []any) (int64, error) {
	var changed int64
	for len(args) > 0 {
		rows := len(args) / cols
		for _, n := range floorLogChunks {
			if n > rows {
				continue
			}
			r, err := tx.StmtContext(ctx, s.stmts[fmt.Sprint(name, n)]).ExecContext(ctx, args[:n*cols]...)
			if err != nil {
				return changed, err
			}
			k, err := r.RowsAffected()
			if err != nil {
				return changed, err
			}
			changed += k
			args = args[n*cols:]
			break
		}
	}
	return changed, nil
}

func (s *floorLogSQLite) commit(ctx context.Context, settles []floorSettle, batches [][]floorRow) ([][]bool, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	now := time.Now().UnixMilli()
	if n := len(settles); n > 0 {
		dargs := make([]any, 0, 3*n)
		iargs := make([]any, 0, 6*n)
		for _, st := range settles {
			dargs = append(dargs, st.due, st.id, st.claimID)
			iargs = append(iargs, st.id, st.claimID, now, st.started.UnixMilli(), st.ended.UnixMilli(), floorAnswer(st.answer))
		}
		if k, err := s.execChunks(ctx, tx, "del", 3, dargs); err != nil || k != int64(n) {
			return nil, fmt.Errorf("%d settlements: %d applied (%v)", n, k, err)
		}
		if _, err := s.execChunks(ctx, tx, "done", 6, iargs); err != nil {
			return nil, err
		}
	}
	res := make([][]bool, len(batches))
	var live []any
	insRow := tx.StmtContext(ctx, s.insRow)
	for i, rows := range batches {
		added := make([]bool, len(rows))
		for k, row := range rows {
			r, err := insRow.ExecContext(ctx, row.id, row.body, row.claimID, row.chat, now)
			if err != nil {
				return nil, err
			}
			n, err := r.RowsAffected()
			if err != nil {
				return nil, err
			}
			if added[k] = n == 1; added[k] {
				live = append(live, *row.due, row.id, row.claimID)
			}
		}
		res[i] = added
	}
	if _, err := s.execChunks(ctx, tx, "live", 3, live); err != nil {
		return nil, err
	}
	return res, tx.Commit()
}

func (s *floorLogSQLite) count(ctx context.Context) (n int64, err error) {
	return n, s.db.QueryRowContext(ctx, `SELECT count(*) FROM log_rows`).Scan(&n)
}

func (s *floorLogSQLite) close() { s.db.Close() }

// floorAnswer is answer as the log floor's answer column takes it: empty
// for none, as NOT NULL asks.
func floorAnswer(answer []byte) []byte {
	if answer == nil {
		return []byte{}
	}
	return answer
}

// floorValues is a VALUES list of rows rows of cols parameters each.
func floorValues(rows, cols int) string {
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	return strings.TrimSuffix(strings.Repeat(row+", ", rows), ", ")
}

// floorLogPostgres is the log floor's tables on PostgreSQL, each commit
// one statement, synchronous_commit on: a settlement's lease entries
// deleted and records appended, and the new rows with their lease entries
// inserted, in data-modifying CTEs. One statement is one round trip and
// one transaction; a fence that does not hold fails it whole (see
// floorLogCommitSQL).
type floorLogPostgres struct {
	pool *pgxpool.Pool
}

// floorLogCommitSQL is the log floor's commit on PostgreSQL. $1–$5 are the
// settlements (lease ends, ids, claims, starts, ends), $6 how many, $12
// their answers; $7–$10 the rows (ids, bodies, claims, chats), $11 their
// lease end. It answers a row (NULL, settled) then one (id, NULL) per new
// row. When fewer settlements applied than were asked, the final select
// casts a sentence to an integer: the statement fails, and with it every
// write it made.
const floorLogCommitSQL = `WITH del AS (
	DELETE FROM log_live AS l USING unnest($1::bigint[], $2::bigint[], $3::bigint[]) AS u(due, id, claim)
	WHERE l.due_at = u.due AND l.update_id = u.id AND l.claim_id = u.claim RETURNING 1
), done AS (
	INSERT INTO log_done (update_id, claim_id, settled_at, started_at, ended_at, answer)
	SELECT u.id, u.claim, now(), u.started, u.ended, u.answer
	FROM unnest($2::bigint[], $3::bigint[], $4::timestamptz[], $5::timestamptz[], $12::bytea[]) AS u(id, claim, started, ended, answer)
), fresh AS (
	INSERT INTO log_rows (update_id, body, claim_id, attempts, chat, received_at)
	SELECT u.id, u.body, u.claim, 1, u.chat, now()
	FROM unnest($7::bigint[], $8::bytea[], $9::bigint[], $10::text[]) AS u(id, body, claim, chat)
	ON CONFLICT DO NOTHING RETURNING update_id, claim_id
), live AS (
	INSERT INTO log_live (due_at, update_id, claim_id) SELECT $11, update_id, claim_id FROM fresh
), settled AS (
	SELECT count(*) AS n FROM del
)
SELECT NULL::bigint, CASE WHEN n = $6 THEN n ELSE (n || ' of ' || $6 || ' settlements applied')::bigint END FROM settled
UNION ALL
SELECT update_id, NULL FROM fresh`

func openFloorLogPostgres(ctx context.Context, url string, wait bool) (*floorLog, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("floor-log postgres: %w", err)
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS log_rows (update_id bigint PRIMARY KEY, body bytea NOT NULL,
			claim_id bigint NOT NULL, attempts int NOT NULL, chat text NOT NULL, received_at timestamptz NOT NULL)`,
		`CREATE TABLE IF NOT EXISTS log_live (due_at bigint NOT NULL, update_id bigint NOT NULL, claim_id bigint NOT NULL,
			PRIMARY KEY (due_at, update_id))`,
		`CREATE TABLE IF NOT EXISTS log_done (update_id bigint NOT NULL, claim_id bigint NOT NULL,
			settled_at timestamptz NOT NULL, started_at timestamptz NOT NULL, ended_at timestamptz NOT NULL,
			status int NOT NULL DEFAULT 200, answer bytea NOT NULL DEFAULT '')`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			pool.Close()
			return nil, fmt.Errorf("floor-log postgres: %w", err)
		}
	}
	return newFloorLog(&floorLogPostgres{pool: pool}, wait), nil
}

func (s *floorLogPostgres) commit(ctx context.Context, settles []floorSettle, batches [][]floorRow) ([][]bool, error) {
	n := len(settles)
	dues, ids, claims := make([]int64, n), make([]int64, n), make([]int64, n)
	started, ended := make([]time.Time, n), make([]time.Time, n)
	answers := make([][]byte, n)
	for i, st := range settles {
		dues[i], ids[i], claims[i], started[i], ended[i] = st.due, st.id, st.claimID, st.started, st.ended
		answers[i] = floorAnswer(st.answer)
	}
	var (
		rowIDs, rowClaims []int64
		bodies            [][]byte
		chats             []string
		due               int64
	)
	for _, rows := range batches {
		for _, r := range rows {
			rowIDs, rowClaims, bodies, chats, due = append(rowIDs, r.id), append(rowClaims, r.claimID), append(bodies, r.body), append(chats, r.chat), *r.due
		}
	}
	got, err := s.pool.Query(ctx, floorLogCommitSQL, dues, ids, claims, started, ended, n, rowIDs, bodies, rowClaims, chats, due, answers)
	if err != nil {
		return nil, err
	}
	defer got.Close()
	fresh := make(map[int64]bool, len(rowIDs))
	for got.Next() {
		var id, settled *int64
		if err := got.Scan(&id, &settled); err != nil {
			return nil, err
		}
		if id != nil {
			fresh[*id] = true
		}
	}
	if err := got.Err(); err != nil {
		return nil, err
	}
	res := make([][]bool, len(batches))
	for i, rows := range batches {
		res[i] = make([]bool, len(rows))
		for k, r := range rows {
			res[i][k] = fresh[r.id]
		}
	}
	return res, nil
}

func (s *floorLogPostgres) count(ctx context.Context) (n int64, err error) {
	return n, s.pool.QueryRow(ctx, `SELECT count(*) FROM log_rows`).Scan(&n)
}

func (s *floorLogPostgres) close() { s.pool.Close() }
