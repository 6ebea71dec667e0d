package sqlitestore

import "context"

// OpenWithBeforeAlter is Open with a hook that runs between the claim_id
// column check and the ALTER that adds it, to stage the upgrade race.
func OpenWithBeforeAlter(ctx context.Context, path string, cfg Config, beforeAlter func()) (*Store, error) {
	return open(ctx, path, cfg, hooks{beforeAlter: beforeAlter})
}

// DueSQL is the due listing's statement, with the table placeholder.
const DueSQL = dueSQL
