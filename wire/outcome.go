package wire

import "net/http"

// HeaderOutcome is set on every answer tgrelay makes itself instead of
// Telegram: the gateway's own answers and the limiter's 429. Its value is
// one of the [Outcome] values other than [OutcomeAnswered]; an answer
// without it is Telegram's own. See [OutcomeOf].
const HeaderOutcome = "Tgrelay-Outcome"

// Outcome is how a Bot API call was answered, as [HeaderOutcome] states it
// and as the gateway reports it to its observer.
type Outcome string

// The outcomes.
const (
	// OutcomeAnswered: Telegram answered; its status and body were passed
	// on (a Telegram error, such as its own 429, included). It is never
	// written in [HeaderOutcome]: an answer without the header is
	// Telegram's.
	OutcomeAnswered Outcome = "answered"
	// OutcomeThrottled: the limiter could not send the call within its
	// wait and answered a Telegram-shaped 429 with retry_after; nothing
	// was sent.
	OutcomeThrottled Outcome = "throttled"
	// OutcomeNotDispatched: the call provably never left, even after the
	// gateway's tries; sending it again is safe.
	OutcomeNotDispatched Outcome = "not-dispatched"
	// OutcomeUnknown: the call may have reached Telegram; it is never
	// sent again by the gateway, and should not be sent again blindly.
	OutcomeUnknown Outcome = "unknown"
	// OutcomeStale: the call's attempt no longer holds its lease; nothing
	// was sent (409).
	OutcomeStale Outcome = "stale"
	// OutcomeRefused: the gateway refused the call (a wrong token, a method
	// that would break the relay's intake, a malformed identity, a body
	// too large); nothing was sent.
	OutcomeRefused Outcome = "refused"
)

// OutcomeOf returns the outcome an answer's header states:
// [HeaderOutcome]'s value, or [OutcomeAnswered] when the header is absent
// (Telegram's own answer). A value tgrelay does not define is returned as
// it is.
func OutcomeOf(h http.Header) Outcome {
	if v := h.Get(HeaderOutcome); v != "" {
		return Outcome(v)
	}
	return OutcomeAnswered
}
