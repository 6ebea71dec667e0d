-- 008: the chat index (005) is built on demand. Only strict chat order
-- reads it, and every live row of a deployment in process order paid
-- for it: an entry on each add and its removal on each settlement, 9%
-- of the store's CPU for an update handled once (BENCHMARKS.md, session
-- 16). The first strict order call of a store builds it again
-- (chatorder.go), and from then on it stays.
DROP INDEX IF EXISTS "{{table}}_chat";
