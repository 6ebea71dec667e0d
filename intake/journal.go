package intake

import (
	"context"
	"fmt"
	"time"
)

// The outgoing-call journal: an optional store capability ([JournalStore])
// that makes the replies an update's handler sends replay-safe. The gateway
// (package gateway) uses it; the runner never does.

// CallOutcome is what a journaled Bot API call is known to have done.
type CallOutcome string

// The four outcomes. Stores persist these exact strings.
const (
	// CallPending is an intent without an outcome: the call was about to be
	// sent, and nobody recorded what happened. It may have reached Telegram
	// (a crash between sending and recording leaves it so), so it is never
	// sent again.
	CallPending CallOutcome = "pending"
	// CallAnswered means Telegram answered; Status and Body are its answer.
	CallAnswered CallOutcome = "answered"
	// CallUnknown means the call may or may not have reached Telegram. It is
	// never sent again.
	CallUnknown CallOutcome = "unknown"
	// CallNotDispatched means the call provably never left the process. Its
	// entry does not count as journaled: a later identical call may send it.
	CallNotDispatched CallOutcome = "not_dispatched"
)

// Valid reports whether o is one of the four outcomes.
func (o CallOutcome) Valid() bool {
	switch o {
	case CallPending, CallAnswered, CallUnknown, CallNotDispatched:
		return true
	}
	return false
}

// MaxJournalBody is the largest [CallResult.Body] a [JournalStore] must keep
// byte for byte. Callers never record more (the gateway bounds Telegram's
// answers to it).
const MaxJournalBody = 1 << 20

// Call names one outgoing Bot API call among the calls made on behalf of one
// update.
type Call struct {
	// Method is the Bot API method, such as "sendMessage"; not empty.
	Method string
	// ParamsHash is a hash of the call's canonical parameters (the gateway
	// uses hex SHA-256); not empty. Two calls with equal parameters have
	// equal hashes.
	ParamsHash string
	// Occurrence numbers identical calls (equal Method and ParamsHash) made
	// by one attempt, from 1: a handler that sends the same text twice makes
	// occurrences 1 and 2, and a later attempt's first identical call is
	// occurrence 1 again.
	Occurrence int
}

// CallResult is the outcome of a call, recorded by
// [JournalStore.RecordOutcome].
type CallResult struct {
	// Outcome is CallAnswered, CallUnknown or CallNotDispatched.
	Outcome CallOutcome
	// Status is Telegram's HTTP status for CallAnswered, zero otherwise.
	Status int
	// Body is Telegram's answer for CallAnswered (at most
	// [MaxJournalBody]), or a short description of what happened
	// otherwise. The store copies it.
	Body []byte
}

// JournalEntry is one journaled call of an update.
type JournalEntry struct {
	UpdateID int64
	Call
	// Attempt and ClaimID are the identity that recorded the intent.
	Attempt int
	ClaimID string
	// Outcome is CallPending until an outcome was recorded.
	Outcome CallOutcome
	// Status and Body are the recorded [CallResult]'s.
	Status int
	Body   []byte
	// IntendedAt is the time of the intent; DecidedAt of the outcome, the
	// zero time while pending.
	IntendedAt time.Time
	DecidedAt  time.Time
}

// Intent is the answer of [JournalStore.RecordIntent].
type Intent int

const (
	// IntentStale means the identity may not make calls (it holds no live
	// lease and is not its update's tail; see [JournalStore]): nothing was
	// recorded and the call must not be sent.
	IntentStale Intent = iota
	// IntentRecorded means a new intent was recorded under the identity:
	// send the call, then record its outcome.
	IntentRecorded
	// IntentJournaled means the update already has this call in its journal
	// (pending, answered or unknown); the entry is returned and the call must
	// not be sent again.
	IntentJournaled
)

// String names the intent for messages.
func (i Intent) String() string {
	switch i {
	case IntentStale:
		return "stale"
	case IntentRecorded:
		return "recorded"
	case IntentJournaled:
		return "journaled"
	}
	return fmt.Sprintf("Intent(%d)", int(i))
}

// JournalStore is an optional capability: a journal of the Bot API calls
// made on behalf of each update, so that a later attempt of the same update
// does not send an identical call twice. Without it, the gateway still
// fences calls by the attempt's identity ([Store.Owns]) but cannot replay
// them: a later attempt's identical call is sent again.
//
// An entry is keyed by the update id and the [Call] (method, parameters hash,
// occurrence). It belongs to its update's row: when [Store.Prune] deletes
// the row, the row's entries are deleted in the same step, so an update id
// recorded again after pruning starts with an empty journal. [AdminStore]
// Requeue keeps the journal (a requeued update does not resend its calls).
//
// # Who may call
//
// An identity may make calls on behalf of its update (is admitted) at a
// time at while either
//
//   - it holds a live lease at at, as for [Store.Owns]; or
//   - it is the update's tail: the row is completed and its attempt and
//     claim id are the identity's, whatever the time. The attempt that
//     completed an update is not stale in the fencing sense: no other
//     attempt of it can run (a completed row is never claimed again, and
//     [AdminStore] Requeue takes only failed and abandoned rows). A
//     handler that answered its update early (a framework's webhook reply
//     ends the forward while the handler goes on) still makes its later
//     calls, and they are journaled like any other: an identical call is
//     found journaled rather than sent twice, and an intent without
//     outcome is never sent again.
//
// Nothing else is admitted: not an attempt that ended failed (its retry
// is due, or already running), abandoned or exhausted, not an identity
// whose row was since claimed again, requeued or pruned, and not a
// mismatched identity. The tail ends with its row: when the row is pruned
// or changes state (a completed row is never claimed again), the identity
// is refused. [Store.Owns] is unchanged by this and admits no tail:
// it remains the authority for an application's domain writes.
//
// Every method is safe for concurrent use, like the rest of the store, and
// its writes are as durable as the store's other writes when it returns.
type JournalStore interface {
	Store

	// Admits reports whether id may make calls at at (see "Who may call"):
	// it holds a live lease at at, or it is its update's tail. It records
	// nothing; the gateway checks the calls it does not journal (the
	// read-only get* methods) with it. Like Owns, its answer can be stale
	// as soon as it returns.
	Admits(ctx context.Context, id Identity, at time.Time) (bool, error)

	// RecordIntent records that id is about to send call, in one atomic step
	// that is fenced by id:
	//
	//   - id is not admitted at at (see "Who may call": it holds no live
	//     lease at at and is not its update's tail): IntentStale, nothing
	//     changes. The check and the write are one step: an identity
	//     refused a moment later (its row reclaimed, requeued or pruned)
	//     never records an intent after that.
	//   - the update's journal has an entry for call whose outcome is not
	//     CallNotDispatched: IntentJournaled and that entry, unchanged.
	//   - otherwise an entry is written (replacing a not-dispatched one):
	//     pending, with id's attempt and claim id and IntendedAt at;
	//     IntentRecorded and the new entry.
	//
	// An empty Method or ParamsHash or an Occurrence below 1 is an error.
	RecordIntent(ctx context.Context, id Identity, call Call, at time.Time) (JournalEntry, Intent, error)

	// RecordOutcome records the outcome of a pending entry that id
	// recorded: Outcome, Status and Body are set and DecidedAt becomes at.
	// It is not fenced by the lease (an answer that arrived after the lease
	// ended still happened), only by the entry: it applies only while the
	// entry is pending and carries id's attempt and claim id, and reports
	// whether it applied. An outcome other than CallAnswered, CallUnknown or
	// CallNotDispatched is an error.
	RecordOutcome(ctx context.Context, id Identity, call Call, res CallResult, at time.Time) (bool, error)

	// RecordOutcomeDeferred records an outcome exactly as RecordOutcome
	// does, with the same result and as durable when it returns, but a
	// store whose writes share durable commits may hold the write back for
	// a short bound it documents, to commit it together with its next write
	// (typically another call's intent) instead of costing a commit of its
	// own, which would delay the intents queued behind it. The gateway uses
	// it for the outcomes it records after answering the app. A store
	// without shared commits records at once, as RecordOutcome. It returns
	// ctx's error if ctx ends first; the outcome may then still be recorded.
	RecordOutcomeDeferred(ctx context.Context, id Identity, call Call, res CallResult, at time.Time) (bool, error)

	// Journal lists the entries of an update, ordered by intent time, then
	// method, hash and occurrence. An update without entries (or without a
	// row) lists none.
	Journal(ctx context.Context, updateID int64) ([]JournalEntry, error)
}

// ErrInvalidCall is wrapped by the error a [JournalStore] returns for a
// [Call] or [CallResult] outside the contract. It wraps
// [ErrInvalidArgument], the sentinel of every store argument refused.
var ErrInvalidCall = fmt.Errorf("%w: journal call", ErrInvalidArgument)

// CheckCall validates call for [JournalStore.RecordIntent]; stores call it.
// Its error wraps [ErrInvalidCall] and names the field.
func CheckCall(call Call) error {
	switch {
	case call.Method == "":
		return fmt.Errorf("%w: Method is empty", ErrInvalidCall)
	case call.ParamsHash == "":
		return fmt.Errorf("%w: ParamsHash is empty", ErrInvalidCall)
	case call.Occurrence < 1:
		return fmt.Errorf("%w: Occurrence %d is less than 1", ErrInvalidCall, call.Occurrence)
	}
	return nil
}

// CheckCallResult validates res for [JournalStore.RecordOutcome]; stores
// call it. Its error wraps [ErrInvalidCall] and names the field.
func CheckCallResult(call Call, res CallResult) error {
	if err := CheckCall(call); err != nil {
		return err
	}
	switch res.Outcome {
	case CallAnswered, CallUnknown, CallNotDispatched:
	default:
		return fmt.Errorf("%w: CallResult.Outcome %q is not answered, unknown or not_dispatched", ErrInvalidCall, res.Outcome)
	}
	if len(res.Body) > MaxJournalBody {
		return fmt.Errorf("%w: CallResult.Body of %d bytes exceeds %d", ErrInvalidCall, len(res.Body), MaxJournalBody)
	}
	return nil
}
