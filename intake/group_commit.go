package intake

import (
	"time"

	"github.com/tgrelay/tgrelay/internal/groupcommit"
)

// committer groups concurrent adds into one [BatchStore.AddBatch]
// (leader/follower group commit, see package internal/groupcommit). A
// caller that finds no commit in progress commits at once, with no timer
// and no added latency; callers that arrive while a commit runs share the
// next one, of up to max adds. One caller's cancellation does not fail the
// others in its batch.
type committer = groupcommit.Group[Incoming, bool]

// newCommitter returns the committer of s; bound limits one AddBatch.
func newCommitter(s BatchStore, max int, bound time.Duration) *committer {
	return &committer{CommitFunc: s.AddBatch, Max: max, Bound: bound}
}
