package storetest

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

// journalOccurrenceFirst lists an update's journal by intent time, method,
// occurrence and only then parameters hash, as an SQL store whose ORDER BY
// named the last two keys the other way round would.
type journalOccurrenceFirst struct{ *memstore.Store }

func (s journalOccurrenceFirst) Journal(ctx context.Context, updateID int64) ([]intake.JournalEntry, error) {
	es, err := s.Store.Journal(ctx, updateID)
	slices.SortStableFunc(es, func(a, b intake.JournalEntry) int {
		return cmp.Or(a.IntendedAt.Compare(b.IntendedAt), cmp.Compare(a.Method, b.Method),
			cmp.Compare(a.Occurrence, b.Occurrence), cmp.Compare(a.ParamsHash, b.ParamsHash))
	})
	return es, err
}

func TestJournalOccurrenceFirstFails(t *testing.T) {
	t.Parallel()
	res := check(t.Context(), factory(func(m *memstore.Store) intake.Store {
		return journalOccurrenceFirst{m}
	}), "Journal/HashBeforeOccurrence", "Journal/ListedInKeyOrder")
	requireCases(t, res, "Journal/HashBeforeOccurrence")
	requireMessage(t, res, "Journal/HashBeforeOccurrence", "lists sendMessage/b/1 sendMessage/a/2 sendMessage/a/3", "want sendMessage/a/2 sendMessage/a/3 sendMessage/b/1")
}
