package memstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// TestBodiesAreCopied checks that neither the slice passed to Add nor a slice
// returned by a listing aliases the stored body.
func TestBodiesAreCopied(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := memstore.New()
	body := []byte(`{"update_id":1}`)
	if _, err := s.Add(ctx, intake.Incoming{UpdateID: 1, Body: body, ReceivedAt: t0}); err != nil {
		t.Fatal(err)
	}
	body[0] = 'X'
	due, err := s.Due(ctx, intake.DueQuery{Now: t0, PendingBefore: t0, Limit: 1})
	if err != nil || len(due) != 1 {
		t.Fatalf("Due = %v, %v; want one row", due, err)
	}
	if got := string(due[0].Body); got != `{"update_id":1}` {
		t.Fatalf("stored body changed through the caller's slice: %q", got)
	}
	due[0].Body[0] = 'Y'
	row, ok, err := s.Get(ctx, 1)
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if got := string(row.Body); got != `{"update_id":1}` {
		t.Fatalf("stored body changed through a returned slice: %q", got)
	}
}

// TestCancelledContext checks that a cancelled ctx is an error, not an answer.
func TestCancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	s := memstore.New()
	if _, err := s.Add(ctx, intake.Incoming{UpdateID: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Add with cancelled ctx: err = %v; want context.Canceled", err)
	}
	if row, ok, err := s.Get(t.Context(), 1); err != nil || ok {
		t.Fatalf("Get after cancelled Add = %v, %v, %v; want no row", row, ok, err)
	}
}
