package sqlitestore

import "time"

// DueSQL is the due listing's statement, with the table placeholder;
// PruneSQL, DueExhaustionsSQL (the form with a cursor) and StatsExtraSQL
// are those statements'.
const (
	DueSQL            = dueSQL
	PruneSQL          = pruneSQL
	DueExhaustionsSQL = dueExhaustionsAfterSQL
	StatsExtraSQL     = statsExtraSQL
)

var FillSQL = fillSQL

// DropProcessLocks closes s's process lock files without removing them, as
// the kernel does when the process dies.
func DropProcessLocks(s *Store) {
	s.procs.mu.Lock()
	defer s.procs.mu.Unlock()
	for id, f := range s.procs.files {
		f.Close()
		delete(s.procs.files, id)
	}
}

// OnTx makes s call f after each write transaction with the number of
// settlements batched in it and its error.
func OnTx(s *Store, f func(settles int, err error)) { s.txDone = f }

// WaitingWrites reports how many writes wait for s's next shared
// transaction, deferred settlements included.
func WaitingWrites(s *Store) int { return s.writes.Waiting() }

// WriterBusy reports whether s's writer has a transaction in progress.
func WriterBusy(s *Store) bool { return s.writes.Busy() }

// OnTxStart makes s call f as each group of writes starts, once its batch
// is formed.
func OnTxStart(s *Store, f func()) { s.txStart = f }

// ParkFor sets how long s's settlements under load wait for another write.
func ParkFor(s *Store, d time.Duration) { s.parkFor = d }

// AddChunks exposes addChunks; ChunkStep, MaxAddSizes and BatchRows its sizes.
var AddChunks = addChunks

const ChunkStep, MaxAddSizes, BatchRows = chunkStep, maxAddSizes, batchRows

// PreparedAdds reports how many INSERT statements s keeps prepared for
// AddBatch.
func PreparedAdds(s *Store) int {
	s.adds.mu.Lock()
	defer s.adds.mu.Unlock()
	n := 0
	for _, st := range s.adds.bySize {
		if st != nil {
			n++
		}
	}
	return n
}

// StrictStatementsOpen reports whether s holds strict order statements
// that are still open.
func StrictStatementsOpen(s *Store) bool {
	p := s.strict.Load()
	if p == nil {
		return false
	}
	_, err := p.due.Query()
	return err == nil || err.Error() != "sql: statement is closed"
}

// StatsSQL is Stats' count by state.
const StatsSQL = statsSQL

// ListSQL is List's statement for rows in the state bound as parameter
// 1, in update id order from the start.
const ListSQL = `SELECT ` + rowColumns + ` FROM "{{table}}" WHERE state = ?1 ORDER BY update_id LIMIT ?2`

// DeferredOutcomes reports how many outcomes wait in s for a write to
// carry them.
func DeferredOutcomes(s *Store) int {
	s.journal.mu.Lock()
	defer s.journal.mu.Unlock()
	return len(s.journal.deferred)
}
