package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

// claimableSQL is the claimable predicate at ?2 (now): a pending row always,
// a failed row once its retry is due, a processing row only once its lease
// ended strictly before now (a lease is live through its end inclusive).
const claimableSQL = `(state = 'pending' OR (state = 'failed' AND due_at <= ?2) OR (state = 'processing' AND due_at < ?2))`

// liveSQL is true for a live row: pending, processing or failed. It is
// the predicate of the partial indexes {{table}}_live and {{table}}_chat,
// and every query that reads one of them repeats it as written: SQLite
// uses a partial index only for a query whose WHERE holds its predicate.
//
// It is an OR of equalities, not state IN (...). SQLite evaluates an IN
// list of more than two constants by building a temporary b-tree of them,
// once in every statement that evaluates it, and a partial index's
// predicate is evaluated by every insert and every update of a row: each
// claimed add and each settlement paid for one (migration 009: serve's
// CPU per update 271 → 243 µs, BENCHMARKS.md, relay, session 19).
const liveSQL = `(state = 'pending' OR state = 'processing' OR state = 'failed')`

// liveOtherSQL is liveSQL for the row aliased o.
const liveOtherSQL = `(o.state = 'pending' OR o.state = 'processing' OR o.state = 'failed')`

// lapsedSQL is true for a processing row whose owner is not live at ?2: no
// heartbeat of the owner lasts through ?2 (it lapsed, left, was reaped or
// never registered). Claiming such a row counts a crash.
const lapsedSQL = `(state = 'processing' AND owner IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM "{{table}}_procs" AS p WHERE p.process_id = "{{table}}".owner AND p.until_ms >= ?2))`

// crashSQL is 1 when the claim counts a crash, else 0.
const crashSQL = `(CASE WHEN ` + lapsedSQL + ` THEN 1 ELSE 0 END)`

// takesSQL is true when a claimable row is taken rather than spent: with a
// crash budget (?8 > 0) crashed attempts count against it and not against
// the attempt ceiling ?4 (see intake.ProcessClaim.MaxCrashes).
const takesSQL = `(CASE WHEN ?8 > 0 THEN attempts - crashes - ` + crashSQL + ` < ?4 AND crashes + ` + crashSQL + ` < ?8 ELSE attempts < ?4 END)`

// inOrderSQL is the strict chat order condition at ?2 (now), for a row of
// "{{table}}" (see [intake.ChatOrderStore]): its chat is empty,
// or no other row of its chat is live (pending, processing or failed) with
// a lower update id, nor processing under a lease live at now. The chat
// index yields a chat's live rows in update id order, so each of the two
// checks reads one index range: the rows below the update id, and, with
// none there, those above it under a live lease.
const inOrderSQL = `(chat = '' OR (
    NOT EXISTS (SELECT 1 FROM "{{table}}" AS o INDEXED BY "{{table}}_chat"
        WHERE o.chat = "{{table}}".chat AND o.update_id < "{{table}}".update_id
          AND ` + liveOtherSQL + `)
    AND NOT EXISTS (SELECT 1 FROM "{{table}}" AS o INDEXED BY "{{table}}_chat"
        WHERE o.chat = "{{table}}".chat AND o.update_id > "{{table}}".update_id
          AND ` + liveOtherSQL + `
          AND o.state = 'processing' AND o.due_at >= ?2)))`

// Statement texts; {{table}} is replaced by the validated table name. Every
// state change is one statement, so it is atomic without a transaction.
const (
	// ?1 update_id, ?2 body, ?3 received_at, ?4 chat.
	addSQL = `INSERT INTO "{{table}}" (update_id, body, state, attempts, due_at, received_at, chat)
VALUES (?1, ?2, 'pending', 0, ?3, ?3, ?4) ON CONFLICT (update_id) DO NOTHING`

	// ?1 update_id, ?2 now, ?3 lease end, ?4 max attempts, ?5 fresh claim
	// id, ?6 the spent error text, ?7 owner ('' for none), ?8 max crashes,
	// ?9 the crashes-spent error text. A claimable row below the ceiling is
	// taken; one at the ceiling is spent (an unacknowledged exhaustion),
	// keeping its claim id or filling a fresh one. Both in one statement,
	// and every right-hand side reads the row as it was.
	claimSetSQL = `UPDATE "{{table}}" SET
    crashes    = crashes + {{crash}},
    state      = CASE WHEN {{takes}} THEN 'processing' ELSE 'abandoned' END,
    attempts   = CASE WHEN {{takes}} THEN attempts + 1 ELSE attempts END,
    due_at     = CASE WHEN {{takes}} THEN ?3 ELSE ?2 END,
    error      = CASE WHEN {{takes}} THEN NULL WHEN ?8 > 0 AND crashes + {{crash}} >= ?8 THEN ?9 ELSE ?6 END,
    settled_at = NULL,
    claim_id   = CASE WHEN {{takes}} THEN ?5 ELSE coalesce(claim_id, ?5) END,
    owner      = CASE WHEN {{takes}} THEN nullif(?7, '') ELSE owner END`
	claimSQL = claimSetSQL + `
WHERE update_id = ?1 AND (` + claimableSQL + ` OR {{lapsed}})
RETURNING state, attempts, claim_id`

	// claimStrictSQL is claimSQL in strict chat order: the same parameters,
	// and the row must also be in order at ?2. Like every write it runs on
	// the one writer connection, inside SQLite's write lock, so the check
	// and the claim are one step for every process on the file.
	claimStrictSQL = claimSetSQL + `
WHERE update_id = ?1 AND (` + claimableSQL + ` OR {{lapsed}}) AND ` + inOrderSQL + `
RETURNING state, attempts, claim_id`

	// ?1 update_id, ?2 attempt, ?3 lease end, ?4 now, ?5 claim id.
	renewSQL = `UPDATE "{{table}}" SET due_at = max(due_at, ?3)
WHERE update_id = ?1 AND state = 'processing' AND attempts = ?2 AND due_at >= ?4 AND claim_id = ?5`

	// ?1 update_id, ?2 attempt, ?3 state, ?4 at, ?5 retry at, ?6 error,
	// ?7 claim id.
	settleSQL = `UPDATE "{{table}}" SET
    state      = ?3,
    settled_at = CASE WHEN ?3 = 'failed' THEN NULL ELSE ?4 END,
    due_at     = CASE WHEN ?3 = 'failed' THEN ?5 ELSE due_at END,
    error      = CASE WHEN ?3 = 'completed' THEN NULL ELSE ?6 END
WHERE update_id = ?1 AND state = 'processing' AND attempts = ?2 AND due_at >= ?4 AND claim_id = ?7`

	// ?1 update_id, ?2 attempt, ?3 claim id, ?4 at.
	ownsSQL = `SELECT 1 FROM "{{table}}"
WHERE update_id = ?1 AND state = 'processing' AND attempts = ?2 AND claim_id = ?3 AND due_at >= ?4`

	// ownsTxSQL is ownsSQL as a write that changes nothing: running it takes
	// SQLite's write lock for the caller's transaction (even a deferred one),
	// so no other connection can commit a reclaim before that transaction
	// ends. Same parameters as ownsSQL.
	ownsTxSQL = `UPDATE "{{table}}" SET due_at = due_at
WHERE update_id = ?1 AND state = 'processing' AND attempts = ?2 AND claim_id = ?3 AND due_at >= ?4
RETURNING 1`

	// ?1 pending before, ?2 now, ?3 limit. The partial index {{table}}_live
	// (whose predicate the liveSQL term matches) yields live rows in
	// update id order, so the scan stops after limit matches and never
	// visits finished rows. Without INDEXED BY the planner, lacking
	// statistics, once preferred an OR of range scans of the (state,
	// due_at) index (migration 010 dropped it) followed by a sort of every
	// match, which read the whole backlog on every sweep; the hint keeps
	// any index added later from doing the same.
	dueSQL = `SELECT update_id, body, received_at FROM "{{table}}" INDEXED BY "{{table}}_live"
WHERE ` + liveSQL + `
  AND ((state = 'pending' AND received_at <= ?1) OR (state = 'failed' AND due_at <= ?2) OR (state = 'processing' AND due_at < ?2)
    OR {{lapsed}})
ORDER BY update_id LIMIT ?3`

	// dueStrictSQL is dueSQL listing only the rows in order at ?2.
	dueStrictSQL = `SELECT update_id, body, received_at FROM "{{table}}" INDEXED BY "{{table}}_live"
WHERE ` + liveSQL + `
  AND ((state = 'pending' AND received_at <= ?1) OR (state = 'failed' AND due_at <= ?2) OR (state = 'processing' AND due_at < ?2)
    OR {{lapsed}})
  AND ` + inOrderSQL + `
ORDER BY update_id LIMIT ?3`

	// dueChatSQL is dueStrictSQL for the rows of chat ?4 only, through the
	// chat index.
	dueChatSQL = `SELECT update_id, body, received_at FROM "{{table}}" INDEXED BY "{{table}}_chat"
WHERE chat = ?4 AND ` + liveSQL + `
  AND ((state = 'pending' AND received_at <= ?1) OR (state = 'failed' AND due_at <= ?2) OR (state = 'processing' AND due_at < ?2)
    OR {{lapsed}})
  AND ` + inOrderSQL + `
ORDER BY update_id LIMIT ?3`

	// ?1 before. Through the partial index {{table}}_settled, one range
	// per state in time order, a prune reads only the rows settled before
	// ?1. SQLite keeps no statistics here, and without the hint it once
	// took the state IN term to the (state, due_at) index instead
	// (migration 010 dropped it): a read of every completed row the
	// retention keeps, on each sweep, holding the writer.
	pruneSQL = `DELETE FROM "{{table}}" INDEXED BY "{{table}}_settled"
WHERE settled_at < ?1 AND state IN ('completed', 'abandoned')`

	// ?1 update_id, ?2 attempt, ?3 claim id, ?4 at, ?5 error.
	exhaustSQL = `UPDATE "{{table}}" SET state = 'abandoned', due_at = ?4, settled_at = NULL, error = ?5
WHERE update_id = ?1 AND state = 'processing' AND attempts = ?2 AND claim_id = ?3 AND due_at >= ?4`

	// ?1 limit [, ?2 after]. Through the partial index
	// {{table}}_unacknowledged, in update id order, rather than every
	// abandoned row the retention keeps, sorted.
	dueExhaustionsSQL = `SELECT update_id, body, attempts, claim_id, due_at, error FROM "{{table}}" INDEXED BY "{{table}}_unacknowledged"
WHERE state = 'abandoned' AND settled_at IS NULL AND claim_id IS NOT NULL
ORDER BY update_id LIMIT ?1`
	dueExhaustionsAfterSQL = `SELECT update_id, body, attempts, claim_id, due_at, error FROM "{{table}}" INDEXED BY "{{table}}_unacknowledged"
WHERE state = 'abandoned' AND settled_at IS NULL AND claim_id IS NOT NULL AND update_id > ?2
ORDER BY update_id LIMIT ?1`

	// ?1 update_id, ?2 attempt, ?3 claim id, ?4 at.
	acknowledgeSQL = `UPDATE "{{table}}" SET settled_at = ?4
WHERE update_id = ?1 AND state = 'abandoned' AND settled_at IS NULL AND attempts = ?2 AND claim_id = ?3`

	// ?1 update_id, ?2 now.
	requeueSQL = `UPDATE "{{table}}" SET state = 'pending', attempts = 0, crashes = 0, due_at = ?2, settled_at = NULL, error = NULL
WHERE update_id = ?1 AND state IN ('failed', 'abandoned')`

	// ?1 process id, ?2 heartbeat end.
	registerSQL = `INSERT INTO "{{table}}_procs" (process_id, until_ms) VALUES (?1, ?2)
ON CONFLICT (process_id) DO NOTHING`
	// ?1 process id, ?2 heartbeat end, ?3 now. Never shortens, never revives.
	beatSQL = `UPDATE "{{table}}_procs" SET until_ms = max(until_ms, ?2)
WHERE process_id = ?1 AND until_ms >= ?3`
	// ?1 process id.
	leaveSQL = `DELETE FROM "{{table}}_procs" WHERE process_id = ?1`
	// ?1 now.
	reapSQL  = `DELETE FROM "{{table}}_procs" WHERE until_ms < ?1`
	procsSQL = `SELECT process_id FROM "{{table}}_procs"`

	rowColumns = `update_id, state, attempts, claim_id, received_at, due_at, settled_at, error, body, crashes`

	// ?1 update_id.
	getSQL = `SELECT ` + rowColumns + ` FROM "{{table}}" WHERE update_id = ?1`

	// statsSQL counts rows by state, in one snapshot, from the three
	// partial indexes that together hold every row once: live rows
	// (settled_at is NULL), settled ones (completed, or abandoned and
	// acknowledged) and unacknowledged exhaustions. No index holds every
	// row by state (migration 010), so a state's rows may come in two
	// parts; Stats adds them up.
	statsSQL = `SELECT state, count(*) FROM "{{table}}" INDEXED BY "{{table}}_live" WHERE ` + liveSQL + ` GROUP BY state
UNION ALL
SELECT state, count(*) FROM "{{table}}" INDEXED BY "{{table}}_settled" WHERE settled_at IS NOT NULL GROUP BY state
UNION ALL
SELECT 'abandoned', count(*) FROM "{{table}}" INDEXED BY "{{table}}_unacknowledged" WHERE state = 'abandoned' AND settled_at IS NULL`

	statsExtraSQL = `SELECT
    (SELECT count(*) FROM "{{table}}" INDEXED BY "{{table}}_unacknowledged" WHERE state = 'abandoned' AND settled_at IS NULL),
    (SELECT min(due_at) FROM "{{table}}" INDEXED BY "{{table}}_live" WHERE ` + liveSQL + ` AND state = 'pending')`
)

// batchRows is how many rows one INSERT statement of AddBatch carries (9
// parameters each, far below SQLite's limit of 32766).
const batchRows = 100

// addManySQL is addSQL for rows rows, returning the ids it inserted. Each
// row carries its state, attempts, due time, claim id, owner and chat, so that one
// statement records pending rows and rows already claimed
// (AddBatch). Its parameters are anonymous (?), bound in order: binding
// asks SQLite each parameter's name, which for numbered ones (?NNN) is a
// walk of the statement's list of names, quadratic in a statement of
// hundreds of parameters.
func addManySQL(table string, rows int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO "` + table + `" (update_id, body, state, attempts, due_at, received_at, claim_id, owner, chat) VALUES `)
	writeParamRows(&b, rows, addColumns)
	b.WriteString(" ON CONFLICT (update_id) DO NOTHING RETURNING update_id")
	return b.String()
}

// addColumns is the number of parameters of one row of addManySQL.
const addColumns = 9

// chunkStep shapes AddBatch's INSERTs (see addChunks): a batch of up to
// chunkStep rows is one INSERT of its own length; a longer one, below
// batchRows, is one INSERT of the largest multiple of chunkStep it holds
// and, if rows remain, one of the rest. Batches are mostly that short; a
// longer one pays one more statement in its transaction, against its one
// commit.
const chunkStep = 16

// maxAddSizes is how many row counts addChunks uses: 1 to chunkStep, the
// multiples of chunkStep below batchRows, and batchRows.
const maxAddSizes = chunkStep + (batchRows-1)/chunkStep

// addChunks returns the row counts of the INSERTs that carry n rows, in
// decreasing order: batchRows while that many remain, then the largest
// multiple of chunkStep that remains, then the rest. So AddBatch uses
// statements of at most maxAddSizes sizes, and a batch below batchRows
// rows at most two statements.
func addChunks(n int) []int {
	var c []int
	for ; n >= batchRows; n -= batchRows {
		c = append(c, batchRows)
	}
	if k := n / chunkStep * chunkStep; k > 0 && k < n {
		c = append(c, k)
		n -= k
	}
	if n > 0 {
		c = append(c, n)
	}
	return c
}

// addStmts caches AddBatch's multi-row INSERT statements by row count, each
// prepared on first use: preparing a statement of a few dozen rows costs
// more CPU than inserting them. The row counts are those of addChunks, so
// the cache holds at most maxAddSizes statements. It once held one per row
// count up to batchRows: SQLite keeps each prepared statement in memory
// outside Go's heap, growing with its rows (about 17 MiB mapped for the
// hundred), and the cache filled as slower commits let group commit form
// larger batches, for as long as a process ran. Safe for concurrent use.
type addStmts struct {
	mu     sync.Mutex
	closed bool
	bySize [batchRows + 1]*sql.Stmt
}

// get returns the statement for rows rows (a count addChunks uses),
// preparing it on db if needed. It must not be called inside a transaction of db's only
// connection, since preparing waits for a connection.
func (a *addStmts) get(ctx context.Context, db *sql.DB, table string, rows int) (*sql.Stmt, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, errClosed
	}
	if st := a.bySize[rows]; st != nil {
		return st, nil
	}
	st, err := db.PrepareContext(ctx, addManySQL(table, rows))
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: prepare: %w", err)
	}
	a.bySize[rows] = st
	return st, nil
}

// close closes every cached statement; later calls of get fail.
func (a *addStmts) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	var errs []error
	for i, st := range a.bySize {
		if st != nil {
			errs = append(errs, st.Close())
			a.bySize[i] = nil
		}
	}
	return errors.Join(errs...)
}

// fillSQL fills the shared predicates and the table name into a statement.
func fillSQL(text, table string) string {
	text = strings.NewReplacer("{{takes}}", takesSQL, "{{crash}}", crashSQL, "{{lapsed}}", lapsedSQL).Replace(text)
	return strings.ReplaceAll(text, sqlschema.Placeholder, table)
}

// queries holds the statements prepared once at construction; those of
// strict chat order are prepared on demand (chatorder.go).
type queries struct {
	ownsTxSQL, listSQL string

	add, claim, renew, settle, settleDone, prune, exhaust, acknowledge, requeue   *sql.Stmt
	register, beat, leave, reap                                                   *sql.Stmt
	owns, due, dueExhaustions, dueExhaustionsAfter, get, stats, statsExtra, procs *sql.Stmt
	recordAttempt, recordSettled                                                  *sql.Stmt
}

func (q *queries) prepare(ctx context.Context, w, r *sql.DB, table string) error {
	q.ownsTxSQL = fillSQL(ownsTxSQL, table)
	q.listSQL = fillSQL(`SELECT `+rowColumns+` FROM "{{table}}"`, table)
	return prepareStmts(ctx, table, []stmtSpec{
		{w, &q.add, addSQL},
		{w, &q.claim, claimSQL},
		{w, &q.renew, renewSQL},
		{w, &q.settle, settleSQL},
		{w, &q.settleDone, settleDoneSQL},
		{w, &q.prune, pruneSQL},
		{w, &q.exhaust, exhaustSQL},
		{w, &q.acknowledge, acknowledgeSQL},
		{w, &q.requeue, requeueSQL},
		{w, &q.register, registerSQL},
		{w, &q.beat, beatSQL},
		{w, &q.leave, leaveSQL},
		{w, &q.reap, reapSQL},
		{w, &q.recordAttempt, recordAttemptSQL},
		{w, &q.recordSettled, recordSettledSQL},
		{r, &q.owns, ownsSQL},
		{r, &q.due, dueSQL},
		{r, &q.dueExhaustions, dueExhaustionsSQL},
		{r, &q.dueExhaustionsAfter, dueExhaustionsAfterSQL},
		{r, &q.get, getSQL},
		{r, &q.stats, statsSQL},
		{r, &q.statsExtra, statsExtraSQL},
		{r, &q.procs, procsSQL},
	})
}

// stmtSpec is a statement to prepare: its text, on db, into dst.
type stmtSpec struct {
	db   *sql.DB
	dst  **sql.Stmt
	text string
}

// prepareStmts prepares each spec's text, for table, into its dst. On an
// error the statements already prepared stay in their dst, for the
// caller's close.
func prepareStmts(ctx context.Context, table string, specs []stmtSpec) error {
	for _, p := range specs {
		st, err := p.db.PrepareContext(ctx, fillSQL(p.text, table))
		if err != nil {
			return fmt.Errorf("sqlitestore: prepare: %w", err)
		}
		*p.dst = st
	}
	return nil
}

func (q *queries) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{
		q.add, q.claim, q.renew, q.settle, q.settleDone, q.prune, q.exhaust, q.acknowledge, q.requeue,
		q.register, q.beat, q.leave, q.reap, q.recordAttempt, q.recordSettled,
		q.owns, q.due, q.dueExhaustions, q.dueExhaustionsAfter, q.get, q.stats, q.statsExtra, q.procs,
	} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
