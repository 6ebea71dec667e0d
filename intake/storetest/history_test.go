package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// historyShim keeps the attempt history itself, on top of a memstore, so
// that each of its flags can break one promise of the history.
type historyShim struct {
	*memstore.Store
	mu   sync.Mutex
	hist map[int64][]intake.AttemptRecord

	replaces         bool // a record replaces the update's earlier ones
	forgetsOnRequeue bool // Requeue clears the history instead of marking it
	keepsAfterPrune  bool // Prune leaves the history behind
	withoutRow       bool // records are kept for updates without a row
	cutsAtNUL        bool // the body is kept as a C string
	noValidate       bool // invalid records are kept
	aliases          bool // the caller's body and header values are kept, not copied
}

func newHistoryShim(m *memstore.Store, set func(*historyShim)) *historyShim {
	s := &historyShim{Store: m, hist: map[int64][]intake.AttemptRecord{}}
	set(s)
	return s
}

func (s *historyShim) RecordAttempt(ctx context.Context, rec intake.AttemptRecord) (bool, error) {
	if !s.noValidate {
		if err := rec.Validate(); err != nil {
			return false, err
		}
	}
	if _, ok, err := s.Get(ctx, rec.UpdateID); err != nil || (!ok && !s.withoutRow) {
		return false, err
	}
	if !s.aliases {
		rec.Body = append([]byte(nil), rec.Body...)
		rec.Header = rec.Header.Clone()
	}
	if s.cutsAtNUL {
		for i, b := range rec.Body {
			if b == 0 {
				rec.Body = rec.Body[:i]
				break
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.replaces {
		s.hist[rec.UpdateID] = nil
	}
	s.hist[rec.UpdateID] = append(s.hist[rec.UpdateID], rec)
	return true, nil
}

// Settle records a settlement's attempt record (intake.Settlement.Attempt)
// in the shim's history, as RecordAttempt does, once the settlement applied.
func (s *historyShim) Settle(ctx context.Context, id intake.Identity, st intake.Settlement) (bool, error) {
	rec := st.Attempt
	st.Attempt = nil // the memstore beneath would keep its own copy
	if rec != nil && !s.noValidate {
		if err := rec.Validate(); err != nil {
			return false, err
		}
	}
	ok, err := s.Store.Settle(ctx, id, st)
	if err != nil || !ok || rec == nil {
		return ok, err
	}
	r := *rec
	r.UpdateID, r.Attempt, r.ClaimID = id.UpdateID, id.Attempt, id.ClaimID
	_, err = s.RecordAttempt(ctx, r)
	return true, err
}

func (s *historyShim) Attempts(_ context.Context, id int64) ([]intake.AttemptRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []intake.AttemptRecord
	for _, r := range s.hist[id] {
		r.Body = append([]byte(nil), r.Body...)
		r.Header = r.Header.Clone()
		out = append(out, r)
	}
	return out, nil
}

func (s *historyShim) Requeue(ctx context.Context, id int64, now time.Time) (bool, error) {
	row, _, err := s.Get(ctx, id)
	if err != nil {
		return false, err
	}
	ok, err := s.Store.Requeue(ctx, id, now)
	if err != nil || !ok {
		return ok, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.forgetsOnRequeue {
		delete(s.hist, id)
		return true, nil
	}
	s.hist[id] = append(s.hist[id], intake.AttemptRecord{UpdateID: id, ClaimID: row.ClaimID,
		StartedAt: now, EndedAt: now, Outcome: intake.AttemptRequeued})
	return true, nil
}

func (s *historyShim) Prune(ctx context.Context, before time.Time) (int, error) {
	n, err := s.Store.Prune(ctx, before)
	if err != nil || s.keepsAfterPrune {
		return n, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.hist {
		if _, ok, _ := s.Get(ctx, id); !ok {
			delete(s.hist, id)
		}
	}
	return n, nil
}

func TestHistoryShimConforms(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return newHistoryShim(m, func(*historyShim) {})
	}), "History")
	requireCases(t, res)
}

func TestBrokenHistoriesFail(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		set   func(*historyShim)
		cases []string
		msg   []string
	}{
		{"replaces", func(s *historyShim) { s.replaces = true },
			[]string{"History/RecordsKept", "History/RecordedWithSettlement", "History/SurvivesSuccessAndRequeue", "History/RecordsCopied"},
			[]string{"Attempts(1) listed 1 records"}},
		{"forgetsOnRequeue", func(s *historyShim) { s.forgetsOnRequeue = true },
			[]string{"History/SurvivesSuccessAndRequeue", "History/PrunedWithUpdate"},
			[]string{"after two failed attempts and a requeue: Attempts(1) listed 0 records"}},
		{"keepsAfterPrune", func(s *historyShim) { s.keepsAfterPrune = true },
			[]string{"History/PrunedWithUpdate"},
			[]string{"Attempts(1) listed 1 records after update 1 was pruned, want none"}},
		{"withoutRow", func(s *historyShim) { s.withoutRow = true },
			[]string{"History/RecordsKept"},
			[]string{"RecordAttempt(9, attempt 1) reported true for an update with no row"}},
		{"cutsAtNUL", func(s *historyShim) { s.cutsAtNUL = true },
			[]string{"History/RecordsKept", "History/SurvivesSuccessAndRequeue", "History/PrunedWithUpdate", "History/RecordedWithSettlement", "History/RecordsCopied",
				"History/RecordTimesKept"},
			[]string{"record 0: [Body 1 bytes"}},
		{"noValidate", func(s *historyShim) { s.noValidate = true },
			[]string{"History/BadRecordRefused", "History/RecordedWithSettlement"},
			[]string{"RecordAttempt with outcome lost = true, <nil>; want an error wrapping intake.ErrInvalidArgument"}},
		{"aliases", func(s *historyShim) { s.aliases = true },
			[]string{"History/RecordsCopied"},
			[]string{"after the caller wrote into the body and header values of the record it passed to RecordAttempt: Attempts(1) record 0: [Header"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := check(t.Context(), factory(func(m *memstore.Store) intake.Store { return newHistoryShim(m, tc.set) }), "History")
			requireCases(t, res, tc.cases...)
			requireMessage(t, res, tc.cases[0], tc.msg...)
		})
	}
}
