package botapi

import (
	"net/url"
	"strings"
	"time"
)

// Reason names why a send failed. The set may grow; switch over it with a
// default branch.
type Reason string

// The reasons [Classify] reports. Their traits are listed in [Failure].
const (
	// ReasonBlockedByUser: the user blocked the bot, or the bot was kicked
	// from (or is no longer a member of) the chat. Recipient unreachable.
	ReasonBlockedByUser Reason = "blocked-by-user"
	// ReasonUserDeactivated: the user deleted their account. Recipient
	// unreachable.
	ReasonUserDeactivated Reason = "user-deactivated"
	// ReasonChatNotFound: the chat does not exist (or was deleted).
	// Recipient unreachable.
	ReasonChatNotFound Reason = "chat-not-found"
	// ReasonNotStarted: the user never started the bot. Recipient
	// unreachable.
	ReasonNotStarted Reason = "not-started"
	// ReasonRateLimited: Telegram's 429. Retryable, after
	// [Failure.RetryAfter] when Telegram named it.
	ReasonRateLimited Reason = "rate-limited"
	// ReasonMessageInvalid: the message itself was refused (too long, bad
	// entities, bad file id). Neither retryable nor a recipient problem.
	ReasonMessageInvalid Reason = "message-invalid"
	// ReasonServerError: Telegram answered a 5xx in its own JSON envelope.
	// Retryable.
	ReasonServerError Reason = "server-error"
	// ReasonNotDispatched: the request provably never left this process, so
	// repeating it cannot duplicate a message. Retryable.
	ReasonNotDispatched Reason = "not-dispatched"
	// ReasonChatMigrated: a group was upgraded to a supergroup; resend to
	// [Failure.MigrateToChatID] (zero when only the description said so).
	// Not retryable unchanged, and the recipient is not gone.
	ReasonChatMigrated Reason = "chat-migrated"
	// ReasonUnrecognized: Telegram answered with a refusal in its own JSON
	// envelope that matches no reason above. Telegram answered, so the
	// outcome is known (refused); it is not the unknown outcome. Never
	// retryable, never recipient-unreachable.
	ReasonUnrecognized Reason = "unrecognized-refusal"
	// ReasonUnknown: nothing proves what happened. Never retryable, never
	// recipient-unreachable.
	ReasonUnknown Reason = "unknown"
)

// Reasons returns every [Reason] Classify can report, in a stable order.
func Reasons() []Reason {
	return []Reason{
		ReasonBlockedByUser, ReasonUserDeactivated, ReasonChatNotFound, ReasonNotStarted,
		ReasonRateLimited, ReasonMessageInvalid, ReasonServerError, ReasonNotDispatched,
		ReasonChatMigrated, ReasonUnrecognized, ReasonUnknown,
	}
}

// Evidence names what a [Failure] verdict rests on.
type Evidence string

// The kinds of evidence, from the strongest to none.
const (
	// EvidenceParameters: Telegram's structured parameters (retry_after,
	// migrate_to_chat_id).
	EvidenceParameters Evidence = "parameters"
	// EvidenceStatus: the status code alone (429, 5xx).
	EvidenceStatus Evidence = "status"
	// EvidenceDescription: our reading of Telegram's prose, a documented
	// fallback that may break if Telegram rewords it.
	EvidenceDescription Evidence = "description"
	// EvidenceTransport: the transport's own word: the request was not
	// dispatched (reason not-dispatched), or it was sent and no answer came
	// (reason unknown; see [Failure.ReplaySafe]).
	EvidenceTransport Evidence = "transport"
	// EvidenceNone: nothing recognisable; an honest refusal to guess.
	EvidenceNone Evidence = "none"
)

// Failure is the classification of one failed send.
//
// Traits by reason: blocked-by-user, user-deactivated, chat-not-found and
// not-started are RecipientUnreachable and not Retryable; rate-limited,
// server-error and not-dispatched are Retryable and not RecipientUnreachable;
// message-invalid, chat-migrated and unknown are neither.
//
// The zero Failure has an empty Reason; [Classify] never returns it.
type Failure struct {
	// Reason is the verdict.
	Reason Reason
	// Status is Telegram's error_code or the HTTP status, when one in
	// 400..599 was found; zero otherwise.
	Status int
	// RetryAfter is the wait Telegram named (parameters.retry_after); zero
	// when Telegram named none. Never invented.
	RetryAfter time.Duration
	// MigrateToChatID is the supergroup a migrated group moved to; set only
	// with [ReasonChatMigrated] when Telegram sent it.
	MigrateToChatID int64
	// Retryable reports that repeating this send unchanged could work and
	// cannot duplicate a message.
	Retryable bool
	// RecipientUnreachable reports that this recipient should no longer be
	// addressed. Asserted only on evidence, never for ReasonUnknown.
	RecipientUnreachable bool
	// Evidence is what the verdict rests on.
	Evidence Evidence
	// ReplaySafe is set, with reason unknown and evidence transport, when
	// every send of unknown outcome went through a replay journal (its
	// error carries a ReplaySafe() bool method returning true, as tgrelay's
	// gateway marks its errors): repeating the whole handler replays the
	// journal's answers instead of sending twice.
	ReplaySafe bool
}

// Bounds of the walk Classify makes over an error's cause chain.
const (
	// MaxClassifyDepth is how deep Classify follows Unwrap chains.
	MaxClassifyDepth = 16
	// MaxClassifyNodes is how many errors Classify visits in one chain or
	// tree (errors.Join), so a cyclic or huge chain cannot hang it.
	MaxClassifyNodes = 64
	// MaxDescriptionBytes is how much of a description Classify reads when
	// matching phrases.
	MaxDescriptionBytes = 4096
)

// notDispatcher is the mark of an error that proves a request never left the
// process, such as transport's *NotDispatchedError.
type notDispatcher = interface{ NotDispatched() bool }

// outcomeUnknowner is the mark of an error of a request that was sent and
// got no answer, such as transport's *OutcomeUnknownError.
type outcomeUnknowner = interface{ OutcomeUnknown() bool }

// replaySafer is the mark of an error of a request a replay journal keeps,
// so repeating it replays the recorded answer.
type replaySafer = interface{ ReplaySafe() bool }

// gatewayMark and gatewayUnknown are in every description of tgrelay's
// gateway's unknown answer (502, Tgrelay-Outcome: unknown), lower case.
const (
	gatewayMark    = "tgrelay:"
	gatewayUnknown = "not sent again"
)

// phrase maps a fragment of Telegram's description (lower case) to a reason.
type phrase struct {
	fragment string
	reason   Reason
}

// phrases is the description table, tried in order; the first match wins.
// Apostrophes are optional, as Telegram has spelled them both ways.
var phrases = [...]phrase{
	{"bot was blocked by the user", ReasonBlockedByUser},
	{"bot was kicked", ReasonBlockedByUser},
	{"bot is not a member of the", ReasonBlockedByUser},
	{"user is deactivated", ReasonUserDeactivated},
	{"account is deactivated", ReasonUserDeactivated},
	{"can't initiate conversation", ReasonNotStarted},
	{"can’t initiate conversation", ReasonNotStarted},
	{"cant initiate conversation", ReasonNotStarted},
	{"need to start a conversation", ReasonNotStarted},
	{"group chat was upgraded to a supergroup", ReasonChatMigrated},
	{"chat not found", ReasonChatNotFound},
	{"peer_id_invalid", ReasonChatNotFound},
	{"user not found", ReasonChatNotFound},
	{"chat was deleted", ReasonChatNotFound},
	{"too many requests", ReasonRateLimited},
	{"retry later", ReasonRateLimited},
	{"flood", ReasonRateLimited},
	{"message is too long", ReasonMessageInvalid},
	{"can't parse entities", ReasonMessageInvalid},
	{"can’t parse entities", ReasonMessageInvalid},
	{"cant parse entities", ReasonMessageInvalid},
	{"message text is empty", ReasonMessageInvalid},
	{"wrong file identifier", ReasonMessageInvalid},
	{"button_url_invalid", ReasonMessageInvalid},
}

// Classify reads a failed send and says what it means. It never panics and
// never guesses. A nil error (or one whose methods panic) gives
// {Reason: ReasonUnknown, Evidence: EvidenceNone}.
//
// Classify walks err's causes itself, through Unwrap() error and
// Unwrap() []error (and an As method, as [errors.As] would), bounded by
// [MaxClassifyDepth] and [MaxClassifyNodes], so a cyclic chain cannot hang it.
// The first rule that applies wins:
//
//  1. An error anywhere in the chain with an OutcomeUnknown() bool method
//     returning true (transport's *OutcomeUnknownError), or with a
//     NotDispatched() bool method returning false (its maker says the
//     request left): unknown, evidence transport, whatever else the chain
//     holds (a send that may have arrived outweighs everything). [Failure.ReplaySafe] is set when each
//     such error, or an error wrapping it, has a ReplaySafe() bool method
//     returning true.
//  2. An error anywhere in the chain with a NotDispatched() bool method
//     returning true (transport's *NotDispatchedError): not-dispatched,
//     evidence transport, no status.
//  3. The outermost [*APIError] (or another library's error of its shape:
//     telego's *telegoapi.Error, go-telegram/bot's *TooManyRequestsError
//     and *MigrateError, any struct with an integer ErrorCode, RetryAfter
//     or MigrateToChatID field) supplies the status (kept when in 400..599)
//     and its parameters: retry_after gives rate-limited with RetryAfter;
//     migrate_to_chat_id gives chat-migrated with MigrateToChatID; both with
//     evidence parameters.
//  4. A description of tgrelay's gateway saying the call's outcome is unknown
//     ("tgrelay: … not sent again", its 502 with Tgrelay-Outcome: unknown):
//     unknown, evidence transport (the gateway speaks for its transport).
//  5. The description (the APIError's, or else err.Error()) matched against a
//     table of Telegram's phrases, case-insensitively: evidence description.
//     Without an APIError, err.Error() is not read when the chain holds a
//     [*RequestError] or a [*url.Error]: a call that failed without an
//     answer has no description of Telegram's, and its message may quote
//     whatever a server sent (net/http quotes a malformed status line or
//     header), so it never reads as rate-limited or a recipient gone.
//  6. Status 429 in Telegram's JSON envelope: rate-limited, evidence
//     status. A 429 whose body was not Telegram's JSON (a proxy's page,
//     [APIError.NotJSON]) is not Telegram saying it did not act: unknown.
//  7. Status 5xx in Telegram's JSON envelope: server-error, evidence status.
//     A 5xx whose body was not JSON (a proxy's page, [APIError.NotJSON]) may
//     hide a delivered message, so it stays unknown.
//  8. An [*APIError] in Telegram's JSON envelope with a status in 400..599
//     that nothing above recognised: unrecognized-refusal, evidence none,
//     with its status.
//  9. Otherwise unknown, evidence none, with the status when one was found.
func Classify(err error) (f Failure) {
	unknown := Failure{Reason: ReasonUnknown, Evidence: EvidenceNone}
	if err == nil {
		return unknown
	}
	defer func() {
		if recover() != nil {
			f = unknown
		}
	}()

	sc := scan(err)
	if sc.unknown > 0 {
		f = Failure{Reason: ReasonUnknown, Evidence: EvidenceTransport}
		f.ReplaySafe = sc.unknown == sc.replaySafe
		return f
	}
	notDispatched, apiErr := sc.notDispatched, sc.apiErr
	if notDispatched {
		return failureFor(ReasonNotDispatched, EvidenceTransport, 0)
	}

	status := 0
	if apiErr != nil && apiErr.Code >= 400 && apiErr.Code <= 599 {
		status = apiErr.Code
	}
	if apiErr != nil && apiErr.RetryAfter > 0 {
		f = failureFor(ReasonRateLimited, EvidenceParameters, status)
		f.RetryAfter = apiErr.RetryAfter
		return f
	}
	if apiErr != nil && apiErr.MigrateToChatID != 0 {
		f = failureFor(ReasonChatMigrated, EvidenceParameters, status)
		f.MigrateToChatID = apiErr.MigrateToChatID
		return f
	}

	var description string
	switch {
	case apiErr != nil:
		description = apiErr.Description
	case !sc.noAnswer:
		description = err.Error()
	}
	if len(description) > MaxDescriptionBytes {
		description = description[:MaxDescriptionBytes]
	}
	description = strings.ToLower(description)
	if strings.Contains(description, gatewayMark) && strings.Contains(description, gatewayUnknown) {
		// tgrelay's gateway answered for the transport: the call may have
		// reached Telegram (its 502 must not read as Telegram's 5xx).
		return Failure{Reason: ReasonUnknown, Evidence: EvidenceTransport, Status: status}
	}
	for _, p := range phrases {
		if strings.Contains(description, p.fragment) {
			return failureFor(p.reason, EvidenceDescription, status)
		}
	}

	switch {
	case status == 429 && !apiErr.NotJSON:
		return failureFor(ReasonRateLimited, EvidenceStatus, status)
	case status >= 500 && !apiErr.NotJSON:
		return failureFor(ReasonServerError, EvidenceStatus, status)
	}
	if apiErr != nil && !apiErr.NotJSON && status != 0 {
		return failureFor(ReasonUnrecognized, EvidenceNone, status)
	}
	unknown.Status = status
	return unknown
}

// failureFor builds a Failure with the traits of reason.
func failureFor(reason Reason, evidence Evidence, status int) Failure {
	f := Failure{Reason: reason, Evidence: evidence, Status: status}
	switch reason {
	case ReasonBlockedByUser, ReasonUserDeactivated, ReasonChatNotFound, ReasonNotStarted:
		f.RecipientUnreachable = true
	case ReasonRateLimited, ReasonServerError, ReasonNotDispatched:
		f.Retryable = true
	}
	return f
}

// scanned is what scan found in an error's cause tree.
type scanned struct {
	notDispatched bool      // a not-dispatched mark
	unknown       int       // unknown-outcome marks
	replaySafe    int       // of those, the ones on or under a replay-safe mark
	apiErr        *APIError // the outermost *APIError
	noAnswer      bool      // a *RequestError or *url.Error: a failure without an answer
}

// scan walks err's cause tree, depth-first in the order errors.Is would,
// and reports the marks in it and the outermost *APIError. The walk is
// bounded by MaxClassifyDepth and MaxClassifyNodes.
func scan(err error) scanned {
	type node struct {
		err   error
		depth int
		safe  bool // on or under a replay-safe mark
	}
	var sc scanned
	stack := []node{{err, 0, false}}
	for visited := 0; len(stack) > 0 && visited < MaxClassifyNodes; visited++ {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.err == nil {
			continue
		}
		safe := n.safe || hasMark[replaySafer](n.err, replaySafer.ReplaySafe)
		if hasMark[outcomeUnknowner](n.err, outcomeUnknowner.OutcomeUnknown) || saysDispatched(n.err) {
			sc.unknown++
			if safe {
				sc.replaySafe++
			}
		}
		if isNotDispatched(n.err) {
			sc.notDispatched = true
		}
		if sc.apiErr == nil {
			sc.apiErr = asAPIError(n.err)
		}
		switch n.err.(type) {
		case *RequestError, *url.Error:
			sc.noAnswer = true
		}
		if n.depth >= MaxClassifyDepth {
			continue
		}
		switch u := n.err.(type) {
		case interface{ Unwrap() error }:
			stack = append(stack, node{u.Unwrap(), n.depth + 1, safe})
		case interface{ Unwrap() []error }:
			children := u.Unwrap()
			for i := len(children) - 1; i >= 0; i-- {
				stack = append(stack, node{children[i], n.depth + 1, safe})
			}
		}
	}
	return sc
}

// hasMark reports whether e itself (or its As method) has the mark M and
// the mark's method reports true.
func hasMark[M any](e error, method func(M) bool) bool {
	if m, ok := e.(M); ok && method(m) {
		return true
	}
	if as, ok := e.(interface{ As(any) bool }); ok {
		var m M
		if as.As(&m) && any(m) != nil && method(m) {
			return true
		}
	}
	return false
}

// saysDispatched reports whether e itself, directly or through its As
// method, has a NotDispatched method that reports false: its maker says
// the request left, whatever not-dispatched causes it wraps (a transport
// whose first try never left and whose retry did).
func saysDispatched(e error) bool {
	return hasMark[notDispatcher](e, func(n notDispatcher) bool { return !n.NotDispatched() })
}

// isNotDispatched reports whether e itself carries the not-dispatched mark,
// directly or through its As method.
func isNotDispatched(e error) bool {
	return hasMark[notDispatcher](e, notDispatcher.NotDispatched)
}

// asAPIError returns e as a non-nil *APIError, directly, through its As
// method, or read from another library's error of the same shape; or nil.
func asAPIError(e error) *APIError {
	if ae, ok := e.(*APIError); ok {
		return ae
	}
	if as, ok := e.(interface{ As(any) bool }); ok {
		var ae *APIError
		if as.As(&ae) && ae != nil {
			return ae
		}
	}
	return foreignAPIError(e)
}
