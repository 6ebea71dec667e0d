-- 005: the chat key of each update (intake.Incoming.Chat), for strict chat
-- order: a row is claimable in strict order only when no earlier row of its
-- chat is live. Rows recorded before this migration get the empty chat:
-- they are not ordered and hold no other row back. Adding a column with a
-- constant default rewrites no rows.
ALTER TABLE {{table}} ADD COLUMN chat text NOT NULL DEFAULT '';
-- Live rows by chat in update id order, covering what the order check reads
-- (state and lease end), so the check of a claim is one index range that
-- need not visit the table, and a chat's next row one index lookup.
CREATE INDEX {{table}}_chat ON {{table}} (chat, update_id) INCLUDE (state, due_at)
    WHERE state IN ('pending', 'processing', 'failed');
