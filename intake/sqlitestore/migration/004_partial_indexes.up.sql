-- Live rows (pending, processing, failed) in update id order, covering the
-- columns the due listing filters on, so a sweep never walks finished rows.
CREATE INDEX IF NOT EXISTS "{{table}}_live" ON "{{table}}" (update_id, state, due_at, received_at)
    WHERE state IN ('pending', 'processing', 'failed');
-- Unacknowledged exhaustions, in update id order.
CREATE INDEX IF NOT EXISTS "{{table}}_unacknowledged" ON "{{table}}" (update_id)
    WHERE state = 'abandoned' AND settled_at IS NULL;
-- Settled rows by settlement time, for pruning.
CREATE INDEX IF NOT EXISTS "{{table}}_settled" ON "{{table}}" (settled_at)
    WHERE settled_at IS NOT NULL;
