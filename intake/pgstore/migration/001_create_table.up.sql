-- 001: the update table, as a store without claim identities uses it.
-- {{table}} is replaced by the validated table name.
--
-- Times are the intake's clock in Unix milliseconds. due_at is overloaded by
-- state: receipt time (pending), lease end (processing), retry time (failed),
-- exhaustion time (unacknowledged abandoned). settled_at is NULL while a row
-- is live and for an unacknowledged exhaustion; only settled rows are pruned.
CREATE TABLE IF NOT EXISTS {{table}} (
    update_id   bigint  PRIMARY KEY,
    body        bytea   NOT NULL,
    state       text    NOT NULL,
    attempts    integer NOT NULL,
    due_at      bigint  NOT NULL,
    received_at bigint  NOT NULL,
    settled_at  bigint,
    error       text
);

-- The rows a sweep may schedule, in update_id order. Partial, so the
-- retained completed rows (the bulk of the table) are never scanned.
CREATE INDEX IF NOT EXISTS {{table}}_live ON {{table}} (update_id)
    WHERE state IN ('pending', 'processing', 'failed');

-- Settled rows by settlement time, for pruning.
CREATE INDEX IF NOT EXISTS {{table}}_settled ON {{table}} (settled_at)
    WHERE settled_at IS NOT NULL;
