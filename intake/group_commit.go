package intake

import (
	"context"
	"time"

	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// committer groups concurrent adds into one [ClaimingBatchStore.AddBatchClaimed]
// or [BatchStore.AddBatch] (leader/follower group commit, see package
// internal/groupcommit). A caller that finds no commit in progress commits
// at once, with no timer and no added latency; callers that arrive while a
// commit runs share the next one, of up to max adds. One caller's
// cancellation does not fail the others in its batch.
type committer = groupcommit.Group[AddRequest, AddResult]

// newCommitter returns a committer of commit; bound limits one commit.
func newCommitter(commit func(context.Context, []AddRequest) ([]AddResult, error), max int, bound time.Duration) *committer {
	return &committer{CommitFunc: commit, Max: max, Bound: bound}
}

// addBatchFunc adapts a [BatchStore] without claims on add to the
// committer: no request of its batches asks for a claim.
func addBatchFunc(s BatchStore) func(context.Context, []AddRequest) ([]AddResult, error) {
	return func(ctx context.Context, reqs []AddRequest) ([]AddResult, error) {
		us := make([]Incoming, len(reqs))
		for i, rq := range reqs {
			us[i] = rq.Incoming
		}
		added, err := s.AddBatch(ctx, us)
		if err != nil {
			return nil, err
		}
		out := make([]AddResult, len(added))
		for i, a := range added {
			out[i].Added = a
		}
		return out, nil
	}
}
