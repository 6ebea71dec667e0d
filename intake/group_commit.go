package intake

import (
	"context"
	"time"

	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// committer groups concurrent adds into one [Store.AddBatch] (or
// [ProcessStore.AddBatchAs]; leader/follower group commit, see package
// internal/groupcommit). A caller that finds no commit in progress commits
// at once, with no timer and no added latency; callers that arrive while a
// commit runs share the next one, of up to max adds. One caller's
// cancellation does not fail the others in its batch.
type committer = groupcommit.Group[addReq, AddResult]

// addReq is one add of a group commit.
type addReq struct {
	AddRequest
	// process is the process a claimed add is taken by
	// ([ProcessClaim.Process]); empty for none.
	process string
}

// newCommitter returns a committer of commit; bound limits one commit,
// and wait a caller's wait for its batch to begin.
func newCommitter(commit func(context.Context, []addReq) ([]AddResult, error), max int, bound, wait time.Duration) *committer {
	return &committer{CommitFunc: commit, Max: max, Bound: bound, Wait: wait}
}

// commitAdds records one group commit in one store call. Its claimed adds
// are taken by one process, the first one's: all of them in practice, since
// a runner claims under its own heartbeat. A claimed add taken by another
// (its heartbeat lapsed or was renewed between the two adds) is recorded
// unclaimed, and then scheduled as any other.
func (r *Runner) commitAdds(ctx context.Context, reqs []addReq) ([]AddResult, error) {
	batch := make([]AddRequest, len(reqs))
	process, set := "", false
	for i, rq := range reqs {
		batch[i] = rq.AddRequest
		if rq.Claim == nil {
			continue
		}
		if !set {
			process, set = rq.process, true
		} else if rq.process != process {
			batch[i].Claim = nil
		}
	}
	if r.proc != nil {
		return r.proc.AddBatchAs(ctx, batch, ProcessClaim{Process: process, MaxCrashes: r.crashes})
	}
	return r.store.AddBatch(ctx, batch)
}
