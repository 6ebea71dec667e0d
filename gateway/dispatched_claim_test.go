package gateway_test

import (
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/transport"
)

// sentAfterRetryError is the error of a retrying transport whose first try
// never left and whose second reached Telegram and lost its answer: it
// wraps the first try's not-dispatched error, and says, through its own
// NotDispatched method, that the call did leave.
type sentAfterRetryError struct{ first error }

func (e *sentAfterRetryError) Error() string {
	return "retried, then lost the answer: " + e.first.Error()
}
func (e *sentAfterRetryError) Unwrap() error       { return e.first }
func (e *sentAfterRetryError) NotDispatched() bool { return false }

// retriedThenLost delivers each call through next and then reports a
// sentAfterRetryError instead of the answer.
type retriedThenLost struct{ next http.RoundTripper }

func (r retriedThenLost) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return nil, &sentAfterRetryError{first: &transport.NotDispatchedError{Stage: transport.StageConnect}}
}

// TestErrorSayingDispatchedIsUnknown: an error is not dispatched only when
// the first error in its chain with a NotDispatched method says true; one
// that says false, though it wraps a not-dispatched cause, is unknown, and
// the call is never sent again.
func TestErrorSayingDispatchedIsUnknown(t *testing.T) {
	t.Parallel()
	checkUnknownSentOnce(t, func(base http.RoundTripper) http.RoundTripper { return retriedThenLost{base} }, 27, "once")
}
