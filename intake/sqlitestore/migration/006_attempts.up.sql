-- 006: the attempt history (intake.AdminStore.RecordAttempt): one row per
-- ended attempt of an update, and one per requeue, in the order recorded
-- (seq). Times are Unix milliseconds; header is a JSON object of the few
-- response headers kept; every text was masked before it got here.
CREATE TABLE IF NOT EXISTS "{{table}}_att" (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    update_id  INTEGER NOT NULL,
    attempt    INTEGER NOT NULL,
    claim_id   TEXT    NOT NULL DEFAULT '',
    process    TEXT    NOT NULL DEFAULT '',
    started_at INTEGER NOT NULL,
    ended_at   INTEGER NOT NULL,
    outcome    TEXT    NOT NULL,
    error      TEXT    NOT NULL DEFAULT '',
    status     INTEGER NOT NULL DEFAULT 0,
    header     TEXT    NOT NULL DEFAULT '',
    body       BLOB    NOT NULL DEFAULT x''
);
CREATE INDEX IF NOT EXISTS "{{table}}_att_u" ON "{{table}}_att" (update_id, seq);
-- A history goes with its update: whatever deletes the update's row
-- (Prune) deletes its history in the same statement.
CREATE TRIGGER IF NOT EXISTS "{{table}}_aprune" AFTER DELETE ON "{{table}}"
BEGIN
    DELETE FROM "{{table}}_att" WHERE update_id = OLD.update_id;
END;
-- A requeue (a failed or abandoned row made pending again, which nothing
-- else does) leaves its mark in the history, in the same statement.
CREATE TRIGGER IF NOT EXISTS "{{table}}_areq" AFTER UPDATE OF state ON "{{table}}"
WHEN OLD.state IN ('failed', 'abandoned') AND NEW.state = 'pending'
BEGIN
    INSERT INTO "{{table}}_att" (update_id, attempt, claim_id, started_at, ended_at, outcome)
    VALUES (NEW.update_id, 0, coalesce(OLD.claim_id, ''), NEW.due_at, NEW.due_at, 'requeued');
END;
