package intake

import (
	"cmp"
	"time"
)

// SearchQuery selects rows for [AdminStore.Search]. Zero fields select
// everything.
type SearchQuery struct {
	// State, when set, selects rows in that state.
	State State
	// Unacknowledged, when set, selects unacknowledged exhaustions.
	Unacknowledged bool
	// Crashed, when set, selects rows with at least one crash
	// ([Row.Crashes]).
	Crashed bool
	// Chat, when set, selects rows whose stored chat ([Incoming.Chat]) is
	// exactly Chat.
	Chat string
	// Text, when set, selects rows whose body contains Text byte for byte.
	Text string
	// Before, when non-nil, continues strictly below this update id.
	Before *int64
	// Limit is the page size, at least 1.
	Limit int
}

// Validate reports an error wrapping [ErrInvalidArgument] when Limit is
// below 1 or State is set but not one of the five states.
func (q SearchQuery) Validate() error {
	return ListQuery{State: q.State, Unacknowledged: q.Unacknowledged, Limit: q.Limit}.Validate()
}

// ReplyKey orders journal entries for [AdminStore.Replies]: by intent
// time, then update id, method, parameters hash and occurrence.
type ReplyKey struct {
	IntendedAt time.Time
	UpdateID   int64
	Call
}

// Key returns the entry's [ReplyKey].
func (e JournalEntry) Key() ReplyKey {
	return ReplyKey{IntendedAt: e.IntendedAt, UpdateID: e.UpdateID, Call: e.Call}
}

// Compare returns -1, 0 or +1 as k sorts before, with or after o (intent
// times compared to the millisecond, as stores keep them).
func (k ReplyKey) Compare(o ReplyKey) int {
	return cmp.Or(
		cmp.Compare(k.IntendedAt.UnixMilli(), o.IntendedAt.UnixMilli()),
		cmp.Compare(k.UpdateID, o.UpdateID),
		cmp.Compare(k.Method, o.Method),
		cmp.Compare(k.ParamsHash, o.ParamsHash),
		cmp.Compare(k.Occurrence, o.Occurrence),
	)
}

// ReplyQuery selects journal entries for [AdminStore.Replies]. Zero
// fields select everything.
type ReplyQuery struct {
	// Outcomes, when not empty, selects entries with one of these outcomes.
	Outcomes []CallOutcome
	// Method, when set, selects entries of that Bot API method.
	Method string
	// Chat, when set, selects entries whose update's stored chat is Chat.
	Chat string
	// Since and Until, when not zero, select entries intended at or after
	// Since and strictly before Until.
	Since, Until time.Time
	// Before, when non-nil, continues strictly below this key.
	Before *ReplyKey
	// Limit is the page size, at least 1.
	Limit int
}

// Validate reports an error wrapping [ErrInvalidArgument] when Limit is
// below 1 or an outcome is not one of the four.
func (q ReplyQuery) Validate() error {
	if q.Limit < 1 {
		return invalid("ReplyQuery.Limit %d: want at least 1", q.Limit)
	}
	for _, o := range q.Outcomes {
		if !o.Valid() {
			return invalid("ReplyQuery.Outcomes: %q is not a call outcome", o)
		}
	}
	return nil
}

// Reply is one journaled call with its update's row as it is now (Body
// nil) and the row's stored chat.
type Reply struct {
	JournalEntry
	Row  Row
	Chat string
}

// Process is one registered process of a [ProcessStore].
type Process struct {
	// ID is the id the process registered.
	ID string
	// Until is the end of its heartbeat: live through Until inclusive.
	Until time.Time
}

// Holding is one processing row and the process that claimed it.
type Holding struct {
	// Row is the row, without its body. Row.DueAt is its lease end.
	Row Row
	// Owner is the id of the process that claimed it; empty for a claim
	// made without heartbeats.
	Owner string
}

// ProcessList is the answer of [AdminStore.Processes].
type ProcessList struct {
	Processes []Process
	Held      []Holding
}
