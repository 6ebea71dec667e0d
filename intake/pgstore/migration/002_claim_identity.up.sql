-- 002: persisted claim identities (fenced claims) and durable exhaustion.
-- Applies to a table made by 001, and again harmlessly to a current one.

ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS claim_id text;

-- Unacknowledged exhaustions, in update_id order.
CREATE INDEX IF NOT EXISTS {{table}}_unacked ON {{table}} (update_id)
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
