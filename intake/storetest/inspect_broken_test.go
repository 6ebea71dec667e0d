package storetest

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// Broken stores for cases that mutation sweeps of the SQL stores showed
// were missing: each has one bug that passed Run before its case.

// searchIgnoresUnacknowledged lists every abandoned row for
// SearchQuery.Unacknowledged, acknowledged exhaustions included.
type searchIgnoresUnacknowledged struct{ *memstore.Store }

func (s searchIgnoresUnacknowledged) Search(ctx context.Context, q intake.SearchQuery) ([]intake.Row, error) {
	if q.Unacknowledged {
		q.Unacknowledged, q.State = false, intake.StateAbandoned
	}
	return s.Store.Search(ctx, q)
}

func TestSearchIgnoringUnacknowledgedFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return searchIgnoresUnacknowledged{m} }), "Admin")
	requireCases(t, res, "Admin/Inspect", "Admin/StateAndUnacknowledged")
	requireMessage(t, res, "Admin/Inspect", "Search unacknowledged: 8,7, want 7")
}

// journalOccurrencesReversed lists a call's occurrences of one
// millisecond last first.
type journalOccurrencesReversed struct{ *memstore.Store }

func (s journalOccurrencesReversed) Journal(ctx context.Context, updateID int64) ([]intake.JournalEntry, error) {
	es, err := s.Store.Journal(ctx, updateID)
	slices.SortStableFunc(es, func(a, b intake.JournalEntry) int {
		return cmp.Or(a.IntendedAt.Compare(b.IntendedAt), strings.Compare(a.Method, b.Method),
			strings.Compare(a.ParamsHash, b.ParamsHash), cmp.Compare(b.Occurrence, a.Occurrence))
	})
	return es, err
}

func TestJournalOccurrencesReversedFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return journalOccurrencesReversed{m} }), "Journal")
	requireCases(t, res, "Journal/ListedInKeyOrder", "Journal/HashBeforeOccurrence")
}

// nilBodyRefused refuses a nil body, as a store binding it to a NOT NULL
// column does, failing the rest of a batch with it.
type nilBodyRefused struct{ *memstore.Store }

var errNilBody = errors.New("NOT NULL constraint failed: body")

func (s nilBodyRefused) Add(ctx context.Context, u intake.Incoming) (bool, error) {
	if u.Body == nil {
		return false, errNilBody
	}
	return s.Store.Add(ctx, u)
}

func (s nilBodyRefused) AddBatch(ctx context.Context, reqs []intake.AddRequest) ([]intake.AddResult, error) {
	for _, r := range reqs {
		if r.Body == nil {
			return nil, errNilBody
		}
	}
	return s.Store.AddBatch(ctx, reqs)
}

func TestNilBodyRefusedFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return nilBodyRefused{m} }), "Add")
	requireCases(t, res, "Add/EmptyBodies")
}

// listingLocksRows holds the rows it lists for a moment, and a claim of a
// row held so answers that it was not claimable.
type listingLocksRows struct {
	*memstore.Store
	listing *atomic.Int64
}

func (s listingLocksRows) Due(ctx context.Context, q intake.DueQuery) ([]intake.StoredUpdate, error) {
	s.listing.Add(1)
	defer s.listing.Add(-1)
	rows, err := s.Store.Due(ctx, q)
	time.Sleep(200 * time.Microsecond) // the lock is held while the listing is read
	return rows, err
}

func (s listingLocksRows) Claim(ctx context.Context, id int64, o intake.ClaimOpts) (intake.Identity, bool, error) {
	if s.listing.Load() > 0 {
		return intake.Identity{}, false, nil
	}
	return s.Store.Claim(ctx, id, o)
}

func TestListingLockingRowsFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return listingLocksRows{Store: m, listing: new(atomic.Int64)}
	}), "Race/ClaimsBesideListings")
	requireCases(t, res, "Race/ClaimsBesideListings")
}
