-- 003: the effects applied exactly once (Store.Once, {{table}}_once): one
-- row per update and effect name, recorded in the transaction of the effect
-- itself. A row here means the effect committed; it is never applied again
-- for that update.
CREATE TABLE IF NOT EXISTS {{table}}_effects (
    update_id  bigint  NOT NULL,
    effect     text    NOT NULL,
    attempt    integer NOT NULL,
    claim_id   text    NOT NULL,
    applied_at bigint  NOT NULL,
    PRIMARY KEY (update_id, effect)
);

-- Effects go with their update: whatever deletes update rows (Prune)
-- deletes their effects in the same statement.
CREATE OR REPLACE FUNCTION {{table}}_eprune() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM {{table}}_effects AS e USING gone WHERE e.update_id = gone.update_id;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {{table}}_eprune ON {{table}};
CREATE TRIGGER {{table}}_eprune AFTER DELETE ON {{table}}
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION {{table}}_eprune();

-- {{table}}_once is {{table}}_owns that also records the effect, for apps
-- in any language: true means "apply the effect now, in this transaction";
-- false means "do nothing": the claim no longer owns the update, or this
-- effect of the update was already applied. Call it inside the transaction
-- of the domain write and commit only after the write:
--
--   BEGIN;
--   SELECT {{table}}_once($1, $2, $3, $4, 'count-vote');  -- skip unless true
--   UPDATE polls SET votes = votes + 1 WHERE id = ...;
--   COMMIT;
--
-- A rollback un-records the effect with the write. Concurrent calls for one
-- update wait on the update's row lock, so at most one returns true.
CREATE OR REPLACE FUNCTION {{table}}_once(update_id bigint, attempt integer, claim_id text, at_ms bigint, effect text DEFAULT '')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    n integer;
BEGIN
    IF NOT {{table}}_owns($1, $2, $3, $4) THEN
        RETURN false;
    END IF;
    INSERT INTO {{table}}_effects AS e (update_id, effect, attempt, claim_id, applied_at)
    VALUES ($1, $5, $2, $3, $4)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n = 1;
END
$$;
