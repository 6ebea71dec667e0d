-- 008: the chat index (005) is built on demand. Only strict chat order
-- reads it, and every live row of a deployment in process order paid for
-- it: an entry on each add (BENCHMARKS.md, relay, session 19). The first
-- strict order call of a store builds it again (chatorder.go), and from
-- then on it stays. Statements never name an index here, so a build from
-- before this step runs on the table without it; its strict claims then
-- read the chat's live rows through the live index instead.
DROP INDEX IF EXISTS {{table}}_chat;
