package main

import (
	"errors"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
)

// ourPackages are the packages whose names prefix their errors; a line for
// a person drops them.
var ourPackages = []string{
	"relay", "intake", "hookowner", "botapi", "transport", "gateway", "poll", "forward",
	"throttle", "dashboard", "broadcast", "operator", "sqlitestore", "pgstore", "memstore",
}

// inOneLine turns an error that went up through the library's packages
// ("relay: claim the webhook: hookowner: getWebhookInfo: botapi: …:
// transport: …") into the line a person can act on: what the command was
// doing, the cause at the bottom of the chain, and a hint naming the flags
// that decide it. The full chain goes to log at debug level (--log-level
// debug). A usage error, which already speaks in flags, passes unchanged,
// and so do nil and an error that wraps nothing (it is one line already,
// and its whole text is the detail there is).
func inOneLine(err error, log *slog.Logger) error {
	if err == nil {
		return nil
	}
	if _, ok := errors.AsType[*usageError](err); ok {
		return err
	}
	if !wraps(err) {
		return err
	}
	if log != nil {
		log.Debug("the full error", "err", err.Error())
	}
	step := stripPackages(err.Error())
	if i := strings.Index(step, ": "); i >= 0 {
		step = step[:i]
	}
	cause := rootCause(err)
	line := step
	if c := stripPackages(cause); c != "" && c != step {
		line += ": " + c
	}
	hint := "Run with --log-level debug for the full error."
	if nd, ok := errors.AsType[*transport.NotDispatchedError](err); ok {
		line = step + ": the Bot API was not reached: " + notDispatchedCause(nd)
		hint = "Check --api-root, --proxy and --ca-file. " + hint
	} else if _, ok := errors.AsType[*botapi.APIError](err); ok {
		hint = "Telegram refused the call: check --token and --api-root. " + hint
	} else if _, ok := errors.AsType[*botapi.RequestError](err); ok {
		hint = "Check --api-root, --proxy, --ca-file and --timeout. " + hint
	}
	return &lineError{msg: line, hint: hint, err: err}
}

// wraps reports whether err wraps another error (Unwrap() error or
// Unwrap() []error).
func wraps(err error) bool {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return u.Unwrap() != nil
	case interface{ Unwrap() []error }:
		return len(u.Unwrap()) > 0
	}
	return false
}

// lineError is a failure told in one line with a hint; the chain it
// summarizes stays reachable (errors.As, errors.Is) through Unwrap.
type lineError struct {
	msg, hint string
	err       error
}

func (e *lineError) Error() string { return e.msg }

func (e *lineError) Unwrap() error { return e.err }

// rootCause is the text of the error at the bottom of err's chain: of a
// joined error, the first branch that holds the PostgreSQL server's own
// word (a *pgconn.PgError), else the first branch. pgx joins one error per
// connection attempt, and with the default sslmode=prefer the first is
// only "server refused TLS connection" while a later one says what is
// wrong (a password, a database that does not exist).
func rootCause(err error) string {
	for {
		var next error
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			next = u.Unwrap()
		case interface{ Unwrap() []error }:
			if errs := u.Unwrap(); len(errs) > 0 {
				next = errs[0]
				for _, e := range errs {
					if _, ok := errors.AsType[*pgconn.PgError](e); ok {
						next = e
						break
					}
				}
			}
		}
		if next == nil {
			return err.Error()
		}
		err = next
	}
}

// stripPackages drops the package prefixes ("relay: ", "botapi: ") at the
// start of msg.
func stripPackages(msg string) string {
	for {
		trimmed := msg
		for _, p := range ourPackages {
			trimmed = strings.TrimPrefix(trimmed, p+": ")
		}
		if trimmed == msg {
			return msg
		}
		msg = trimmed
	}
}
