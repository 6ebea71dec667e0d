package pgstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tgrelay/tgrelay/intake/internal/sqlschema"
)

// The chat index, built on demand.
//
// Strict chat order ([intake.ChatOrderStore]) checks a row's chat's
// earlier live rows through the chat index. Nothing else reads it, and
// keeping it costs every live row an index entry on its add. So a table
// has it only once strict order has been asked of it (migration 008
// drops the one 005 built): the first strict order call of a store
// builds it, as 005 did, and it stays. Building takes the table's SHARE
// lock, which holds writes (adds among them) back until it ends, and
// reads the whole table once, so the first strict call on a large table
// takes as long as that read. Stores of several processes building it
// at once take turns under an advisory lock, and all but the first find
// it built. A build that fails (the role is not the table's owner, say)
// is tried again by the next strict call; [ChatIndexSQL] is the
// statement for an owner to run instead, and a role that may only write
// then finds it built.

// chatIndexSQL builds the chat index: live rows by chat in update id
// order, covering what the order check reads (state and lease end), so
// the check of a claim is one index range that need not visit the table,
// and a chat's next row one index lookup.
const chatIndexSQL = `CREATE INDEX IF NOT EXISTS {{table}}_chat ON {{table}} (chat, update_id) INCLUDE (state, due_at)
    WHERE state IN ('pending', 'processing', 'failed')`

// ChatIndexSQL returns the statement that builds table's chat index,
// which strict chat order reads and its first call builds: for a
// deployment whose store's role may not build indexes, to run as the
// table's owner before the first strict call. It returns the error of
// [ValidateTable] for a name that is not valid.
func ChatIndexSQL(table string) (string, error) {
	if err := ValidateTable(table); err != nil {
		return "", err
	}
	return chatIndexStatement(table), nil
}

// chatIndexStatement is chatIndexSQL for table, a name already valid.
func chatIndexStatement(table string) string {
	return strings.ReplaceAll(chatIndexSQL, sqlschema.Placeholder, table)
}

// chatIndexName is the name chatIndexSQL gives the table's chat index.
func (s *Store) chatIndexName() string { return s.table + "_chat" }

// strictOrder builds the chat index on the store's first strict order
// call.
func (s *Store) strictOrder(ctx context.Context) error {
	if s.chat.built.Load() {
		return nil
	}
	s.chat.mu.Lock()
	defer s.chat.mu.Unlock()
	if s.chat.built.Load() {
		return nil
	}
	stmt := chatIndexStatement(s.table)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tgrelay.chatindex'), hashtext($1::text))`, s.table); err != nil {
			return err
		}
		// CREATE INDEX IF NOT EXISTS asks for the table's ownership even
		// when the index exists, so a role that may only write finds the
		// one its owner built here instead.
		var built bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1::text) IS NOT NULL`, s.chatIndexName()).Scan(&built); err != nil || built {
			return err
		}
		_, err := tx.Exec(ctx, stmt)
		return err
	})
	if err != nil {
		return fmt.Errorf("build the chat index (%s; its owner can run pgstore.ChatIndexSQL instead): %w", s.table, err)
	}
	s.chat.built.Store(true)
	return nil
}
