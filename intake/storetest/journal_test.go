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

// TestBrokenJournals: the journal cases catch a journal that forgets and one
// that ignores the fence, and only those cases fail.
func TestBrokenJournals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wrap func(*memstore.Store) intake.Store
		want []string
	}{
		{"forgetful", func(m *memstore.Store) intake.Store { return forgetfulJournal{m} },
			[]string{"Journal/BodiesCopied", "Journal/ConcurrentIntents", "Journal/ConcurrentTailIntents", "Journal/PendingAndUnknownStay",
				"Journal/ReplayAcrossAttempts", "Journal/RequeueKeepsJournal", "Journal/TailAdmitted"}},
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
