package intake_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// A handler's error quoting secrets (a bot library quotes its request URL,
// and so the token) reaches neither the row's stored error, nor the
// exhaustion, nor a log line: the runner passes it through
// Config.Redactor. A token too short for the shape of a real one is masked
// because it is registered; one of the real shape is masked by shape.
func TestHandlerErrorRedacted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const (
			shortToken = "42:short-test-token"
			realToken  = "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
			secret     = "webhook-secret-value"
		)
		red := &botapi.Redactor{}
		red.Add(shortToken, secret)
		store := memstore.New()
		var logs testkit.SyncBuffer
		var (
			mu        sync.Mutex
			exhausted []intake.Exhaustion
			stored    []string
		)
		fail := errors.New(`telego: sendMessage: api: Post "https://api.telegram.org/bot` + shortToken +
			`/sendMessage?s=` + secret + `": dial tcp 127.0.0.1:1: connect: connection refused; also bot` + realToken)
		r := newRunner(t, intake.Config{
			Store:       store,
			MaxAttempts: 2,
			RetryFunc:   func(error, int) (time.Duration, bool) { return time.Second, true },
			Handler:     func(context.Context, intake.Update) error { return fail },
			ExhaustionHandler: func(_ context.Context, e intake.Exhaustion) error {
				mu.Lock()
				exhausted = append(exhausted, e)
				mu.Unlock()
				return errors.New("exhaustion endpoint refused " + shortToken)
			},
			KeepExhaustions: true,
			Redactor:        red,
			Logger:          slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		stored = append(stored, row(t, store, 1).Error) // the first attempt's
		time.Sleep(2 * time.Second)                     // the retry's delay, in the bubble's clock
		idle(t, r)

		mu.Lock()
		defer mu.Unlock()
		if len(stored) != 1 || len(exhausted) != 1 {
			t.Fatalf("stored errors %q, exhaustions %d: want one of each", stored, len(exhausted))
		}
		texts := map[string]string{
			"first attempt's stored error": stored[0],
			"exhaustion's error":           exhausted[0].Error,
			"row's stored error":           row(t, store, 1).Error,
			"log":                          logs.String(),
		}
		for what, text := range texts {
			for _, s := range []string{shortToken, secret, realToken, "short-test-token", "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"} {
				if strings.Contains(text, s) {
					t.Errorf("%s shows %q: %s", what, s, text)
				}
			}
			if what != "log" && !strings.Contains(text, "connection refused") {
				t.Errorf("%s lost the cause: %s", what, text)
			}
		}
		for _, want := range []string{"bot42:[redacted]/sendMessage?s=[redacted]", "bot1234567890:[redacted]"} {
			if !strings.Contains(exhausted[0].Error, want) {
				t.Errorf("exhaustion's error %q lacks %q", exhausted[0].Error, want)
			}
		}
		if !strings.Contains(logs.String(), "exhaustion handler failed") || !strings.Contains(logs.String(), "attempt failed") {
			t.Errorf("log lacks the failure lines: %s", logs.String())
		}
	})
}

// A handler's error may quote bytes no SQL text column takes (a NUL,
// invalid UTF-8; pgstore's test shows the settlement failing on them): the
// runner stores the text with them replaced, the rest intact.
func TestHandlerErrorStoredAsValidText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New()
		r := newRunner(t, intake.Config{
			Store:       store,
			MaxAttempts: 1,
			Handler:     func(context.Context, intake.Update) error { return errors.New("app said \x00 and \xff\xfe.") },
		})
		start(t, r)
		mustAccept(t, r, msg(1, 1), intake.Accepted)
		idle(t, r)
		if got, want := row(t, store, 1).Error, "app said \uFFFD and \uFFFD."; got != want {
			t.Errorf("stored error %q, want %q", got, want)
		}
	})
}
