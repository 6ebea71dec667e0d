package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// The secrets of TestNoSecretReachesStoreLogOrPage: a bot token of the
// real shape, the webhook secret, and the app's secret token, the last two
// registered with the redactors (no shape betrays them).
const (
	libToken  = "7081234567:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
	hookSec   = "wh-secret-fedcba9876543210"
	appSecret = "app-secret-fedcba9876543210"
)

// libraryErrors are the errors bot libraries really return when a send
// fails, built as they build them, each quoting the request URL and so the
// token:
//   - telego v1.6.0: methods.go "telego: sendMessage: %w", bot.go
//     "internal execution: %w" and "request call: %w", telegoapi/caller.go
//     "http do request: %w" around net/http's *url.Error;
//   - telego's API refusal: bot.go "api: %w" around telegoapi.Error
//     (`%d %q`);
//   - go-telegram/bot v1.19.0: raw_request.go "error do request for method
//     %s, %w" around net/http's *url.Error, and "error decode response body
//     for method %s, %s, %w", which quotes the answer's body.
func libraryErrors() []error {
	urlErr := fmt.Errorf(`Post "https://api.telegram.org/bot%s/sendMessage": dial tcp 149.154.167.220:443: connect: connection refused`, libToken)
	return []error{
		fmt.Errorf("telego: sendMessage: %w", fmt.Errorf("internal execution: %w", fmt.Errorf("request call: %w", fmt.Errorf("http do request: %w", urlErr)))),
		fmt.Errorf("telego: sendMessage: %w", fmt.Errorf("api: %w", fmt.Errorf("%d %q", 400, "Bad Request: chat not found (secret "+hookSec+")"))),
		fmt.Errorf("error do request for method %s, %w", "sendMessage", urlErr),
		fmt.Errorf("error decode response body for method %s, %s, %w", "sendMessage",
			`<html>proxy refused /bot`+libToken+`/sendMessage?secret=`+appSecret+`</html>`,
			errors.New("invalid character '<' looking for beginning of value")),
	}
}

// No secret reaches the store (the rows' errors and the attempt records:
// error, answer body and headers), a log line, or the update's page, when
// handlers fail with bot libraries' real error texts and the app answers
// with a body and headers that quote the token. The page still shows the
// app's own words and the library's error around the masks.
func TestNoSecretReachesStoreLogOrPage(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			errs := libraryErrors()
			red := &botapi.Redactor{}
			red.Add(libToken, hookSec, appSecret)
			var logs testkit.SyncBuffer
			r, err := intake.New(intake.Config{
				Store:           st,
				MaxAttempts:     1,
				KeepExhaustions: true,
				Redactor:        red,
				Logger:          slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				Handler: func(ctx context.Context, u intake.Update) error {
					intake.ReportAnswer(ctx, intake.AttemptAnswer{
						Status: 502,
						Header: http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req " + appSecret}},
						Body: fmt.Appendf(nil, `{"ok":false,"description":"chat not found","url":"https://api.telegram.org/bot%s/sendMessage","secret":%q}`,
							libToken, hookSec),
					})
					if i := int(u.ID) - 1; i < len(errs) {
						return errs[i]
					}
					return nil
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = r.Close(ctx)
			})
			n := int64(len(errs) + 1) // the last one completes
			for id := int64(1); id <= n; id++ {
				if _, err := r.Accept(t.Context(), body(id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Idle(t.Context()); err != nil {
				t.Fatal(err)
			}
			s := serve(t, dashboard.Config{Store: st, Secrets: []string{libToken, hookSec}})
			leaks := func(what, text string) {
				t.Helper()
				for _, secret := range []string{libToken, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ", hookSec, appSecret} {
					if strings.Contains(text, secret) {
						t.Errorf("%s shows %q:\n%s", what, secret, text)
					}
				}
			}
			for id := int64(1); id <= n; id++ {
				row, ok, err := st.Get(t.Context(), id)
				if err != nil || !ok {
					t.Fatalf("Get(%d) = %v, %v", id, ok, err)
				}
				leaks(fmt.Sprintf("update %d's stored error", id), row.Error)
				recs, err := st.Attempts(t.Context(), id)
				if err != nil || len(recs) != 1 {
					t.Fatalf("Attempts(%d) = %d records, %v; want 1", id, len(recs), err)
				}
				rec := recs[0]
				leaks(fmt.Sprintf("update %d's attempt record", id), fmt.Sprintf("%s | %s | %v", rec.Error, rec.Body, rec.Header))
				if rec.Status != 502 || !strings.Contains(string(rec.Body), "chat not found") {
					t.Errorf("update %d's attempt record lost the app's answer: %d %q", id, rec.Status, rec.Body)
				}
				code, page := s.get(t, fmt.Sprintf("/updates/%d", id))
				if code != http.StatusOK {
					t.Fatalf("GET /updates/%d: %d", id, code)
				}
				leaks(fmt.Sprintf("update %d's page", id), page)
				mustContain(t, fmt.Sprintf("update %d's page", id), page, "Attempts", "502", "chat not found", "X-Request-Id: req [redacted]")
				if id < n {
					want := map[int64]string{1: "connection refused", 2: "Bad Request: chat not found", 3: "error do request for method sendMessage", 4: "invalid character"}[id]
					if !strings.Contains(rec.Error, want) {
						t.Errorf("update %d's attempt error %q lost the library's words %q", id, rec.Error, want)
					}
					mustContain(t, fmt.Sprintf("update %d's page", id), page, "bot7081234567:[redacted]", "failed")
				} else {
					mustContain(t, "the completed update's page", page, "completed")
				}
			}
			leaks("the log", logs.String())
			if !strings.Contains(logs.String(), "attempt failed") {
				t.Errorf("the log lacks the failures:\n%s", logs.String())
			}
		})
	}
}
