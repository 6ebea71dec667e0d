package sqlitestore

// DueSQL is the due listing's statement, with the table placeholder.
const DueSQL = dueSQL

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
// transaction.
func WaitingWrites(s *Store) int { return s.writes.Waiting() }
