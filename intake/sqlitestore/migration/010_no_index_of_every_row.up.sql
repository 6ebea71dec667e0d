-- 010: no index holds every row. The (state, due_at) index of 001 held
-- an entry for each row the retention keeps, which each add wrote and
-- each settlement moved, to answer two questions of Stats: the rows in
-- each state, and the oldest pending row. The partial indexes answer
-- them instead, each for its rows: the live index (pending, processing
-- and failed rows, covering their state and due time), the settled index
-- (completed rows, and abandoned ones once acknowledged), now led by the
-- state so that it counts them by state, and the unacknowledged
-- exhaustions' index. A settlement now moves a row from the live index
-- to the settled one and writes nothing else.
--
-- The settled index keeps serving the prune of every build: its
-- statement (settled_at < ?, state IN ('completed', 'abandoned')) reads
-- one range of it per state. A build before this step counts the rows in
-- each state by reading the table.
DROP INDEX IF EXISTS "{{table}}_due";
DROP INDEX IF EXISTS "{{table}}_settled";
CREATE INDEX "{{table}}_settled" ON "{{table}}" (state, settled_at)
    WHERE settled_at IS NOT NULL;
