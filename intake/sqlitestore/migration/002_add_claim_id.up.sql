-- tgrelay:skip-if-column claim_id
-- The persisted claim identity (ADR 0256). SQLite has no ADD COLUMN IF NOT
-- EXISTS: the store checks the column first, and after a failed ALTER it
-- checks again, since another process may have added it in between.
ALTER TABLE "{{table}}" ADD COLUMN claim_id TEXT;
