package botapi_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

// notDispatchedError stands in for transport's *NotDispatchedError, which
// botapi must recognise by its method without importing transport.
type notDispatchedError struct{ sent bool }

func (e *notDispatchedError) Error() string       { return "transport: request not dispatched" }
func (e *notDispatchedError) NotDispatched() bool { return !e.sent }

// selfError unwraps to itself: a cycle.
type selfError struct{}

func (e *selfError) Error() string { return "self" }
func (e *selfError) Unwrap() error { return e }

// joinCycle unwraps to a list that contains itself.
type joinCycle struct{ others []error }

func (e *joinCycle) Error() string   { return "join cycle" }
func (e *joinCycle) Unwrap() []error { return append([]error{e}, e.others...) }

// panicError panics in every method.
type panicError struct{}

func (panicError) Error() string { panic("Error() panicked") }
func (panicError) Unwrap() error { panic("Unwrap() panicked") }

// asError reaches a not-dispatched error only through its As method.
type asError struct{}

func (asError) Error() string { return "opaque wrapper" }
func (asError) As(target any) bool {
	if p, ok := target.(*interface{ NotDispatched() bool }); ok {
		*p = &notDispatchedError{}
		return true
	}
	return false
}

// chain wraps err n times.
func chain(err error, n int) error {
	for range n {
		err = fmt.Errorf("layer: %w", err)
	}
	return err
}

func apiErr(code int, description string) *botapi.APIError {
	return &botapi.APIError{Method: "sendMessage", Code: code, Description: description}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	unknown := botapi.Failure{Reason: botapi.ReasonUnknown, Evidence: botapi.EvidenceNone}
	unreachable := func(r botapi.Reason, status int) botapi.Failure {
		return botapi.Failure{Reason: r, Status: status, RecipientUnreachable: true, Evidence: botapi.EvidenceDescription}
	}
	var nilAPI *botapi.APIError
	tests := []struct {
		name string
		err  error
		want botapi.Failure
	}{
		// Reference §5.2 case 1: the four recipient refusals keep their names.
		{"403 blocked", apiErr(403, "Forbidden: bot was blocked by the user"), unreachable(botapi.ReasonBlockedByUser, 403)},
		{"403 user deactivated", apiErr(403, "Forbidden: user is deactivated"), unreachable(botapi.ReasonUserDeactivated, 403)},
		{"400 chat not found", apiErr(400, "Bad Request: chat not found"), unreachable(botapi.ReasonChatNotFound, 400)},
		{"403 not started", apiErr(403, "Forbidden: bot can't initiate conversation with a user"), unreachable(botapi.ReasonNotStarted, 403)},
		{"403 not started without apostrophe", apiErr(403, "Forbidden: bot cant initiate conversation with a user"), unreachable(botapi.ReasonNotStarted, 403)},
		{"403 kicked", apiErr(403, "Forbidden: bot was kicked from the supergroup chat"), unreachable(botapi.ReasonBlockedByUser, 403)},
		// Beyond the reference: more unreachable phrases.
		{"403 not a member of the channel", apiErr(403, "Forbidden: bot is not a member of the channel chat"), unreachable(botapi.ReasonBlockedByUser, 403)},
		{"403 group chat deleted", apiErr(403, "Forbidden: the group chat was deleted"), unreachable(botapi.ReasonChatNotFound, 403)},
		{"400 chat deleted", apiErr(400, "Bad Request: chat was deleted"), unreachable(botapi.ReasonChatNotFound, 400)},
		{"400 peer id invalid", apiErr(400, "Bad Request: PEER_ID_INVALID"), unreachable(botapi.ReasonChatNotFound, 400)},
		{"account deactivated", apiErr(403, "Forbidden: account is deactivated"), unreachable(botapi.ReasonUserDeactivated, 403)},
		// Case 2: 429 with retry_after outranks everything.
		{"429 retry_after", &botapi.APIError{Method: "sendMessage", Code: 429, Description: "Too Many Requests: retry after 30", RetryAfter: 30 * time.Second},
			botapi.Failure{Reason: botapi.ReasonRateLimited, Status: 429, RetryAfter: 30 * time.Second, Retryable: true, Evidence: botapi.EvidenceParameters}},
		// Case 3: 429 without parameters, Telegram's usual text.
		{"429 text only", apiErr(429, "Too Many Requests"),
			botapi.Failure{Reason: botapi.ReasonRateLimited, Status: 429, Retryable: true, Evidence: botapi.EvidenceDescription}},
		{"429 no text", apiErr(429, "no description"),
			botapi.Failure{Reason: botapi.ReasonRateLimited, Status: 429, Retryable: true, Evidence: botapi.EvidenceStatus}},
		{"flood phrase", apiErr(400, "Bad Request: FLOOD_WAIT_X"),
			botapi.Failure{Reason: botapi.ReasonRateLimited, Status: 400, Retryable: true, Evidence: botapi.EvidenceDescription}},
		// Case 4: the message itself is refused.
		{"cant parse entities", apiErr(400, "Bad Request: can't parse entities: unexpected end tag"),
			botapi.Failure{Reason: botapi.ReasonMessageInvalid, Status: 400, Evidence: botapi.EvidenceDescription}},
		{"message too long", apiErr(400, "Bad Request: message is too long"),
			botapi.Failure{Reason: botapi.ReasonMessageInvalid, Status: 400, Evidence: botapi.EvidenceDescription}},
		{"wrong file id", apiErr(400, "Bad Request: wrong file identifier/HTTP URL specified"),
			botapi.Failure{Reason: botapi.ReasonMessageInvalid, Status: 400, Evidence: botapi.EvidenceDescription}},
		// Case 5: Telegram's own 5xx.
		{"502 in Telegram's envelope", apiErr(502, "Bad Gateway"),
			botapi.Failure{Reason: botapi.ReasonServerError, Status: 502, Retryable: true, Evidence: botapi.EvidenceStatus}},
		{"500 internal", apiErr(500, "Internal Server Error"),
			botapi.Failure{Reason: botapi.ReasonServerError, Status: 500, Retryable: true, Evidence: botapi.EvidenceStatus}},
		// Beyond: a proxy's 5xx page is not Telegram's word.
		{"502 not JSON", &botapi.APIError{Method: "sendMessage", Code: 502, Description: "response was not JSON", NotJSON: true},
			botapi.Failure{Reason: botapi.ReasonUnknown, Status: 502, Evidence: botapi.EvidenceNone}},
		{"200 not JSON", &botapi.APIError{Method: "sendMessage", Code: 200, Description: "response was not JSON", NotJSON: true}, unknown},
		{"429 not JSON is not Telegram's", &botapi.APIError{Method: "sendMessage", Code: 429, Description: "response was not JSON", NotJSON: true},
			botapi.Failure{Reason: botapi.ReasonUnknown, Status: 429, Evidence: botapi.EvidenceNone}},
		// Case 6: a network failure without an answer.
		{"socket hang up", errors.New("socket hang up"), unknown},
		{"context canceled", fmt.Errorf("sendMessage: %w", context.Canceled), unknown},
		// Case 7: nested shapes.
		{"wrapped blocked", fmt.Errorf("notify: %w", apiErr(403, "Forbidden: bot was blocked by the user")), unreachable(botapi.ReasonBlockedByUser, 403)},
		{"nested retry_after", chain(&botapi.APIError{Method: "sendMessage", Code: 429, RetryAfter: 7 * time.Second}, 3),
			botapi.Failure{Reason: botapi.ReasonRateLimited, Status: 429, RetryAfter: 7 * time.Second, Retryable: true, Evidence: botapi.EvidenceParameters}},
		{"joined retry_after", errors.Join(errors.New("first"), &botapi.APIError{Method: "sendMessage", Code: 429, RetryAfter: 7 * time.Second}),
			botapi.Failure{Reason: botapi.ReasonRateLimited, Status: 429, RetryAfter: 7 * time.Second, Retryable: true, Evidence: botapi.EvidenceParameters}},
		{"plain text phrase", errors.New("Forbidden: bot was blocked by the user"), unreachable(botapi.ReasonBlockedByUser, 0)},
		// Case 8: never panics, never guesses.
		{"nil", nil, unknown},
		{"empty error", errors.New(""), unknown},
		{"typed nil APIError", nilAPI, unknown},
		{"wrapped typed nil APIError", fmt.Errorf("x: %w", nilAPI), unknown},
		{"unrecognised 400", apiErr(400, "Bad Request: something new"),
			botapi.Failure{Reason: botapi.ReasonUnrecognized, Status: 400, Evidence: botapi.EvidenceNone}},
		{"unrecognised 403 is never unreachable", apiErr(403, "Forbidden: something new"),
			botapi.Failure{Reason: botapi.ReasonUnrecognized, Status: 403, Evidence: botapi.EvidenceNone}},
		{"status out of range", apiErr(999, "odd"), unknown},
		{"self cycle", &selfError{}, unknown},
		{"join cycle", &joinCycle{others: []error{errors.New("x")}}, unknown},
		{"panicking error", panicError{}, unknown},
		{"wrapped panicking error", fmt.Errorf("x: %w", panicError{}), unknown},
		// Beyond: not-dispatched anywhere in the chain wins.
		{"not dispatched", &notDispatchedError{}, botapi.Failure{Reason: botapi.ReasonNotDispatched, Retryable: true, Evidence: botapi.EvidenceTransport}},
		{"not dispatched deep", chain(&notDispatchedError{}, 10), botapi.Failure{Reason: botapi.ReasonNotDispatched, Retryable: true, Evidence: botapi.EvidenceTransport}},
		{"not dispatched joined", errors.Join(apiErr(403, "Forbidden: bot was blocked by the user"), &notDispatchedError{}),
			botapi.Failure{Reason: botapi.ReasonNotDispatched, Retryable: true, Evidence: botapi.EvidenceTransport}},
		{"not dispatched through As", fmt.Errorf("x: %w", asError{}), botapi.Failure{Reason: botapi.ReasonNotDispatched, Retryable: true, Evidence: botapi.EvidenceTransport}},
		{"NotDispatched false", &notDispatchedError{sent: true}, botapi.Failure{Reason: botapi.ReasonUnknown, Evidence: botapi.EvidenceTransport}},
		{"not dispatched beyond depth limit", chain(&notDispatchedError{}, botapi.MaxClassifyDepth+1), unknown},
		{"not dispatched behind cycle", errors.Join(&selfError{}, &notDispatchedError{}),
			botapi.Failure{Reason: botapi.ReasonNotDispatched, Retryable: true, Evidence: botapi.EvidenceTransport}},
		// Beyond: chat-migrated carries the new id.
		{"migrated with id", &botapi.APIError{Method: "sendMessage", Code: 400, Description: "Bad Request: group chat was upgraded to a supergroup chat", MigrateToChatID: -1001234567890},
			botapi.Failure{Reason: botapi.ReasonChatMigrated, Status: 400, MigrateToChatID: -1001234567890, Evidence: botapi.EvidenceParameters}},
		{"migrated text only", apiErr(400, "Bad Request: group chat was upgraded to a supergroup chat"),
			botapi.Failure{Reason: botapi.ReasonChatMigrated, Status: 400, Evidence: botapi.EvidenceDescription}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := botapi.Classify(tt.err); got != tt.want {
				t.Errorf("Classify() = %+v\nwant         %+v", got, tt.want)
			}
		})
	}
}

// TestClassifyTraits checks that every reason's traits agree with the
// documented table, whatever evidence produced it.
func TestClassifyTraits(t *testing.T) {
	t.Parallel()
	for _, r := range botapi.Reasons() {
		retryable := r == botapi.ReasonRateLimited || r == botapi.ReasonServerError || r == botapi.ReasonNotDispatched
		unreachable := r == botapi.ReasonBlockedByUser || r == botapi.ReasonUserDeactivated ||
			r == botapi.ReasonChatNotFound || r == botapi.ReasonNotStarted
		if retryable && unreachable {
			t.Errorf("%s: both retryable and unreachable", r)
		}
	}
	if got := len(botapi.Reasons()); got != 11 {
		t.Errorf("Reasons() has %d entries, want 11", got)
	}
}

// TestClassifyHugeJoin bounds the walk over a very wide errors.Join.
func TestClassifyHugeJoin(t *testing.T) {
	t.Parallel()
	errs := make([]error, 10000)
	for i := range errs {
		errs[i] = errors.New("noise")
	}
	errs = append(errs, &notDispatchedError{})
	// The mark is past MaxClassifyNodes, so it is not seen: bounded, and
	// honestly unknown rather than a guess.
	if got := botapi.Classify(errors.Join(errs...)); got.Reason != botapi.ReasonUnknown {
		t.Errorf("Reason = %s, want unknown", got.Reason)
	}
}

func FuzzClassify(f *testing.F) {
	f.Add(403, "Forbidden: bot was blocked by the user", int64(0), int64(0), false, uint8(0))
	f.Add(429, "Too Many Requests: retry after 5", int64(5), int64(0), false, uint8(1))
	f.Add(502, "response was not JSON", int64(0), int64(0), true, uint8(2))
	f.Add(400, "Bad Request: group chat was upgraded to a supergroup chat", int64(0), int64(-100123), false, uint8(3))
	f.Add(0, "", int64(-1), int64(0), false, uint8(4))
	f.Fuzz(func(t *testing.T, code int, description string, retryAfter, migrate int64, notJSON bool, shape uint8) {
		ae := &botapi.APIError{Method: "m", Code: code, Description: description,
			RetryAfter: time.Duration(retryAfter) * time.Second, MigrateToChatID: migrate, NotJSON: notJSON}
		var err error
		switch shape % 6 {
		case 0:
			err = ae
		case 1:
			err = chain(ae, int(shape))
		case 2:
			err = errors.Join(errors.New(description), ae, &selfError{})
		case 3:
			err = errors.New(description)
		case 4:
			err = &joinCycle{others: []error{ae}}
		case 5:
			err = errors.Join(ae, &notDispatchedError{sent: shape%2 == 0})
		}
		got := botapi.Classify(err)
		if got.Reason == "" || got.Evidence == "" {
			t.Fatalf("empty verdict %+v", got)
		}
		if got.Retryable && got.RecipientUnreachable {
			t.Fatalf("retryable and unreachable at once: %+v", got)
		}
		if got.Reason == botapi.ReasonUnknown && (got.Retryable || got.RecipientUnreachable) {
			t.Fatalf("unknown with a trait: %+v", got)
		}
		if got.RetryAfter < 0 {
			t.Fatalf("negative RetryAfter: %+v", got)
		}
	})
}
