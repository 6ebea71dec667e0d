package main

import (
	"log/slog"
	"sync/atomic"
)

// fileWatch turns a SQLite store's file-change reports into one log line per
// change and the state behind the tgrelay_store_file_ok gauge. Its methods
// are safe for concurrent use; changed never blocks.
type fileWatch struct {
	log  *slog.Logger
	gone atomic.Bool
}

func newFileWatch(log *slog.Logger) *fileWatch { return &fileWatch{log: log} }

// changed is the store's OnFileChange: err non-nil says why the path no
// longer names the open database file; nil says it does again.
func (w *fileWatch) changed(err error) {
	if err != nil {
		w.gone.Store(true)
		w.log.Error("serve: the database file is gone; updates are refused with 503 and readiness fails until it is back", "error", err)
		return
	}
	w.gone.Store(false)
	w.log.Warn("serve: the database file is back; accepting updates again")
}

// ok reports whether the last report said the file is in place.
func (w *fileWatch) ok() bool { return !w.gone.Load() }
