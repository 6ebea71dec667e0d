-- 005: the chat key of each update (intake.Incoming.Chat), for strict chat
-- order: a row is claimable in strict order only when no earlier row of its
-- chat is live. Rows recorded before this migration get the empty chat:
-- they are not ordered and hold no other row back.
ALTER TABLE "{{table}}" ADD COLUMN chat TEXT NOT NULL DEFAULT '';
-- Live rows by chat in update id order, covering what the order check reads,
-- so the check is one index range and a chat's next row one index lookup.
CREATE INDEX "{{table}}_chat" ON "{{table}}" (chat, update_id, state, due_at)
    WHERE state IN ('pending', 'processing', 'failed');
