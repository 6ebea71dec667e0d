package main

import (
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/tgrelay/tgrelay/botapi"
)

// redactor masks the bot token and the webhook secret in text: their exact
// values, their URL-escaped forms, and anything shaped like a bot token
// (botapi.Redact). Add may be called while logging; it is safe for
// concurrent use.
type redactor struct {
	mu      sync.RWMutex
	secrets []string
}

// minSecretLen is the shortest value the redactor masks by exact match;
// shorter ones would mask ordinary words.
const minSecretLen = 4

// Add registers secret values to mask. Empty and very short values are
// ignored.
func (r *redactor) Add(values ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range values {
		if len(v) < minSecretLen {
			continue
		}
		for _, form := range []string{v, url.QueryEscape(v), url.PathEscape(v)} {
			if !contains(r.secrets, form) {
				r.secrets = append(r.secrets, form)
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// String returns s with every registered secret masked.
func (r *redactor) String(s string) string {
	r.mu.RLock()
	for _, v := range r.secrets {
		s = strings.ReplaceAll(s, v, botapi.Redacted)
	}
	r.mu.RUnlock()
	return botapi.Redact(s)
}

// replaceAttr is the ReplaceAttr of every log handler: strings, errors and
// any other value rendered as text pass through String, the message
// included.
func (r *redactor) replaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.String(a.Value.String()))
	case slog.KindAny:
		v := a.Value.Any()
		var s string
		switch v := v.(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		case []byte:
			s = string(v)
		default:
			s = fmt.Sprintf("%+v", v)
		}
		a.Value = slog.StringValue(r.String(s))
	}
	return a
}

// Log formats and levels accepted by --log-format and --log-level.
var (
	logFormats = []string{"text", "json"}
	logLevels  = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}
)

// newLogger returns a structured logger writing to w in format ("text" or
// "json") at level, with every attribute and message passed through red.
func newLogger(w io.Writer, format, level string, red *redactor) (*slog.Logger, error) {
	lv, ok := logLevels[strings.ToLower(level)]
	if !ok {
		return nil, &usageError{msg: fmt.Sprintf("--log-level %q is not one of debug, info, warn, error", level)}
	}
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: red.replaceAttr}
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
