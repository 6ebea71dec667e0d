-- 007: the record of the attempt that completed an update, in the update's
-- own row rather than in {{table}}_att. A completed row is never settled or
-- requeued again, so its completing attempt is the one record the row can
-- hold for good, and the settlement that completes it writes the record in
-- the row version it writes anyway: no history row, no history index
-- entry. rec_outcome is NULL when the row holds no record (not completed,
-- completed before this migration, or settled without one). rec_after is
-- the highest seq of {{table}}_att when the record was kept (0 for none),
-- which places it in the history: after every row recorded before it,
-- whose seq is at most rec_after, and before every row recorded after it,
-- whose seq comes later from the identity's sequence. It is read once per
-- statement, not per row. The record's update id, attempt and claim id are
-- the row's own; the other columns are {{table}}_att's. Columns without a
-- default add no data to existing rows.
ALTER TABLE {{table}}
    ADD COLUMN rec_after      bigint,
    ADD COLUMN rec_process    text,
    ADD COLUMN rec_started_at bigint,
    ADD COLUMN rec_ended_at   bigint,
    ADD COLUMN rec_outcome    text,
    ADD COLUMN rec_error      text,
    ADD COLUMN rec_status     integer,
    ADD COLUMN rec_header     text,
    ADD COLUMN rec_body       bytea;
