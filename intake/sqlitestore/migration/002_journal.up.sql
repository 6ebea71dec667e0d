-- The outgoing-call journal (intake.JournalStore): one row per Bot API call
-- made on behalf of an update, keyed by the update, the method, a hash of the
-- call's canonical parameters and its occurrence among identical calls of an
-- attempt. Times are Unix milliseconds; decided_at is NULL while the outcome
-- is pending.
CREATE TABLE IF NOT EXISTS "{{table}}_journal" (
    update_id   INTEGER NOT NULL,
    method      TEXT    NOT NULL,
    params_hash TEXT    NOT NULL,
    occurrence  INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    claim_id    TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    status      INTEGER NOT NULL DEFAULT 0,
    body        BLOB    NOT NULL DEFAULT x'',
    intended_at INTEGER NOT NULL,
    decided_at  INTEGER,
    PRIMARY KEY (update_id, method, params_hash, occurrence)
) WITHOUT ROWID;
-- A journal goes with its update: whatever deletes the update's row (Prune)
-- deletes its entries in the same statement.
CREATE TRIGGER IF NOT EXISTS "{{table}}_journal_prune" AFTER DELETE ON "{{table}}"
BEGIN
    DELETE FROM "{{table}}_journal" WHERE update_id = OLD.update_id;
END;
