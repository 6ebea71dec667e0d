-- The update table as first released, before claim identities existed.
-- {{table}} is replaced by the validated table name.
CREATE TABLE IF NOT EXISTS "{{table}}" (
    update_id   INTEGER PRIMARY KEY,
    body        TEXT    NOT NULL,
    state       TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    due_at      INTEGER NOT NULL,
    received_at INTEGER NOT NULL,
    settled_at  INTEGER,
    error       TEXT
);
