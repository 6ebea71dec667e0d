package pgstore

import "time"

// BatchHooks observe the group commit of a store's writes; see testHooks.
type BatchHooks struct {
	// Enter is called by every write before it joins the group.
	Enter func()
	// Batch is called before a shared transaction runs its writes, with
	// their update ids in the order they run.
	Batch func(ids []int64)
	// End is called after a shared transaction, with whether it committed.
	End func(ids []int64, committed bool)
	// Merged is called after Batch when the transaction runs settlements
	// as one statement, with their update ids (the first of Batch's).
	Merged func(ids []int64)
}

// SetBatchHooks installs h on s. Call it before s is used.
func SetBatchHooks(s *Store, h BatchHooks) {
	s.hooks = &testHooks{enter: h.Enter, batch: h.Batch, end: h.End, merged: h.Merged}
}

// OrderWrites is orderWrites: the order a shared transaction runs writes of
// these update ids in.
func OrderWrites(ids []int64) []int { return orderWrites(ids) }

// MaxWriteBatch is maxWriteBatch.
const MaxWriteBatch = maxWriteBatch

// SetClock makes s read this host's clock from clock. Call it before s is
// used.
func SetClock(s *Store, clock func() time.Time) { s.clock = clock }

// DropChatLock makes s claim in strict chat order without the chat's
// advisory lock, the check-then-claim race the lock exists to close.
func DropChatLock(s *Store) { s.q.chatLock = "SELECT 1 WHERE $1::bigint IS NULL" }

// MergeSettles is mergeSettles for writes of these update ids, settles[i]
// telling whether write i is a settlement.
func MergeSettles(ids []int64, settles []bool) (merged, rest []int) {
	reqs := make([]writeReq, len(ids))
	for i, id := range ids {
		reqs[i].updateID = id
		if settles[i] {
			reqs[i].settle = &settleVals{}
		}
	}
	return mergeSettles(reqs, orderWrites(ids))
}

// FirstAnalyze is firstAnalyze.
const FirstAnalyze = firstAnalyze

// OnAnalyzed makes s call f with the outcome of each ANALYZE it runs as
// its table grows. Call it before s is used.
func OnAnalyzed(s *Store, f func(error)) { s.growth.ran = f }

// AnalyzesStarted is how many ANALYZEs s started as its table grew.
func AnalyzesStarted(s *Store) int64 { return s.growth.started.Load() }
