-- The effects applied exactly once (Store.Once): one row per update and
-- effect name, recorded in the transaction of the effect itself. A row here
-- means the effect committed; Once never runs it again for that update.
CREATE TABLE IF NOT EXISTS "{{table}}_effects" (
    update_id  INTEGER NOT NULL,
    effect     TEXT    NOT NULL,
    attempt    INTEGER NOT NULL,
    claim_id   TEXT    NOT NULL,
    applied_at INTEGER NOT NULL,
    PRIMARY KEY (update_id, effect)
) WITHOUT ROWID;
-- Effects go with their update: whatever deletes the update's row (Prune)
-- deletes its effects in the same statement.
CREATE TRIGGER IF NOT EXISTS "{{table}}_effects_prune" AFTER DELETE ON "{{table}}"
BEGIN
    DELETE FROM "{{table}}_effects" WHERE update_id = OLD.update_id;
END;
