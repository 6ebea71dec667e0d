package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// forgetfulJournal records every intent afresh: it never reports a call as
// journaled, so a retried update would send its reply again.
type forgetfulJournal struct{ *memstore.Store }

func (s forgetfulJournal) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	e, in, err := s.Store.RecordIntent(ctx, id, call, at)
	if in == intake.IntentJournaled {
		in = intake.IntentRecorded
	}
	return e, in, err
}

// unfencedJournal records intents of stale identities too.
type unfencedJournal struct{ *memstore.Store }

func (s unfencedJournal) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	e, in, err := s.Store.RecordIntent(ctx, id, call, at)
	if in == intake.IntentStale {
		in = intake.IntentRecorded
	}
	return e, in, err
}

// outcomeIgnoresHash records an outcome on every pending entry of the
// identity with the call's method and occurrence, whatever its parameters
// hash: a journal whose outcome statement lost the hash from its key.
type outcomeIgnoresHash struct{ *memstore.Store }

func (s outcomeIgnoresHash) RecordOutcome(ctx context.Context, id intake.Identity, call intake.Call, res intake.CallResult, at time.Time) (bool, error) {
	es, err := s.Journal(ctx, id.UpdateID)
	if err != nil {
		return false, err
	}
	ok := false
	for _, e := range es {
		if e.Method == call.Method && e.Occurrence == call.Occurrence && e.Outcome == intake.CallPending {
			applied, err := s.Store.RecordOutcome(ctx, id, e.Call, res, at)
			if err != nil {
				return false, err
			}
			ok = ok || applied
		}
	}
	return ok, nil
}

// findIgnoresMethod answers an intent that finds its call journaled with
// the update's first entry of that occurrence and parameters hash,
// whatever its method: a journal whose lookup lost the method from its key.
type findIgnoresMethod struct{ *memstore.Store }

func (s findIgnoresMethod) RecordIntent(ctx context.Context, id intake.Identity, call intake.Call, at time.Time) (intake.JournalEntry, intake.Intent, error) {
	e, in, err := s.Store.RecordIntent(ctx, id, call, at)
	if err != nil || in != intake.IntentJournaled {
		return e, in, err
	}
	es, err := s.Journal(ctx, id.UpdateID)
	if err != nil {
		return e, in, err
	}
	for _, f := range es {
		if f.ParamsHash == call.ParamsHash && f.Occurrence == call.Occurrence {
			return f, in, nil
		}
	}
	return e, in, nil
}

// TestBrokenJournals: the journal cases catch a journal that forgets, one
// that ignores the fence, and ones that lose part of a call's key, and only
// those cases fail.
func TestBrokenJournals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wrap func(*memstore.Store) intake.Store
		want []string
	}{
		{"forgetful", func(m *memstore.Store) intake.Store { return forgetfulJournal{m} },
			[]string{"Journal/BodiesCopied", "Journal/ConcurrentIntents", "Journal/ConcurrentTailIntents", "Journal/OccurrencesAndMethods",
				"Journal/PendingAndUnknownStay", "Journal/ReplayAcrossAttempts", "Journal/RequeueKeepsJournal", "Journal/TailAdmitted"}},
		{"outcome by method and occurrence", func(m *memstore.Store) intake.Store { return outcomeIgnoresHash{m} },
			[]string{"Journal/OccurrencesAndMethods"}},
		{"found by update and occurrence", func(m *memstore.Store) intake.Store { return findIgnoresMethod{m} },
			[]string{"Journal/OccurrencesAndMethods"}},
		{"unfenced", func(m *memstore.Store) intake.Store { return unfencedJournal{m} },
			[]string{"Journal/EndedAttemptRefused", "Journal/IntentFencedByIdentity", "Journal/TailAdmitted", "Journal/TailEndsWithRow"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res := check(t.Context(), factory(tc.wrap))
			if got := failing(res); !slices.Equal(got, tc.want) {
				t.Errorf("failing cases = %q; want %q\n%s", got, tc.want, dump(res))
			}
		})
	}
}
