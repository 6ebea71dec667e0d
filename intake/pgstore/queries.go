package pgstore

import "strings"

// queries holds every statement of a Store with its table name filled in.
// Every parameter carries an explicit cast, and every state change is one
// conditional statement.
type queries struct {
	add, addBatch, addBatchClaimed       string
	claim, claimOwned, claimOwnedDurable writeSQL
	renew, renewOwned                    writeSQL
	settle, settleOwned                  writeSQL
	due, prune                           string
	owns                                 string
	exhaust                              writeSQL
	dueExhaustions                       string
	acknowledge                          writeSQL
	requeue                              writeSQL
	list, get, stats                     string
	lockRows                             string
}

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

// The claim statements take the row when attempts remain and otherwise spend
// it, in one UPDATE. Every right-hand side reads the row as it was.
// $1 update id, $2 now, $3 lease end, $4 max attempts, $5 'attempts spent',
// and for owned claims $6 the new claim id.
const claimSet = `
	state      = CASE WHEN attempts < $4::integer THEN 'processing' ELSE 'abandoned' END,
	attempts   = CASE WHEN attempts < $4::integer THEN attempts + 1 ELSE attempts END,
	due_at     = CASE WHEN attempts < $4::integer THEN $3::bigint ELSE $2::bigint END,
	error      = CASE WHEN attempts < $4::integer THEN NULL ELSE $5::text END`

func buildQueries(table string) queries {
	r := strings.NewReplacer("{{table}}", table, "{{claimable}}", claimable, "{{claimSet}}", claimSet)
	f := func(s string) string { return r.Replace(s) }
	w := func(s string) writeSQL { return newWriteSQL(f(s)) }
	return queries{
		add: f(`INSERT INTO {{table}} (update_id, body, state, attempts, due_at, received_at)
			VALUES ($1::bigint, $2::bytea, 'pending', 0, $3::bigint, $3::bigint)
			ON CONFLICT (update_id) DO NOTHING`),
		addBatch: f(`INSERT INTO {{table}} (update_id, body, state, attempts, due_at, received_at)
			SELECT u.id, u.body, 'pending', 0, u.at, u.at
			FROM unnest($1::bigint[], $2::bytea[], $3::bigint[]) AS u(id, body, at)
			ON CONFLICT (update_id) DO NOTHING
			RETURNING update_id`),
		// addBatch with each row's state, attempts, due time and claim id:
		// pending rows and rows recorded already claimed in one statement.
		addBatchClaimed: f(`INSERT INTO {{table}} (update_id, body, state, attempts, due_at, received_at, claim_id)
			SELECT u.id, u.body, u.state, u.attempts, u.due, u.at, u.claim
			FROM unnest($1::bigint[], $2::bytea[], $3::bigint[], $4::text[], $5::integer[], $6::bigint[], $7::text[])
				AS u(id, body, at, state, attempts, due, claim)
			ON CONFLICT (update_id) DO NOTHING
			RETURNING update_id`),

		claim: w(`UPDATE {{table}} SET {{claimSet}},
				settled_at = CASE WHEN attempts < $4::integer THEN settled_at ELSE $2::bigint END
			WHERE update_id = $1::bigint AND {{claimable}}
			RETURNING state, attempts`),
		claimOwned: w(`UPDATE {{table}} SET {{claimSet}},
				settled_at = CASE WHEN attempts < $4::integer THEN settled_at ELSE $2::bigint END,
				claim_id   = CASE WHEN attempts < $4::integer THEN $6::text ELSE COALESCE(claim_id, $6::text) END
			WHERE update_id = $1::bigint AND {{claimable}}
			RETURNING state, attempts, claim_id`),
		// A durable spend leaves settled_at NULL: an unacknowledged exhaustion.
		claimOwnedDurable: w(`UPDATE {{table}} SET {{claimSet}},
				settled_at = CASE WHEN attempts < $4::integer THEN settled_at ELSE NULL END,
				claim_id   = CASE WHEN attempts < $4::integer THEN $6::text ELSE COALESCE(claim_id, $6::text) END
			WHERE update_id = $1::bigint AND {{claimable}}
			RETURNING state, attempts, claim_id`),

		// $1 update id, $2 attempt, $3 lease end, $4 now, $5 claim id.
		// Renewal never shortens a lease and never revives an expired one.
		renew: w(`UPDATE {{table}} SET due_at = GREATEST(due_at, $3::bigint)
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND due_at >= $4::bigint`),
		renewOwned: w(`UPDATE {{table}} SET due_at = GREATEST(due_at, $3::bigint)
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND due_at >= $4::bigint AND claim_id = $5::text`),

		// $1 update id, $2 attempt, $3 state, $4 at, $5 retry at, $6 error,
		// $7 claim id. Applies only while the lease is live at $4.
		settle: w(`UPDATE {{table}} SET
				state      = $3::text,
				due_at     = CASE WHEN $3::text = 'failed' THEN $5::bigint ELSE due_at END,
				settled_at = CASE WHEN $3::text = 'failed' THEN NULL ELSE $4::bigint END,
				error      = CASE WHEN $3::text = 'completed' THEN NULL ELSE $6::text END
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND due_at >= $4::bigint`),
		settleOwned: w(`UPDATE {{table}} SET
				state      = $3::text,
				due_at     = CASE WHEN $3::text = 'failed' THEN $5::bigint ELSE due_at END,
				settled_at = CASE WHEN $3::text = 'failed' THEN NULL ELSE $4::bigint END,
				error      = CASE WHEN $3::text = 'completed' THEN NULL ELSE $6::text END
			WHERE update_id = $1::bigint AND state = 'processing' AND attempts = $2::integer
			  AND due_at >= $4::bigint AND claim_id = $7::text`),

		// $1 now, $2 pending before, $3 limit.
		due: f(`SELECT update_id, body FROM {{table}}
			WHERE (state = 'pending' AND received_at <= $2::bigint)
			   OR (state = 'failed' AND due_at <= $1::bigint)
			   OR (state = 'processing' AND due_at < $1::bigint)
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

		// $1 state (NULL: any), $2 unacknowledged only, $3 after, $4 limit.
		list: f(`SELECT ` + rowColumns + ` FROM {{table}}
			WHERE ($1::text IS NULL OR state = $1::text)
			  AND (NOT $2::boolean OR (state = 'abandoned' AND settled_at IS NULL))
			  AND ($3::bigint IS NULL OR update_id > $3::bigint)
			ORDER BY update_id
			LIMIT $4::integer`),
		get: f(`SELECT ` + rowColumns + ` FROM {{table}} WHERE update_id = $1::bigint`),
		// $1 update id, $2 now. Leaves claim_id: the next claim replaces it.
		requeue: w(`UPDATE {{table}} SET state = 'pending', attempts = 0, due_at = $2::bigint,
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
const rowColumns = `update_id, state, attempts, claim_id, received_at, due_at, settled_at, error, body`
