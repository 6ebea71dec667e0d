package pgstore

import "strings"

// queries holds every statement of a Store with its table name filled in.
// Every parameter carries an explicit cast, and every state change is one
// conditional statement.
type queries struct {
	add, addBatch, addBatchClaimed string
	claim                          writeSQL
	// The claim in strict chat order, run after chatLock in a
	// transaction of its own (see claimInOrder).
	claimStrict                 writeSQL
	chatLock                    string
	dueStrict, dueChat          string
	renew                       writeSQL
	settle                      writeSQL
	settleMany                  string
	due, prune                  string
	owns                        string
	exhaust                     writeSQL
	dueExhaustions              string
	acknowledge                 writeSQL
	requeue                     writeSQL
	list, get, stats            string
	lockRows                    string
	register, beat, leave, reap string
}

// settleSQL settles one attempt: $1 update id, $2 attempt, $3 state, $4
// at, $5 retry at, $6 error, $7 claim id. It applies only while the lease
// is live at $4. settleManySQL is its form for many settlements at once:
// keep the two equivalent.
const settleSQL = `UPDATE {{table}} SET
		state      = $3::text,
		due_at     = CASE WHEN $3::text = 'failed' THEN $5::bigint ELSE due_at END,
		settled_at = CASE WHEN $3::text = 'failed' THEN NULL ELSE $4::bigint END,
		error      = CASE WHEN $3::text = 'completed' THEN NULL ELSE $6::text END
	WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
	  AND due_at >= $4::bigint AND claim_id = $7::text`

// settleManySQL is settleSQL (and, for a settlement that carries one,
// settleRecorded's attempt record, or settleDone's for a completion) for
// many updates in one statement, in
// a shared transaction after lockRows: one element of each array per
// settlement, at most one settlement per update id. $1 update id, $2
// attempt, $3 state, $4 at, $5 retry at, $6 error, $7 claim id, as in
// settleSQL; $8 whether it carries a record, and the record's $9 process,
// $10 started, $11 ended, $12 outcome, $13 error, $14 status, $15 header
// and $16 body, as in settleRecorded (ignored without one). Every
// settlement whose row lockRows did not lock is dropped before any row is
// looked at, as newWriteSQL's shared condition does (a subquery over a
// function scan, which PostgreSQL runs once and then hashes or reads back:
// "= ANY (current_setting(…)::bigint[])" would parse the setting again for
// every settlement, 13 µs a settlement in a statement of 256 against under
// 1 µs, and so would "IN (SELECT unnest(…))" where the plan joins it by
// nested loop, as its generic plan does for a few dozen); the others are
// settleSQL's UPDATE with the same conditions and the same values, and the
// records are inserted for exactly the settlements that applied and carry
// one, with settleRecorded's columns, but for a completion, which keeps
// its record in its row as settleDone does. It answers the update ids it
// settled.
const settleManySQL = `WITH v AS (
	SELECT *, r_wanted AND s_state = 'completed' AS r_done FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::bigint[], $5::bigint[], $6::text[], $7::text[],
			$8::boolean[], $9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[], $14::integer[],
			$15::text[], $16::bytea[])
		AS v(s_id, s_attempt, s_state, s_at, s_retry, s_error, s_claim,
			r_wanted, r_process, r_started, r_ended, r_outcome, r_error, r_status, r_header, r_body)
	WHERE v.s_id IN (SELECT l.id FROM unnest(current_setting('` + lockedSetting + `')::bigint[]) AS l(id))),
settled AS (
	UPDATE {{table}} AS t SET
		state          = v.s_state,
		due_at         = CASE WHEN v.s_state = 'failed' THEN v.s_retry ELSE t.due_at END,
		settled_at     = CASE WHEN v.s_state = 'failed' THEN NULL ELSE v.s_at END,
		error          = CASE WHEN v.s_state = 'completed' THEN NULL ELSE v.s_error END,
		rec_after      = CASE WHEN v.r_done THEN (SELECT coalesce(max(seq), 0) FROM {{table}}_att) END,
		rec_process    = CASE WHEN v.r_done THEN v.r_process END,
		rec_started_at = CASE WHEN v.r_done THEN v.r_started END,
		rec_ended_at   = CASE WHEN v.r_done THEN v.r_ended END,
		rec_outcome    = CASE WHEN v.r_done THEN v.r_outcome END,
		rec_error      = CASE WHEN v.r_done THEN v.r_error END,
		rec_status     = CASE WHEN v.r_done THEN v.r_status END,
		rec_header     = CASE WHEN v.r_done THEN v.r_header END,
		rec_body       = CASE WHEN v.r_done THEN v.r_body END
	FROM v
	WHERE t.update_id = v.s_id AND t.state = 'processing' AND t.attempts = v.s_attempt
	  AND t.due_at >= v.s_at AND t.claim_id = v.s_claim
	RETURNING t.update_id, v.s_attempt, v.s_claim, v.r_wanted AND NOT v.r_done AS r_insert, v.r_process,
		v.r_started, v.r_ended, v.r_outcome, v.r_error, v.r_status, v.r_header, v.r_body),
recorded AS (
	INSERT INTO {{table}}_att
		(update_id, attempt, claim_id, process, started_at, ended_at, outcome, error, status, header, body)
	SELECT update_id, s_attempt, s_claim, r_process, r_started, r_ended, r_outcome, r_error,
		r_status, r_header, r_body
	FROM settled WHERE r_insert
	ORDER BY update_id)
SELECT update_id FROM settled`

// writeSQL is a single-row write in its two forms. alone is the plain
// conditional statement, run by itself. shared runs in a shared transaction
// after lockRows (see writes.go), and changes the row only when lockRows
// locked it: the extra condition is on the parameter alone, so for a row
// lockRows skipped it is false before the row is looked at, and the
// statement neither waits for the row's lock nor changes it.
type writeSQL struct {
	alone, shared string
}

// sharedWhere is how every single-row write selects its row.
const sharedWhere = "WHERE update_id = $1::bigint"

// lockedSetting is the transaction-local setting in which lockRows leaves
// the ids it locked, as an array literal.
const lockedSetting = "tgrelay.pgstore_locked_ids"

// newWriteSQL builds both forms of stmt, a write that selects its row with
// sharedWhere.
func newWriteSQL(stmt string) writeSQL {
	return writeSQL{alone: stmt, shared: strings.Replace(stmt, sharedWhere,
		sharedWhere+" AND $1::bigint = ANY (current_setting('"+lockedSetting+"')::bigint[])", 1)}
}

// claimable is the claim predicate: a pending row always; a failed row whose
// retry time has come; a processing row whose lease ended strictly before
// now ($2).
const claimable = `(state = 'pending'
	   OR (state = 'failed' AND due_at <= $2::bigint)
	   OR (state = 'processing' AND due_at < $2::bigint))`

// lapsed is true for a processing row whose owner is not live at now ($2):
// no heartbeat of the owner lasts through now (it lapsed, left, was reaped
// or never registered). Claiming such a row counts a crash.
const lapsed = `(state = 'processing' AND owner IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM {{table}}_procs AS p WHERE p.process_id = {{table}}.owner AND p.until_ms >= $2::bigint))`

// crash is 1 when the claim counts a crash, else 0: the row's lapsed
// owner, judged once per claim in claimWith.
const crash = `cur.crash`

// claimWith locks the claimed row and judges its owner once: lapsed is a
// subquery, and the claim's expressions need it a dozen times (every
// {{takes}}), which PostgreSQL would evaluate each time. FOR NO KEY UPDATE
// is the lock the UPDATE takes anyway; under READ COMMITTED it waits for a
// concurrent write of the row and then reads its newest version, which the
// UPDATE then changes, so the claim stays one atomic step. This host's
// clock is checked first, before any row is read (a condition on
// parameters only). The row is selected with sharedWhere, so a shared
// write that lockRows skipped reads no row and waits for nothing.
const claimWith = `WITH cur AS (
	SELECT update_id, CASE WHEN {{lapsed}} THEN 1 ELSE 0 END AS crash
	FROM {{table}}
	WHERE update_id = $1::bigint AND {{table}}_clock($9::bigint, $10::bigint)
	FOR NO KEY UPDATE)
`

// takes is true when a claimable row is taken rather than spent: with a
// crash budget ($7 > 0) crashed attempts count against it and not against
// the attempt ceiling $4 (see intake.ProcessClaim.MaxCrashes).
const takes = `(CASE WHEN $7::integer > 0
	THEN attempts - crashes - ` + crash + ` < $4::integer AND crashes + ` + crash + ` < $7::integer
	ELSE attempts < $4::integer END)`

// The claim statements take the row when attempts remain and otherwise spend
// it, in one UPDATE. Every right-hand side reads the row as it was.
// $1 update id, $2 now, $3 lease end, $4 max attempts, $5 'attempts spent',
// $6 owner (” for none), $7 max crashes, $8 'crashes spent', $9 this host's
// clock, $10 the clock bound (for {{table}}_clock) and $11 the new claim
// id.
const claimSet = `
	crashes    = crashes + {{crash}},
	state      = CASE WHEN {{takes}} THEN 'processing' ELSE 'abandoned' END,
	attempts   = CASE WHEN {{takes}} THEN attempts + 1 ELSE attempts END,
	due_at     = CASE WHEN {{takes}} THEN $3::bigint ELSE $2::bigint END,
	error      = CASE WHEN {{takes}} THEN NULL
		WHEN $7::integer > 0 AND crashes + {{crash}} >= $7::integer THEN $8::text ELSE $5::text END,
	owner      = CASE WHEN {{takes}} THEN NULLIF($6::text, '') ELSE owner END`

// claimWhere selects the row claimWith locked, when it is claimable or
// its owner lapsed.
const claimWhere = `FROM cur WHERE {{table}}.update_id = cur.update_id AND ({{claimable}} OR cur.crash = 1)`

// inOrder is the strict chat order condition for a row of the table at now
// (the parameter now, such as "$2"); see
// [intake.ChatOrderStore.ClaimInOrder]: its chat is empty, or no other row of
// its chat is live (pending, processing or failed) with a lower update id,
// nor processing under a lease live at now. It is two NOT EXISTS, each a
// range of the chat's live rows in the partial index {{table}}_chat (or,
// when the planner finds it cheaper, of {{table}}_live): the rows below the
// update id, and, with none there, those above it under a live lease.
func inOrder(now string) string {
	return `({{table}}.chat = '' OR (
		NOT EXISTS (SELECT 1 FROM {{table}} AS o
			WHERE o.chat = {{table}}.chat AND o.update_id < {{table}}.update_id
			  AND o.state IN ('pending', 'processing', 'failed'))
		AND NOT EXISTS (SELECT 1 FROM {{table}} AS o
			WHERE o.chat = {{table}}.chat AND o.update_id > {{table}}.update_id
			  AND o.state IN ('pending', 'processing', 'failed')
			  AND o.state = 'processing' AND o.due_at >= ` + now + `::bigint)))`
}

// strictClaim is a claim statement with the strict chat order condition.
func strictClaim(stmt string) string {
	const where = "{{claimWhere}}"
	if !strings.Contains(stmt, where) {
		panic("pgstore: a claim statement without its WHERE clause") // a programmer error in this file
	}
	return strings.Replace(stmt, where, where+" AND "+inOrder("$2"), 1)
}

func buildQueries(table string) queries {
	// Two passes: the fragments name the table too.
	frag := strings.NewReplacer("{{claimWith}}", claimWith, "{{claimSet}}", claimSet, "{{claimWhere}}", claimWhere)
	pred := strings.NewReplacer("{{claimable}}", claimable, "{{takes}}", takes, "{{crash}}", crash)
	lap := strings.NewReplacer("{{lapsed}}", lapsed, "{{dueLapsed}}", strings.ReplaceAll(lapsed, "$2::bigint", "$1::bigint"))
	tab := strings.NewReplacer("{{table}}", table)
	f := func(s string) string { return tab.Replace(lap.Replace(pred.Replace(frag.Replace(s)))) }
	w := func(s string) writeSQL { return newWriteSQL(f(s)) }
	// A spend leaves settled_at NULL: an unacknowledged exhaustion.
	claim := `{{claimWith}}UPDATE {{table}} SET {{claimSet}},
				settled_at = CASE WHEN {{takes}} THEN settled_at ELSE NULL END,
				claim_id   = CASE WHEN {{takes}} THEN $11::text ELSE COALESCE(claim_id, $11::text) END
			{{claimWhere}}
			RETURNING state, attempts, claim_id`
	// $1 now, $2 pending before, $3 limit [, $4 chat].
	due := `SELECT update_id, body, received_at FROM {{table}}
			WHERE ((state = 'pending' AND received_at <= $2::bigint)
			   OR (state = 'failed' AND due_at <= $1::bigint)
			   OR (state = 'processing' AND due_at < $1::bigint)
			   OR {{dueLapsed}})`
	return queries{
		add: f(`INSERT INTO {{table}} (update_id, body, state, attempts, due_at, received_at, chat)
			VALUES ($1::bigint, $2::bytea, 'pending', 0, $3::bigint, $3::bigint, $4::text)
			ON CONFLICT (update_id) DO NOTHING`),
		addBatch: f(`INSERT INTO {{table}} (update_id, body, state, attempts, due_at, received_at, chat)
			SELECT u.id, u.body, 'pending', 0, u.at, u.at, u.chat
			FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::text[]) AS u(id, body, at, chat)
			ON CONFLICT (update_id) DO NOTHING
			RETURNING update_id`),
		// addBatch with each row's state, attempts, due time, claim id and
		// owner: pending rows and rows recorded already claimed in one
		// statement. $10 this host's clock and $11 the clock bound: a
		// claimed add is a claim, checked like one ({{table}}_clock).
		addBatchClaimed: f(`INSERT INTO {{table}} (update_id, body, state, attempts, due_at, received_at, claim_id, owner, chat)
			SELECT u.id, u.body, u.state, u.attempts, u.due, u.at, u.claim, u.owner, u.chat
			FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::text[], $5::integer[], $6::bigint[], $7::text[],
				$8::text[], $9::text[])
				AS u(id, body, at, state, attempts, due, claim, owner, chat)
			WHERE {{table}}_clock($10::bigint, $11::bigint)
			ON CONFLICT (update_id) DO NOTHING
			RETURNING update_id`),

		claim:       w(claim),
		claimStrict: w(strictClaim(claim)),
		// $1 update id. Serialises the strict claims of the row's chat until
		// the transaction ends: the claim that follows, a statement of its
		// own, takes its snapshot only once the lock is held, so it sees
		// every strict claim of the chat committed before. The two-key form
		// keeps these locks apart from single-key advisory locks.
		chatLock: f(`SELECT pg_advisory_xact_lock(hashtext('tgrelay.chat.{{table}}'), hashtext(chat))
			FROM {{table}} WHERE update_id = $1::bigint AND chat <> ''`),
		dueStrict: f(due + ` AND ` + inOrder("$1") + `
			ORDER BY update_id
			LIMIT $3::integer
			FOR UPDATE SKIP LOCKED`),
		dueChat: f(due + ` AND chat = $4::text AND state IN ('pending', 'processing', 'failed')
			  AND ` + inOrder("$1") + `
			ORDER BY update_id
			LIMIT $3::integer
			FOR UPDATE SKIP LOCKED`),

		// $1 update id, $2 attempt, $3 lease end, $4 now, $5 claim id.
		// Renewal never shortens a lease and never revives an expired one.
		renew: w(`UPDATE {{table}} SET due_at = GREATEST(due_at, $3::bigint)
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND due_at >= $4::bigint AND claim_id = $5::text`),

		settle:     w(settleSQL),
		settleMany: f(settleManySQL),

		// $1 now, $2 pending before, $3 limit.
		due: f(`SELECT update_id, body, received_at FROM {{table}}
			WHERE (state = 'pending' AND received_at <= $2::bigint)
			   OR (state = 'failed' AND due_at <= $1::bigint)
			   OR (state = 'processing' AND due_at < $1::bigint)
			   OR {{dueLapsed}}
			ORDER BY update_id
			LIMIT $3::integer
			FOR UPDATE SKIP LOCKED`),
		prune: f(`DELETE FROM {{table}}
			WHERE state IN ('completed', 'abandoned') AND settled_at < $1::bigint`),

		// $1 update id, $2 attempt, $3 claim id, $4 at.
		owns: f(`SELECT true FROM {{table}}
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND claim_id = $3::text AND due_at >= $4::bigint
			FOR UPDATE`),
		// $1 update id, $2 attempt, $3 claim id, $4 at, $5 error.
		exhaust: w(`UPDATE {{table}} SET state = 'abandoned', due_at = $4::bigint, settled_at = NULL, error = $5::text
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND claim_id = $3::text AND due_at >= $4::bigint`),
		// $1 after (NULL: from the start), $2 limit.
		dueExhaustions: f(`SELECT update_id, body, attempts, claim_id, due_at, error FROM {{table}}
			WHERE state = 'abandoned' AND settled_at IS NULL AND claim_id IS NOT NULL
			  AND ($1::bigint IS NULL OR update_id > $1::bigint)
			ORDER BY update_id
			LIMIT $2::integer`),
		// $1 update id, $2 attempt, $3 claim id, $4 at.
		acknowledge: w(`UPDATE {{table}} SET settled_at = $4::bigint
			WHERE update_id = $1::bigint AND state = 'abandoned' AND settled_at IS NULL
			  AND attempts = $2::integer AND claim_id = $3::text`),

		// $1 update ids. Locks, in update id order, those of the rows that
		// no other transaction holds, with the lock an UPDATE takes, answers
		// their ids and leaves them in lockedSetting for the transaction's
		// shared writes.
		lockRows: f(`SELECT ids, set_config('` + lockedSetting + `', ids::text, true)
			FROM (SELECT COALESCE(array_agg(update_id ORDER BY update_id), '{}') AS ids
				FROM (SELECT update_id FROM {{table}}
					WHERE update_id = ANY ($1::bigint[])
					ORDER BY update_id
					FOR NO KEY UPDATE SKIP LOCKED) AS locked) AS agg`),

		// $1 process id, $2 heartbeat end, $3 this host's clock, $4 the
		// clock bound.
		register: f(`INSERT INTO {{table}}_procs (process_id, until_ms)
			SELECT $1::text, $2::bigint WHERE {{table}}_clock($3::bigint, $4::bigint)
			ON CONFLICT (process_id) DO NOTHING`),
		// $1 process id, $2 heartbeat end, $3 now, $4 this host's clock, $5
		// the clock bound. Never shortens, never revives.
		beat: f(`UPDATE {{table}}_procs SET until_ms = GREATEST(until_ms, $2::bigint)
			WHERE process_id = $1::text AND until_ms >= $3::bigint AND {{table}}_clock($4::bigint, $5::bigint)`),
		// $1 process id.
		leave: f(`DELETE FROM {{table}}_procs WHERE process_id = $1::text`),
		// $1 now.
		reap: f(`DELETE FROM {{table}}_procs WHERE until_ms < $1::bigint`),

		// $1 state (NULL: any), $2 unacknowledged only, $3 after, $4 limit.
		list: f(`SELECT ` + rowColumns + ` FROM {{table}}
			WHERE ($1::text IS NULL OR state = $1::text)
			  AND (NOT $2::boolean OR (state = 'abandoned' AND settled_at IS NULL))
			  AND ($3::bigint IS NULL OR update_id > $3::bigint)
			ORDER BY update_id
			LIMIT $4::integer`),
		get: f(`SELECT ` + rowColumns + ` FROM {{table}} WHERE update_id = $1::bigint`),
		// $1 update id, $2 now. Leaves claim_id: the next claim replaces it.
		requeue: w(`UPDATE {{table}} SET state = 'pending', attempts = 0, crashes = 0, due_at = $2::bigint,
				error = NULL, settled_at = NULL
			WHERE update_id = $1::bigint AND state IN ('failed', 'abandoned')`),
		// A pending row's due_at is when it became pending: its receipt or
		// its requeue.
		stats: f(`SELECT state, count(*),
				count(*) FILTER (WHERE state = 'abandoned' AND settled_at IS NULL),
				min(due_at) FILTER (WHERE state = 'pending')
			FROM {{table}} GROUP BY state`),
	}
}

// rowColumns are the columns of an [intake.Row], in scanRow's order.
const rowColumns = `update_id, state, attempts, claim_id, received_at, due_at, settled_at, error, body, crashes`
