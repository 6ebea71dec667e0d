-- 001: the update table, its indexes and the fencing function.
-- {{table}} is replaced by the validated table name.
--
-- Times are the intake's clock in Unix milliseconds. due_at is overloaded by
-- state: receipt time (pending), lease end (processing), retry time (failed),
-- exhaustion time (unacknowledged abandoned). settled_at is NULL while a row
-- is live and for an unacknowledged exhaustion; only settled rows are pruned.
-- claim_id is the identity of the row's latest claim.
CREATE TABLE {{table}} (
    update_id   bigint  PRIMARY KEY,
    body        bytea   NOT NULL,
    state       text    NOT NULL,
    attempts    integer NOT NULL,
    due_at      bigint  NOT NULL,
    received_at bigint  NOT NULL,
    settled_at  bigint,
    error       text,
    claim_id    text
);

-- The rows a sweep may schedule, in update_id order. Partial, so the
-- retained completed rows (the bulk of the table) are never scanned.
CREATE INDEX {{table}}_live ON {{table}} (update_id)
    WHERE state IN ('pending', 'processing', 'failed');

-- Settled rows by settlement time, for pruning.
CREATE INDEX {{table}}_settled ON {{table}} (settled_at)
    WHERE settled_at IS NOT NULL;

-- Unacknowledged exhaustions, in update_id order.
CREATE INDEX {{table}}_unacked ON {{table}} (update_id)
    WHERE state = 'abandoned' AND settled_at IS NULL;

-- {{table}}_owns reports whether the claim {update_id, attempt, claim_id}
-- still holds a live lease at at_ms (Unix milliseconds), and locks the row
-- (FOR UPDATE) when it does. Call it inside the transaction of a domain
-- write, in any language:
--
--   BEGIN;
--   SELECT {{table}}_owns($1, $2, $3, $4);   -- abort unless true
--   INSERT INTO my_effects ...;
--   COMMIT;
--
-- While that transaction is open no other worker can reclaim the update, so
-- the write commits only under a claim that was live when it was checked.
CREATE OR REPLACE FUNCTION {{table}}_owns(update_id bigint, attempt integer, claim_id text, at_ms bigint)
RETURNS boolean
LANGUAGE sql
VOLATILE
AS $$
    SELECT COALESCE((
        SELECT true FROM {{table}} AS u
        WHERE u.update_id = $1
          AND u.state = 'processing'
          AND u.attempts = $2
          AND u.claim_id = $3
          AND u.due_at >= $4
        FOR UPDATE
    ), false)
$$;
