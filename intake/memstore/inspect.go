package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/tgrelay/tgrelay/intake"
)

var _ intake.AdminStore = (*Store)(nil)

// Search lists rows newest first; see [intake.AdminStore.Search].
func (s *Store) Search(ctx context.Context, q intake.SearchQuery) ([]intake.Row, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: search: %w", err)
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: search: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.sortedIDsLocked()
	slices.Reverse(ids)
	var out []intake.Row
	for _, id := range ids {
		r := s.rows[id]
		switch {
		case q.Before != nil && id >= *q.Before,
			q.State != "" && r.state != q.State,
			q.Unacknowledged && !r.unacknowledged(),
			q.Crashed && r.crashes == 0,
			q.Chat != "" && r.chat != q.Chat,
			q.Text != "" && !bytes.Contains(r.body, []byte(q.Text)):
			continue
		}
		out = append(out, r.export(id))
		if len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

// Replies lists journaled calls across updates, newest first; see
// [intake.AdminStore.Replies].
func (s *Store) Replies(ctx context.Context, q intake.ReplyQuery) ([]intake.Reply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memstore: replies: %w", err)
	}
	if err := q.Validate(); err != nil {
		return nil, fmt.Errorf("memstore: replies: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []intake.Reply
	for id, r := range s.rows {
		if q.Chat != "" && r.chat != q.Chat {
			continue
		}
		for _, e := range r.calls {
			switch {
			case len(q.Outcomes) > 0 && !slices.Contains(q.Outcomes, e.Outcome),
				q.Method != "" && e.Method != q.Method,
				!q.Since.IsZero() && e.IntendedAt.Before(q.Since),
				!q.Until.IsZero() && !e.IntendedAt.Before(q.Until),
				q.Before != nil && e.Key().Compare(*q.Before) >= 0:
				continue
			}
			row := r.export(id)
			row.Body = nil
			out = append(out, intake.Reply{JournalEntry: cloneEntry(e), Row: row, Chat: r.chat})
		}
	}
	slices.SortFunc(out, func(a, b intake.Reply) int { return b.Key().Compare(a.Key()) })
	if len(out) > q.Limit {
		out = out[:q.Limit]
	}
	return out, nil
}

// Processes lists the registered processes and the processing rows; see
// [intake.AdminStore.Processes].
func (s *Store) Processes(ctx context.Context, limit int) (intake.ProcessList, error) {
	if err := ctx.Err(); err != nil {
		return intake.ProcessList{}, fmt.Errorf("memstore: processes: %w", err)
	}
	if err := intake.CheckProcessesLimit(limit); err != nil {
		return intake.ProcessList{}, fmt.Errorf("memstore: processes: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out intake.ProcessList
	for id, until := range s.procs {
		out.Processes = append(out.Processes, intake.Process{ID: id, Until: until})
	}
	slices.SortFunc(out.Processes, func(a, b intake.Process) int { return strings.Compare(a.ID, b.ID) })
	if len(out.Processes) > limit {
		out.Processes = out.Processes[:limit]
	}
	ids := s.sortedIDsLocked()
	slices.Reverse(ids)
	for _, id := range ids {
		r := s.rows[id]
		if r.state != intake.StateProcessing {
			continue
		}
		row := r.export(id)
		row.Body = nil
		out.Held = append(out.Held, intake.Holding{Row: row, Owner: r.owner})
		if len(out.Held) == limit {
			break
		}
	}
	return out, nil
}

// HeldBehind reports the update a row waits for in its chat's order; see
// [intake.AdminStore.HeldBehind].
func (s *Store) HeldBehind(ctx context.Context, updateID int64) (int64, bool, error) {
	if err := ctx.Err(); err != nil {
		return 0, false, fmt.Errorf("memstore: held behind: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.rows[updateID]
	if !ok || r.chat == "" {
		return 0, false, nil
	}
	var first int64
	found := false
	for id, o := range s.rows {
		if id >= updateID || o.chat != r.chat || (found && id >= first) {
			continue
		}
		switch o.state {
		case intake.StatePending, intake.StateProcessing, intake.StateFailed:
			first, found = id, true
		}
	}
	return first, found, nil
}
