package botapi

import (
	"strconv"
	"time"
)

// APIError is Telegram's refusal of a call, or an answer that was not
// Telegram's JSON envelope at all.
//
// Code is Telegram's error_code, or the HTTP status when the answer carried
// none. RetryAfter and MigrateToChatID are zero unless Telegram sent them in
// "parameters". NotJSON reports that the body was not Telegram's JSON
// envelope, as with a proxy's HTML error page; Description then says so,
// and Code is the HTTP status. The message never contains the token.
type APIError struct {
	// Method is the Bot API method that was called, such as "sendMessage".
	Method string
	// Code is Telegram's error_code, or the HTTP status when absent.
	Code int
	// Description is Telegram's description, "no description" when absent,
	// or a note that the response was not JSON.
	Description string
	// RetryAfter is parameters.retry_after; zero when Telegram sent none.
	// Values above [MaxRetryAfter] are clamped to it.
	RetryAfter time.Duration
	// MigrateToChatID is parameters.migrate_to_chat_id: the supergroup a
	// group was upgraded to. Zero when Telegram sent none.
	MigrateToChatID int64
	// NotJSON is true when the body was not Telegram's JSON envelope: not a
	// JSON object (for example a proxy's error page), or one without a
	// boolean "ok" (a proxy's or load balancer's JSON error). The answer is
	// then not Telegram's own word.
	NotJSON bool
}

// Error returns "telegram: <method> failed: <code> <description>".
func (e *APIError) Error() string {
	if e == nil {
		return "telegram: <nil APIError>"
	}
	return "telegram: " + e.Method + " failed: " + strconv.Itoa(e.Code) + " " + e.Description
}

// MaxRetryAfter bounds [APIError.RetryAfter]: a larger retry_after (which
// Telegram does not send in practice) is clamped to it rather than
// overflowing a [time.Duration]. Callers compare it with their own budget.
const MaxRetryAfter = 24 * time.Hour
