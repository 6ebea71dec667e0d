-- 004: heartbeats of live processes (intake.ProcessStore). A claim records
-- the process that took it (owner) and the row is taken over as soon as
-- that process's heartbeat lapses; crashes counts the claims that took the
-- row over from a lapsed owner (intake.ClaimOpts.MaxCrashes). until_ms is
-- the end of a process's heartbeat, live through it inclusive, in the
-- intake's clock (Unix milliseconds).
ALTER TABLE "{{table}}" ADD COLUMN owner TEXT;
ALTER TABLE "{{table}}" ADD COLUMN crashes INTEGER NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS "{{table}}_procs" (
    process_id TEXT    PRIMARY KEY,
    until_ms   INTEGER NOT NULL
) WITHOUT ROWID;
