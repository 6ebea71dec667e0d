-- 007: the record of the attempt that completed an update, in the update's
-- own row rather than in {{table}}_att. A completed row is never settled or
-- requeued again, so its completing attempt is the one record the row can
-- hold for good, and the settlement that completes it writes the record in
-- the same row change: no history row, no history index entry. rec_outcome
-- is NULL when the row holds no record (not completed, completed before
-- this migration, or settled without one). rec_after is the highest seq
-- of {{table}}_att when the record was kept (0 for none), which places it
-- in the history: after every row recorded before it, whose seq is at most
-- rec_after, and before every row recorded after it, whose seq is higher
-- (AUTOINCREMENT never hands out a seq twice). The record's update id,
-- attempt and claim id are the row's own; the other columns are
-- {{table}}_att's.
ALTER TABLE "{{table}}" ADD COLUMN rec_after INTEGER;
ALTER TABLE "{{table}}" ADD COLUMN rec_process TEXT;
ALTER TABLE "{{table}}" ADD COLUMN rec_started_at INTEGER;
ALTER TABLE "{{table}}" ADD COLUMN rec_ended_at INTEGER;
ALTER TABLE "{{table}}" ADD COLUMN rec_outcome TEXT;
ALTER TABLE "{{table}}" ADD COLUMN rec_error TEXT;
ALTER TABLE "{{table}}" ADD COLUMN rec_status INTEGER;
ALTER TABLE "{{table}}" ADD COLUMN rec_header TEXT;
ALTER TABLE "{{table}}" ADD COLUMN rec_body BLOB;
