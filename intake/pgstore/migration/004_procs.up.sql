-- 004: heartbeats of live processes (intake.ProcessStore) and the clock
-- check. A claim records the process that took it (owner); the row is taken
-- over as soon as that process's heartbeat lapses; crashes counts the claims
-- that took the row over from a lapsed owner (intake.ClaimOpts.MaxCrashes).
-- until_ms is the end of a process's heartbeat, live through it inclusive,
-- in the intake's clock (Unix milliseconds).
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS owner text;
ALTER TABLE {{table}} ADD COLUMN IF NOT EXISTS crashes integer NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS {{table}}_procs (
    process_id text   PRIMARY KEY,
    until_ms   bigint NOT NULL
);

-- {{table}}_clock raises SQLSTATE TG001 (its DETAIL is the difference in
-- milliseconds) when local_ms, a host's clock read as it sent the
-- statement, differs from the database's clock at the statement's start by
-- more than bound_ms; it returns true otherwise. A bound of 0 or less
-- checks nothing. pgstore puts it in every claim and heartbeat, so a host
-- whose clock runs ahead can never take a live lease early: all times in
-- the table are hosts' clocks, and this keeps them within the bound of one
-- another.
CREATE OR REPLACE FUNCTION {{table}}_clock(local_ms bigint, bound_ms bigint)
RETURNS boolean
LANGUAGE plpgsql
STABLE -- so the planner checks it once per statement, before any row
AS $$
DECLARE
    skew bigint := local_ms - (extract(epoch FROM statement_timestamp()) * 1000)::bigint;
BEGIN
    IF bound_ms > 0 AND abs(skew) > bound_ms THEN
        RAISE EXCEPTION 'tgrelay: this host''s clock differs from the database''s by % ms, more than % ms', skew, bound_ms
            USING ERRCODE = 'TG001', DETAIL = skew::text;
    END IF;
    RETURN true;
END
$$;

-- {{table}}_owns and {{table}}_once again, with at_ms optional: without it
-- (NULL) the lease is judged at the database's clock, which pgstore keeps
-- within its clock bound of every intake's.
CREATE OR REPLACE FUNCTION {{table}}_owns(update_id bigint, attempt integer, claim_id text, at_ms bigint DEFAULT NULL)
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
          AND u.due_at >= COALESCE($4, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)
        FOR UPDATE
    ), false)
$$;

CREATE OR REPLACE FUNCTION {{table}}_once(update_id bigint, attempt integer, claim_id text, at_ms bigint DEFAULT NULL, effect text DEFAULT '')
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    n integer;
    t bigint := COALESCE($4, (extract(epoch FROM clock_timestamp()) * 1000)::bigint);
BEGIN
    IF NOT {{table}}_owns($1, $2, $3, t) THEN
        RETURN false;
    END IF;
    INSERT INTO {{table}}_effects AS e (update_id, effect, attempt, claim_id, applied_at)
    VALUES ($1, $5, $2, $3, t)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n = 1;
END
$$;
