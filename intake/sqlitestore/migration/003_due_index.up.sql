-- Rows by state and due time: state counts and range scans per state.
CREATE INDEX IF NOT EXISTS "{{table}}_due" ON "{{table}}" (state, due_at);
