package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// requeueClearsClaim clears a requeued row's claim id, as a store whose
// Requeue set it to NULL would show it: until the next claim, Get and
// List show the row as never claimed.
type requeueClearsClaim struct {
	*memstore.Store
	mu       sync.Mutex
	requeued map[int64]bool
}

func (s *requeueClearsClaim) Requeue(ctx context.Context, id int64, now time.Time) (bool, error) {
	ok, err := s.Store.Requeue(ctx, id, now)
	if ok {
		s.mu.Lock()
		s.requeued[id] = true
		s.mu.Unlock()
	}
	return ok, err
}

func (s *requeueClearsClaim) clear(r intake.Row) intake.Row {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.requeued[r.UpdateID] && r.State == intake.StatePending {
		r.ClaimID = ""
	}
	return r
}

func (s *requeueClearsClaim) Get(ctx context.Context, id int64) (intake.Row, bool, error) {
	r, ok, err := s.Store.Get(ctx, id)
	return s.clear(r), ok, err
}

func (s *requeueClearsClaim) List(ctx context.Context, q intake.ListQuery) ([]intake.Row, error) {
	rows, err := s.Store.List(ctx, q)
	for i := range rows {
		rows[i] = s.clear(rows[i])
	}
	return rows, err
}

func TestRequeueClearsClaimFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return &requeueClearsClaim{Store: m, requeued: map[int64]bool{}}
	}), "Admin/RequeueKeepsClaimID")
	requireCases(t, res, "Admin/RequeueKeepsClaimID")
	requireMessage(t, res, "Admin/RequeueKeepsClaimID", "Get(1) after Requeue shows an empty claim id")
	requireMessage(t, res, "Admin/RequeueKeepsClaimID", `List(pending) shows update 2 with claim id ""`)
}
