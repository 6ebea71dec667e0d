-- 006: the attempt history (intake.AdminStore.RecordAttempt): one row per
-- ended attempt of an update, and one per requeue, in the order recorded
-- (seq). Times are Unix milliseconds; header is a JSON object of the few
-- response headers kept; every text was masked before it got here.
CREATE TABLE IF NOT EXISTS {{table}}_att (
    seq        bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    update_id  bigint  NOT NULL,
    attempt    integer NOT NULL,
    claim_id   text    NOT NULL DEFAULT '',
    process    text    NOT NULL DEFAULT '',
    started_at bigint  NOT NULL,
    ended_at   bigint  NOT NULL,
    outcome    text    NOT NULL,
    error      text    NOT NULL DEFAULT '',
    status     integer NOT NULL DEFAULT 0,
    header     text    NOT NULL DEFAULT '',
    body       bytea   NOT NULL DEFAULT ''::bytea
);
CREATE INDEX IF NOT EXISTS {{table}}_att_u ON {{table}}_att (update_id, seq);

-- A history goes with its update: whatever deletes update rows (Prune)
-- deletes their histories in the same statement. A trigger rather than a
-- foreign key, as for the journal.
CREATE OR REPLACE FUNCTION {{table}}_aprune() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    DELETE FROM {{table}}_att AS a USING gone WHERE a.update_id = gone.update_id;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {{table}}_aprune ON {{table}};
CREATE TRIGGER {{table}}_aprune AFTER DELETE ON {{table}}
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION {{table}}_aprune();

-- A requeue (a failed or abandoned row made pending again, which nothing
-- else does) leaves its mark in the history, in the same statement.
CREATE OR REPLACE FUNCTION {{table}}_areq() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    INSERT INTO {{table}}_att (update_id, attempt, claim_id, started_at, ended_at, outcome)
    VALUES (NEW.update_id, 0, coalesce(OLD.claim_id, ''), NEW.due_at, NEW.due_at, 'requeued');
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS {{table}}_areq ON {{table}};
CREATE TRIGGER {{table}}_areq AFTER UPDATE OF state ON {{table}}
    FOR EACH ROW
    WHEN (OLD.state IN ('failed', 'abandoned') AND NEW.state = 'pending')
    EXECUTE FUNCTION {{table}}_areq();
