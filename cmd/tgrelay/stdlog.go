package main

import (
	stdlog "log"
	"log/slog"
	"sync/atomic"
)

// ownStdLog is set by main: serve then sends the standard library's log
// package through its own logger (redirectStdLog). In-process tests leave
// it unset, so that parallel runs never swap the global logger.
var ownStdLog atomic.Bool

// redirectStdLog sends what the standard library's log package writes
// through l, at Warn, masked like every other line, and returns the
// function that restores it. net/http writes there: its Transport logs an
// app's "Unsolicited response ... starting with" up to 4 KiB of the app's
// own bytes, which may hold a secret (the app's secret token echoed back).
func redirectStdLog(l *slog.Logger) (restore func()) {
	out, flags, prefix := stdlog.Writer(), stdlog.Flags(), stdlog.Prefix()
	stdlog.SetFlags(0)
	stdlog.SetPrefix("")
	stdlog.SetOutput(slog.NewLogLogger(l.Handler(), slog.LevelWarn).Writer())
	return func() {
		stdlog.SetOutput(out)
		stdlog.SetFlags(flags)
		stdlog.SetPrefix(prefix)
	}
}
