-- 002: the outgoing-call journal (intake.JournalStore): one row per Bot API
-- call made on behalf of an update, keyed by the update, the method, a hash
-- of the call's canonical parameters and its occurrence among identical
-- calls of an attempt. Times are Unix milliseconds; decided_at is NULL while
-- the outcome is pending.
CREATE TABLE IF NOT EXISTS {{table}}_journal (
    update_id   bigint  NOT NULL,
    method      text    NOT NULL,
    params_hash text    NOT NULL,
    occurrence  integer NOT NULL,
    attempt     integer NOT NULL,
    claim_id    text    NOT NULL,
    outcome     text    NOT NULL,
    status      integer NOT NULL DEFAULT 0,
    body        bytea   NOT NULL DEFAULT ''::bytea,
    intended_at bigint  NOT NULL,
    decided_at  bigint,
    PRIMARY KEY (update_id, method, params_hash, occurrence)
);

-- A journal goes with its update: whatever deletes update rows (Prune)
-- deletes their entries in the same statement. A trigger rather than a
-- foreign key, so the update table can still be dropped on its own.
CREATE OR REPLACE FUNCTION {{table}}_jprune() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM {{table}}_journal AS j USING gone WHERE j.update_id = gone.update_id;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {{table}}_jprune ON {{table}};
CREATE TRIGGER {{table}}_jprune AFTER DELETE ON {{table}}
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION {{table}}_jprune();
