-- 001: the update table and its indexes. {{table}} is replaced by the
-- validated table name.
--
-- Times are the intake's clock in Unix milliseconds. due_at is overloaded by
-- state: receipt time (pending), lease end (processing), retry time (failed),
-- exhaustion time (unacknowledged abandoned). settled_at is NULL while a row
-- is live and for an unacknowledged exhaustion; only settled rows are pruned.
-- claim_id is the identity of the row's latest claim (ADR 0256).
CREATE TABLE "{{table}}" (
    update_id   INTEGER PRIMARY KEY,
    body        TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    due_at      INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    settled_at  INTEGER,
    error       TEXT,
    claim_id    TEXT
);
-- Rows by state and due time: state counts and range scans per state.
CREATE INDEX "{{table}}_due" ON "{{table}}" (state, due_at);
-- Live rows (pending, processing, failed) in update id order, covering the
-- columns the due listing filters on, so a sweep never walks finished rows.
CREATE INDEX "{{table}}_live" ON "{{table}}" (update_id, state, due_at, received_at)
    WHERE state IN ('pending', 'processing', 'failed');
-- Unacknowledged exhaustions, in update id order.
CREATE INDEX "{{table}}_unacknowledged" ON "{{table}}" (update_id)
    WHERE state = 'abandoned' AND settled_at IS NULL;
-- Settled rows by settlement time, for pruning.
CREATE INDEX "{{table}}_settled" ON "{{table}}" (settled_at)
    WHERE settled_at IS NOT NULL;
