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
