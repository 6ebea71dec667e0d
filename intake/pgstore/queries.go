package pgstore

import "strings"

// queries holds every statement of a Store with its table name filled in.
// Every parameter carries an explicit cast, and every state change is one
// conditional statement.
type queries struct {
	add, addBatch                        string
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
	register, beat, leave, reap          string
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

// lapsed is true for a processing row whose owner is not live at now ($2):
// no heartbeat of the owner lasts through now (it lapsed, left, was reaped
// or never registered). Claiming such a row counts a crash.
const lapsed = `(state = 'processing' AND owner IS NOT NULL AND NOT EXISTS (
	SELECT 1 FROM {{table}}_procs AS p WHERE p.process_id = {{table}}.owner AND p.until_ms >= $2::bigint))`

// crash is 1 when the claim counts a crash, else 0.
const crash = `(CASE WHEN ` + lapsed + ` THEN 1 ELSE 0 END)`

// takes is true when a claimable row is taken rather than spent: with a
// crash budget ($7 > 0) crashed attempts count against it and not against
// the attempt ceiling $4 (see intake.ClaimOpts.MaxCrashes).
const takes = `(CASE WHEN $7::integer > 0
	THEN attempts - crashes - ` + crash + ` < $4::integer AND crashes + ` + crash + ` < $7::integer
	ELSE attempts < $4::integer END)`

// The claim statements take the row when attempts remain and otherwise spend
// it, in one UPDATE. Every right-hand side reads the row as it was.
// $1 update id, $2 now, $3 lease end, $4 max attempts, $5 'attempts spent',
// $6 owner (” for none), $7 max crashes, $8 'crashes spent', $9 this host's
// clock and $10 the clock bound (for {{table}}_clock), and for owned claims
// $11 the new claim id.
const claimSet = `
	crashes    = crashes + {{crash}},
	state      = CASE WHEN {{takes}} THEN 'processing' ELSE 'abandoned' END,
	attempts   = CASE WHEN {{takes}} THEN attempts + 1 ELSE attempts END,
	due_at     = CASE WHEN {{takes}} THEN $3::bigint ELSE $2::bigint END,
	error      = CASE WHEN {{takes}} THEN NULL
		WHEN $7::integer > 0 AND crashes + {{crash}} >= $7::integer THEN $8::text ELSE $5::text END,
	owner      = CASE WHEN {{takes}} THEN NULLIF($6::text, '') ELSE owner END`

// claimWhere selects a claimable row, after checking this host's clock.
const claimWhere = `WHERE update_id = $1::bigint AND ({{claimable}} OR {{lapsed}})
	AND {{table}}_clock($9::bigint, $10::bigint)`

func buildQueries(table string) queries {
	// Two passes: the fragments name the table too.
	frag := strings.NewReplacer("{{claimSet}}", claimSet, "{{claimWhere}}", claimWhere)
	pred := strings.NewReplacer("{{claimable}}", claimable, "{{takes}}", takes, "{{crash}}", crash)
	lap := strings.NewReplacer("{{lapsed}}", lapsed, "{{dueLapsed}}", strings.ReplaceAll(lapsed, "$2::bigint", "$1::bigint"))
	tab := strings.NewReplacer("{{table}}", table)
	f := func(s string) string { return tab.Replace(lap.Replace(pred.Replace(frag.Replace(s)))) }
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

		claim: w(`UPDATE {{table}} SET {{claimSet}},
				settled_at = CASE WHEN {{takes}} THEN settled_at ELSE $2::bigint END
			{{claimWhere}}
			RETURNING state, attempts`),
		claimOwned: w(`UPDATE {{table}} SET {{claimSet}},
				settled_at = CASE WHEN {{takes}} THEN settled_at ELSE $2::bigint END,
				claim_id   = CASE WHEN {{takes}} THEN $11::text ELSE COALESCE(claim_id, $11::text) END
			{{claimWhere}}
			RETURNING state, attempts, claim_id`),
		// A durable spend leaves settled_at NULL: an unacknowledged exhaustion.
		claimOwnedDurable: w(`UPDATE {{table}} SET {{claimSet}},
				settled_at = CASE WHEN {{takes}} THEN settled_at ELSE NULL END,
				claim_id   = CASE WHEN {{takes}} THEN $11::text ELSE COALESCE(claim_id, $11::text) END
			{{claimWhere}}
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
