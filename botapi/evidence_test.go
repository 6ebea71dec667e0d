package botapi_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
)

// Shapes of other libraries' errors, as they declare them.
type (
	// telego's *telegoapi.Error.
	telegoError struct {
		Description string
		ErrorCode   int
		Parameters  *telegoParameters
	}
	telegoParameters struct {
		MigrateToChatID int64
		RetryAfter      int
	}
	// go-telegram/bot's *TooManyRequestsError and *MigrateError.
	gtbTooMany struct {
		Message    string
		RetryAfter int
	}
	gtbMigrate struct {
		Message         string
		MigrateToChatID int
	}
	// Not a Telegram error: a RetryAfter in another unit.
	durationError struct {
		Code       int
		RetryAfter time.Duration
	}
	journaled struct{ error }
)

func (e *telegoError) Error() string   { return fmt.Sprintf("%d %q", e.ErrorCode, e.Description) }
func (e *gtbTooMany) Error() string    { return e.Message }
func (e *gtbMigrate) Error() string    { return e.Message }
func (e *durationError) Error() string { return "endpoint refused" }
func (e journaled) Unwrap() error      { return e.error }
func (e journaled) ReplaySafe() bool   { return true }

func TestClassifyOtherLibrariesErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		err         error
		reason      botapi.Reason
		status      int
		retryAfter  time.Duration
		migrateTo   int64
		evidence    botapi.Evidence
		retryable   bool
		unreachable bool
	}{
		{"telego 429", fmt.Errorf("api: %w", &telegoError{"Too Many Requests: retry after 7", 429, &telegoParameters{RetryAfter: 7}}),
			botapi.ReasonRateLimited, 429, 7 * time.Second, 0, botapi.EvidenceParameters, true, false},
		{"telego migrated", fmt.Errorf("api: %w", &telegoError{"Bad Request: group chat was upgraded to a supergroup chat", 400, &telegoParameters{MigrateToChatID: -100777}}),
			botapi.ReasonChatMigrated, 400, 0, -100777, botapi.EvidenceParameters, false, false},
		{"telego blocked", fmt.Errorf("api: %w", &telegoError{"Forbidden: bot was blocked by the user", 403, nil}),
			botapi.ReasonBlockedByUser, 403, 0, 0, botapi.EvidenceDescription, false, true},
		{"go-telegram/bot 429", &gtbTooMany{"too many requests", 3},
			botapi.ReasonRateLimited, 0, 3 * time.Second, 0, botapi.EvidenceParameters, true, false},
		{"go-telegram/bot migrated", fmt.Errorf("send: %w", &gtbMigrate{"migrated", -100123}),
			botapi.ReasonChatMigrated, 0, 0, -100123, botapi.EvidenceParameters, false, false},
		{"a duration is not retry_after", &durationError{Code: 429, RetryAfter: time.Second},
			botapi.ReasonUnknown, 0, 0, 0, botapi.EvidenceNone, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := botapi.Classify(tc.err)
			if f.Reason != tc.reason || f.Status != tc.status || f.RetryAfter != tc.retryAfter || f.MigrateToChatID != tc.migrateTo ||
				f.Evidence != tc.evidence || f.Retryable != tc.retryable || f.RecipientUnreachable != tc.unreachable {
				t.Fatalf("Classify = %+v", f)
			}
		})
	}
}

// leftAfterRetry is the error of a transport that retried a try that
// never left and then lost the answer of one that did: it wraps the first
// try's error and says, by its NotDispatched method, that the call left.
type leftAfterRetry struct{ first error }

func (e *leftAfterRetry) Error() string       { return "retried, then lost the answer" }
func (e *leftAfterRetry) Unwrap() error       { return e.first }
func (e *leftAfterRetry) NotDispatched() bool { return false }

func TestClassifyUnknownOutcome(t *testing.T) {
	t.Parallel()
	unknown := &transport.OutcomeUnknownError{Err: errors.New("reset")}
	apiErr := &botapi.APIError{Method: "sendMessage", Code: 429, RetryAfter: time.Second}
	for _, tc := range []struct {
		name string
		err  error
		safe bool
	}{
		{"wrapped", fmt.Errorf("lib: %w", unknown), false},
		{"beside a 429", errors.Join(apiErr, unknown), false},
		{"beside not dispatched", errors.Join(&transport.NotDispatchedError{Stage: transport.StageTLS}, unknown), false},
		{"said to have left, wrapping not dispatched", &leftAfterRetry{&transport.NotDispatchedError{Stage: transport.StageConnect}}, false},
		{"said to have left, beside not dispatched", errors.Join(&transport.NotDispatchedError{Stage: transport.StageConnect}, &leftAfterRetry{}), false},
		{"journaled", fmt.Errorf("lib: %w", journaled{unknown}), true},
		{"one journaled, one not", errors.Join(journaled{unknown}, unknown), false},
		{"the gateway's unknown answer", &botapi.APIError{Method: "sendMessage", Code: 502,
			Description: "Bad Gateway: tgrelay: the call may have reached Telegram, but no answer came back (reset); it is not sent again"}, false},
		{"the gateway's unknown answer in another library's words", fmt.Errorf("error response from telegram for method sendMessage, 502 %s",
			"Bad Gateway: tgrelay: Telegram's answer broke off (EOF); the call may have taken effect and is not sent again"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := botapi.Classify(tc.err)
			if f.Reason != botapi.ReasonUnknown || f.Evidence != botapi.EvidenceTransport || f.Retryable || f.ReplaySafe != tc.safe {
				t.Fatalf("Classify = %+v, want unknown by the transport's word, replay-safe %v", f, tc.safe)
			}
		})
	}
}

func TestParseAnswer(t *testing.T) {
	t.Parallel()
	if ae := botapi.ParseAnswer("sendMessage", 200, []byte(`{"ok":true,"result":{}}`)); ae != nil {
		t.Fatalf("success parsed as %v", ae)
	}
	ae := botapi.ParseAnswer("sendMessage", 429, []byte(`{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 2","parameters":{"retry_after":2}}`))
	if ae == nil || ae.Code != 429 || ae.RetryAfter != 2*time.Second || ae.Method != "sendMessage" {
		t.Fatalf("429 parsed as %+v", ae)
	}
	if ae := botapi.ParseAnswer("sendMessage", 502, []byte(`<html>bad gateway</html>`)); ae == nil || !ae.NotJSON || ae.Code != 502 {
		t.Fatalf("proxy page parsed as %+v", ae)
	}
}
