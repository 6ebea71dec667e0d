-- 009: the live index's predicate is an OR of equalities rather than
-- state IN ('pending', 'processing', 'failed'). SQLite evaluates an IN
-- list of more than two constants by building a temporary b-tree of
-- them, once in every statement that evaluates it, and a partial index's
-- predicate is evaluated by every insert and every update of a row: every
-- claimed add and every settlement built one (queries.go, liveSQL). The
-- statements that read the index repeat the new predicate, as SQLite
-- needs to use a partial index.
--
-- A binary built before this step names the index with the IN predicate
-- and so cannot use it ("no query solution"); the README's "Upgrades and
-- rolling back" says how to run one on a table past this step.
DROP INDEX IF EXISTS "{{table}}_live";
CREATE INDEX "{{table}}_live" ON "{{table}}" (update_id, state, due_at, received_at)
    WHERE (state = 'pending' OR state = 'processing' OR state = 'failed');
-- The chat index, built on demand by the first strict order call (008),
-- had the same predicate; the next strict call builds it again with the
-- new one.
DROP INDEX IF EXISTS "{{table}}_chat";
