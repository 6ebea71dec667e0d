package sqlitestore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The chat index, built on demand.
//
// Strict chat order ([intake.ChatOrderStore]) checks a row's chat's
// earlier live rows through the chat index. Nothing else reads it, and
// keeping it costs every live row an index entry and its removal, at a
// place in the index set by the row's chat rather than at its end: 9% of
// the store's CPU for an update handled once, 24% for one added to a
// backlog (BENCHMARKS.md, relay). So a table has it only once strict
// order has been asked of it (migration 008 drops the one 005 built, and
// 009 the one a strict call built with 005's predicate). The
// first strict order call builds it, in a write transaction of the write
// group, so that a concurrent write waits for it rather than races it,
// and prepares the statements that name it. A build that fails is tried
// again by the next call. Building it reads the whole table once, so the
// first strict call on a large table takes as long as that read.

// chatIndexSQL builds the chat index: live rows by chat in update id
// order, covering what the order check reads, so the check is one index
// range and a chat's next row one index lookup.
const chatIndexSQL = `CREATE INDEX IF NOT EXISTS "{{table}}_chat" ON "{{table}}" (chat, update_id, state, due_at)
    WHERE ` + liveSQL

// strictStmts are the statements of strict chat order, which read the
// chat index.
type strictStmts struct {
	claim, due, dueChat *sql.Stmt
}

// strictOrder returns the strict order statements, building the chat
// index and preparing them on the first call.
func (s *Store) strictOrder(ctx context.Context) (*strictStmts, error) {
	if p := s.strict.Load(); p != nil {
		return p, nil
	}
	s.strictMu.Lock()
	defer s.strictMu.Unlock()
	if p := s.strict.Load(); p != nil {
		return p, nil
	}
	if s.strictClosed {
		return nil, fmt.Errorf("sqlitestore: strict order: %w", errClosed)
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, fillSQL(chatIndexSQL, s.table))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlitestore: build the chat index: %w", err)
	}
	p := &strictStmts{}
	if err := prepareStmts(ctx, s.table, []stmtSpec{
		{s.w, &p.claim, claimStrictSQL},
		{s.r, &p.due, dueStrictSQL},
		{s.r, &p.dueChat, dueChatSQL},
	}); err != nil {
		return nil, errors.Join(err, p.close())
	}
	s.strict.Store(p)
	return p, nil
}

// closeStrict refuses further strict order builds and closes the
// statements built. A build in progress finishes first, so what it
// prepares is closed here rather than left open on a caller's *sql.DB.
func (s *Store) closeStrict() error {
	s.strictMu.Lock()
	defer s.strictMu.Unlock()
	s.strictClosed = true
	if p := s.strict.Load(); p != nil {
		return p.close()
	}
	return nil
}

// close closes the statements prepared.
func (p *strictStmts) close() error {
	var errs []error
	for _, st := range []*sql.Stmt{p.claim, p.due, p.dueChat} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	return errors.Join(errs...)
}
