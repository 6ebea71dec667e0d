package main

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/tgrelay/tgrelay/botapi"
)

// Log formats and levels accepted by --log-format and --log-level.
var (
	logFormats = []string{"text", "json"}
	logLevels  = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
)

// newLogger returns a structured logger writing to w in format ("text" or
// "json") at level, with every attribute and message passed through red (the bot token and
// webhook secret registered in it, and anything shaped like a token).
func newLogger(w io.Writer, format, level string, red *botapi.Redactor) (*slog.Logger, error) {
	lv, ok := logLevels[strings.ToLower(level)]
	if !ok {
		return nil, &usageError{msg: fmt.Sprintf("--log-level %q is not one of debug, info, warn, error", level)}
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: red.ReplaceAttr}
	var h slog.Handler
	switch strings.ToLower(format) {
	case "text":
		h = slog.NewTextHandler(&lockedWriter{w: w}, opts)
	case "json":
		h = slog.NewJSONHandler(&lockedWriter{w: w}, opts)
	default:
		return nil, &usageError{msg: fmt.Sprintf("--log-format %q is not one of %s", format, strings.Join(logFormats, ", "))}
	}
	return slog.New(h), nil
}

// lockedWriter serialises writes, since stderr may be shared with other
// writers (the sandbox's log lines, a test's buffer).
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
