package intake

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// State is the lifecycle state of a stored update row.
//
// A row moves pending → processing → completed | failed | abandoned. A failed
// row becomes processing again when its retry is due. An abandoned row whose
// settlement time is unset is an unacknowledged exhaustion (see
// [Store.Exhaust]).
type State string

// The five row states. Stores persist these exact strings.
const (
	StatePending    State = "pending"
	StateProcessing State = "processing"
	StateFailed     State = "failed"
	StateCompleted  State = "completed"
	StateAbandoned  State = "abandoned"
)

// AttemptsSpentText is the error text a store records in a row when a claim
// finds it claimable with its attempts already spent and abandons it
// instead.
const AttemptsSpentText = "attempts spent"

// CrashesSpentText is the error text a [ProcessStore] records in a row when
// a claim takes it over from a process whose heartbeat lapsed and finds its
// crash budget ([ProcessClaim.MaxCrashes]) spent: the update was in flight
// each time its process ended, so it is most likely what ends them.
const CrashesSpentText = "crashes spent: its process ended while handling it too often"

// ErrInvalidArgument is wrapped by the error a store method returns for an
// argument outside the contract: a [ClaimOpts], [ProcessClaim],
// [Settlement], [DueQuery], [ExhaustionQuery], [ListQuery], [SearchQuery],
// [ReplyQuery] or [AttemptRecord] whose Validate fails, an [AddRequest]
// whose Claim does, a [Call] or [CallResult] that [CheckCall] or
// [CheckCallResult] refuses, and a limit below 1 for
// [AdminStore.Processes]. Such a call changes nothing. Stores call Validate
// rather than repeat its checks. A refusal decided by a row's state is
// never an error.
var ErrInvalidArgument = errors.New("intake: invalid store argument")

// invalid returns an error wrapping [ErrInvalidArgument] with the field and
// what is wrong with it.
func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// CheckProcessesLimit validates the limit of [AdminStore.Processes];
// stores call it. Its error wraps [ErrInvalidArgument].
func CheckProcessesLimit(limit int) error {
	if limit < 1 {
		return invalid("limit %d: want at least 1", limit)
	}
	return nil
}

// known reports whether st is one of the five row states.
func (st State) known() bool {
	switch st {
	case StatePending, StateProcessing, StateFailed, StateCompleted, StateAbandoned:
		return true
	}
	return false
}

// Incoming is one update to record, as handed to [Store.Add].
type Incoming struct {
	// UpdateID is Telegram's update_id, a non-negative integer.
	UpdateID int64
	// Body is the raw webhook body, stored byte for byte. The store must not
	// retain the slice after Add returns; it copies what it keeps.
	Body []byte
	// ReceivedAt is the intake clock's time of arrival. It drives the pending
	// grace of [DueQuery.PendingBefore].
	ReceivedAt time.Time
	// Chat is the key of the chat the update belongs to: the key the runner
	// keeps a chat's updates in order by, which is the id, as JSON text
	// without quotes, of the first chat, message.chat, from, user or
	// voter_chat object of the update's payload (a private chat and its user
	// share one key). It is empty when the update has none, or when the key
	// would be longer than [MaxChatKey] bytes or hold a NUL byte (which a
	// PostgreSQL text cannot). A [ChatOrderStore] keeps it
	// for its strict claims; other stores may ignore it. A row with an
	// empty Chat is never held back by strict order, nor holds others.
	Chat string
}

// MaxChatKey is the longest [Incoming.Chat] a [ChatOrderStore] must keep.
// Telegram's ids are 64-bit integers and channel usernames at most 32
// bytes, so a real update's key is far shorter.
const MaxChatKey = 64

// StoredUpdate is an update row listed by [Store.Due].
type StoredUpdate struct {
	UpdateID int64
	Body     []byte
	// ReceivedAt is the row's [Incoming.ReceivedAt], whatever its state:
	// the runner counts an update's deadline ([Deadlines]) from it. Should
	// a store leave it zero, the runner counts the deadline of a swept
	// update from the sweep that found it.
	ReceivedAt time.Time
}

// ClaimOpts are the parameters of one claim, as [Store.Claim] takes them.
// The capabilities that change a claim take their own terms beside them
// ([ProcessClaim] for a [ProcessStore]; a [ChatOrderStore]'s claim is strict
// by its method).
type ClaimOpts struct {
	// Now is the intake clock's time of the claim. It decides whether a row is
	// claimable: a pending row always is; a failed row when its retry time is
	// at or before Now; a processing row only when its lease ended strictly
	// before Now, or, in a [ProcessStore], when its owner is not live at Now.
	Now time.Time
	// LeaseUntil is the end of the lease the claim takes. The lease is live
	// through LeaseUntil inclusive.
	LeaseUntil time.Time
	// MaxAttempts is the attempt ceiling, at least 1. A claimable row whose
	// attempts already reached it is exhausted with [AttemptsSpentText]
	// instead of being taken: it becomes an unacknowledged exhaustion
	// ([Store.DueExhaustions]), so that a process that crashed on its last
	// attempt still leaves a durable record.
	MaxAttempts int
}

// Validate reports an error wrapping [ErrInvalidArgument] when MaxAttempts
// is below 1.
func (o ClaimOpts) Validate() error {
	if o.MaxAttempts < 1 {
		return invalid("ClaimOpts.MaxAttempts %d: want at least 1", o.MaxAttempts)
	}
	return nil
}

// Settlement is the end of one attempt, passed to [Store.Settle].
type Settlement struct {
	// State is StateCompleted, StateFailed or StateAbandoned. Any other state
	// is refused by the store with an error.
	State State
	// At is the settlement time. The settlement applies only if the lease was
	// still live at At (lease end >= At).
	At time.Time
	// RetryAt is when a failed row becomes due again. Used only with
	// StateFailed.
	RetryAt time.Time
	// Error is the failure text for StateFailed and StateAbandoned. Completed
	// rows clear it.
	Error string
	// Attempt, when set, is the attempt's record for its update's history
	// ([AdminStore.RecordAttempt]). A store with that history appends it in
	// the same step as the settlement, and only when the settlement
	// applies, so the runner writes once per attempt instead of twice. A
	// store without the history ignores it. The record is of the attempt
	// the identity names: its UpdateID, Attempt and ClaimID are taken from
	// the identity, whatever they hold.
	Attempt *AttemptRecord
}

// Validate reports an error wrapping [ErrInvalidArgument] when State is not
// completed, failed or abandoned, or Attempt is set and outside
// [AttemptRecord.Validate].
func (s Settlement) Validate() error {
	switch s.State {
	case StateCompleted, StateFailed, StateAbandoned:
	default:
		return invalid("Settlement.State %q: want completed, failed or abandoned", s.State)
	}
	if s.Attempt != nil {
		if err := s.Attempt.Validate(); err != nil {
			return fmt.Errorf("Settlement.Attempt: %w", err)
		}
	}
	return nil
}

// DueQuery selects the rows a sweep should schedule.
type DueQuery struct {
	// Now decides which non-pending rows are claimable (see [ClaimOpts.Now]).
	Now time.Time
	// PendingBefore lists pending rows received at or before it. A sweep sets
	// it to Now minus the pending grace, so the process that recorded a row
	// gets the first chance to handle it.
	PendingBefore time.Time
	// Limit is the page size, at least 1.
	Limit int
}

// Validate reports an error wrapping [ErrInvalidArgument] when Limit is
// below 1.
func (q DueQuery) Validate() error {
	if q.Limit < 1 {
		return invalid("DueQuery.Limit %d: want at least 1", q.Limit)
	}
	return nil
}

// Identity names one attempt on one update. ClaimID is opaque, globally
// unique and never repeats, not even after the row was pruned and the same
// UpdateID recorded again (when Attempt numbers do repeat). Persist all three
// fields together and compare them together.
type Identity struct {
	UpdateID int64
	Attempt  int
	ClaimID  string
}

// Exhaustion is an update whose handling ended for good — a dead letter —
// while the store keeps it until the exact identity acknowledges it.
type Exhaustion struct {
	Identity
	// Body is the raw stored body.
	Body []byte
	// ExhaustedAt is when the attempt was exhausted or the row spent.
	ExhaustedAt time.Time
	// Error is the final failure text.
	Error string
}

// ExhaustionQuery is one page of [Store.DueExhaustions].
type ExhaustionQuery struct {
	// Limit is the page size, at least 1.
	Limit int
	// After, when non-nil, continues the listing strictly after this update
	// id. Nil lists from the lowest update id.
	After *int64
}

// Validate reports an error wrapping [ErrInvalidArgument] when Limit is
// below 1.
func (q ExhaustionQuery) Validate() error {
	if q.Limit < 1 {
		return invalid("ExhaustionQuery.Limit %d: want at least 1", q.Limit)
	}
	return nil
}

// Store is the store contract's core: what every store does, and all the
// intake needs. Every method must be safe for concurrent use by many
// goroutines and, for a shared database, by many processes.
//
// Each state change must be a single atomic step (one conditional statement
// or one transaction), never a read followed by a separate write: the most
// common store bug is a claim that reads, then writes, and so lets two
// workers take the same row. Run [github.com/tgrelay/tgrelay/intake/storetest.Run]
// against an implementation.
//
// Every claim is fenced: it persists an [Identity] with a fresh claim id,
// and Renew, Settle, Owns and Exhaust compare all three of its fields, so a
// stale identity (an earlier attempt, another claim id, or a claim of a row
// that was since pruned and recorded again) never renews, settles, owns or
// exhausts. A terminal failure is durable: it stays in the update's own row
// as an unacknowledged exhaustion until its exact identity acknowledges it.
//
// Times are the intake's clock, never the database's. Stores keep them with
// at least millisecond precision; the intake only ever compares times it
// passed in itself. Where processes on several hosts share a store, their
// clocks must agree for leases and heartbeats to mean the same to all of
// them; a store for many hosts makes sure they do (pgstore refuses claims
// and heartbeats from a host whose clock is off by more than a bound)
// rather than reading its own clock.
//
// Methods return an error only when the store could not answer (I/O, a
// closed database, a cancelled ctx) or an argument is outside the contract
// ([ErrInvalidArgument]). A refusal decided by the row's state is a false
// result, never an error.
//
// Beside the core, a store may implement up to five optional capabilities,
// each an interface whose doc says what happens without it:
//
//   - [ProcessStore]: heartbeats, so a dead process's updates are taken over
//     in seconds. Without it they wait out their leases.
//   - [ChatOrderStore]: strict per-chat order across processes. Without it
//     [New] refuses [ChatOrderStrict].
//   - [JournalStore]: the gateway's journal of outgoing calls. Without it
//     the gateway fences calls but cannot replay them.
//   - [AdminStore]: listing, requeue and stats for operator tooling.
//     Without it that tooling cannot use the store.
//   - [HealthChecker]: a readiness check. Without it readiness trusts the
//     store.
//
// They are detected once, where the store is handed over ([New], the
// relay), so hand over the store itself: a wrapper hides them.
type Store interface {
	// Add records a new pending row with zero attempts and reports true.
	// It reports false, changing nothing, when a row with this UpdateID
	// exists in any state; bodies are not compared. Add is durable when it
	// returns: the intake answers Telegram only afterwards.
	Add(ctx context.Context, u Incoming) (bool, error)

	// AddBatch records each request as Add would, atomically and durably
	// (one transaction, one commit), and reports for each input, in order,
	// whether it was newly recorded and, for one recorded claimed (its
	// [AddRequest.Claim] set), the identity of that claim. A duplicate (a
	// stored update id, or an earlier request of the batch with the same
	// id) is neither recorded nor claimed. An invalid Claim is an error
	// wrapping [ErrInvalidArgument] and records nothing; on any error
	// nothing is recorded. The intake groups concurrent [Runner.Accept]
	// calls into one AddBatch (group commit).
	AddBatch(ctx context.Context, reqs []AddRequest) ([]AddResult, error)

	// Claim takes a claimable row: it becomes processing with attempts+1,
	// lease end opts.LeaseUntil and a fresh random claim id, and the
	// identity as persisted is returned with true. A missing or unclaimable
	// row reports false and changes nothing. A claimable row whose attempts
	// reached opts.MaxAttempts is exhausted instead with
	// [AttemptsSpentText] (abandoned at opts.Now, no settlement time: an
	// unacknowledged exhaustion), and false is reported. A row under a live
	// lease is not claimable, so a claim leaves it untouched even when it
	// is on its last attempt.
	Claim(ctx context.Context, updateID int64, opts ClaimOpts) (Identity, bool, error)

	// Renew extends the lease of the processing row id holds, only while
	// its lease is live at now (lease end >= now). The lease end becomes
	// the later of the current end and leaseUntil: renewal never shortens a
	// lease and never revives an expired one. It reports whether a row
	// changed.
	Renew(ctx context.Context, id Identity, leaseUntil, now time.Time) (bool, error)

	// Settle ends the attempt id holds, only while its lease is live at
	// s.At. Completed and abandoned rows get their settlement time set
	// (and become prunable); a failed row becomes due at s.RetryAt. It
	// reports whether a row changed; a stale identity, a lapsed lease or an
	// attempt already settled (a failed one included, its retry not yet
	// claimed) reports false. A store that keeps the attempt history
	// ([AdminStore]) appends s.Attempt, when set, in the same step.
	Settle(ctx context.Context, id Identity, s Settlement) (bool, error)

	// Owns reports whether id still holds a live lease at at: the row is
	// processing, all three identity fields match, and the lease end is at
	// or after at. It is the authority for a domain write only when it
	// runs inside that write's transaction; stores offer a
	// transaction-scoped variant (OwnsTx) for that.
	Owns(ctx context.Context, id Identity, at time.Time) (bool, error)

	// Exhaust turns the live claim id into an unacknowledged exhaustion in
	// one atomic step: the row becomes abandoned with its exhaustion time
	// at at, its error errText and no settlement time. It applies only
	// while the row is processing, id matches, and the lease is live at at.
	Exhaust(ctx context.Context, id Identity, at time.Time, errText string) (bool, error)

	// DueExhaustions lists unacknowledged exhaustions (abandoned, no
	// settlement time) in ascending update id order, at most q.Limit,
	// strictly after q.After when it is set.
	DueExhaustions(ctx context.Context, q ExhaustionQuery) ([]Exhaustion, error)

	// AcknowledgeExhaustion settles an unacknowledged exhaustion at at,
	// which makes it prunable. It applies only to an unacknowledged
	// exhaustion, only for its exact identity and only once: a row in any
	// other state (pending, processing, failed, settled), a wrong attempt,
	// a wrong claim id or a second acknowledgement reports false.
	AcknowledgeExhaustion(ctx context.Context, id Identity, at time.Time) (bool, error)

	// Due lists, in ascending update id order and at most q.Limit, the
	// pending rows received at or before q.PendingBefore and the non-pending
	// rows claimable at q.Now.
	Due(ctx context.Context, q DueQuery) ([]StoredUpdate, error)

	// Prune deletes completed and abandoned rows whose settlement time is
	// strictly before before, and reports how many it deleted. Rows without a
	// settlement time (pending, processing, failed, unacknowledged
	// exhaustions) are never pruned. After pruning, the same update id can be
	// added again.
	Prune(ctx context.Context, before time.Time) (int, error)
}

// AddRequest is one input of [Store.AddBatch]: an update to record and,
// when Claim is set, the claim to record it under.
type AddRequest struct {
	Incoming
	// Claim, when non-nil, asks that a newly recorded row be recorded
	// already claimed: exactly the state a [Store.Claim] of a fresh pending
	// row with these options leaves (processing, attempts 1, lease end
	// Claim.LeaseUntil, a fresh random claim id, no error, no settlement
	// time). Claim.MaxAttempts must be at least 1 (see [ClaimOpts.Validate]).
	// Nil records a pending row, as [Store.Add].
	Claim *ClaimOpts
}

// AddResult is the answer for one [AddRequest].
type AddResult struct {
	// Added reports that the row was newly recorded; false for an update id
	// already stored, or an earlier duplicate in the same batch.
	Added bool
	// Identity is the persisted identity of the claim the row was recorded
	// under: set only when Added is true and the request asked for a claim
	// (zero otherwise).
	Identity Identity
}

// Claimed reports whether the row was recorded claimed.
func (r AddResult) Claimed() bool { return r.Identity.ClaimID != "" }

// ProcessClaim is what a [ProcessStore] adds to a claim: the process that
// takes it and the crash budget a takeover counts against. Its zero value
// is a claim by no process, which a store takes exactly as [Store.Claim].
type ProcessClaim struct {
	// Process is the process id ([ProcessStore.Register]) of the runner
	// taking the claim, or empty for none. The store records it with the
	// claim, and the row becomes claimable again as soon as that process's
	// heartbeat lapses, even while its lease lasts. A claim with no process
	// is reclaimed only when its lease ends.
	Process string
	// MaxCrashes is the crash budget, 0 or more. A claim that takes over a
	// processing row whose owner was not live at Now counts a crash: the
	// previous attempt ended with its process. With MaxCrashes above zero,
	// crashed attempts count against MaxCrashes instead of
	// [ClaimOpts.MaxAttempts]: the row is spent when its attempts that did
	// not end in a crash reach MaxAttempts (exhausted with
	// [AttemptsSpentText]) or its crashes reach MaxCrashes (exhausted with
	// [CrashesSpentText]). Zero counts every attempt against MaxAttempts,
	// crashed or not, as a store without heartbeats does.
	MaxCrashes int
}

// Validate reports an error wrapping [ErrInvalidArgument] when MaxCrashes
// is negative.
func (p ProcessClaim) Validate() error {
	if p.MaxCrashes < 0 {
		return invalid("ProcessClaim.MaxCrashes %d: want 0 or more", p.MaxCrashes)
	}
	return nil
}

// ProcessStore is an optional capability: heartbeats of live processes, so
// that the rows a dead process held are taken over within a heartbeat
// timeout instead of a whole lease. Without it, the runner keeps no
// heartbeat and a dead process's rows are reclaimed when their leases end;
// every attempt counts against [Config.MaxAttempts], and MaxCrashes is not
// used.
//
// A runner registers a fresh process id when it starts, renews its
// heartbeat every few seconds and claims with ClaimAs (and records claimed
// adds with AddBatchAs) naming that id. A processing row whose owner is not
// live at a claim's Now (its heartbeat lapsed, it left, or it was never
// registered) is claimable as if its lease had ended, and [Store.Due] lists
// it; the claim counts a crash (see [ProcessClaim.MaxCrashes]).
//
// The takeover is fenced like any reclaim: it generates a new claim id, so
// the old identity can no longer renew, settle, exhaust or own the row,
// whether its process died or was only paused. A heartbeat is live through
// its end inclusive, like a lease, and, like a lease, a renewal never
// revives a lapsed one: a process that finds its heartbeat lapsed must
// treat every claim it holds as lost and register a new id.
//
// Times are the intake's clock, as everywhere in the contract. The intake
// uses this capability when the store has it, unless [Config.NoHeartbeat].
type ProcessStore interface {
	Store

	// ClaimAs is [Store.Claim] taken by process p.Process under the crash
	// budget p.MaxCrashes (see [ProcessClaim]). An invalid p is an error
	// wrapping [ErrInvalidArgument] and changes nothing.
	ClaimAs(ctx context.Context, updateID int64, opts ClaimOpts, p ProcessClaim) (Identity, bool, error)

	// AddBatchAs is [Store.AddBatch] whose claimed rows are recorded as
	// taken by process p.Process, so that they are taken over as soon as
	// its heartbeat lapses.
	AddBatchAs(ctx context.Context, reqs []AddRequest, p ProcessClaim) ([]AddResult, error)

	// Register records a new process id whose heartbeat is live through
	// until and reports true. It reports false, changing nothing, when the
	// id is recorded already, live or lapsed. Once reaped or left an id is
	// forgotten, so callers never reuse one: the intake generates a fresh
	// random id for every lifecycle.
	Register(ctx context.Context, process string, until time.Time) (bool, error)

	// Beat renews the heartbeat of process, only while it is live at now
	// (its end >= now). The end becomes the later of the current end and
	// until: a renewal never shortens a heartbeat and never revives a lapsed
	// one. It reports whether the heartbeat changed; false means the
	// process is not live (lapsed, left, reaped or never registered).
	Beat(ctx context.Context, process string, until, now time.Time) (bool, error)

	// Leave removes the heartbeat of process (a clean shutdown): the rows
	// it still holds are claimable at once. It reports whether a heartbeat
	// was removed.
	Leave(ctx context.Context, process string) (bool, error)

	// Reap removes the heartbeats that lapsed strictly before now and
	// reports how many it removed. Their rows were claimable already; a
	// runner that reaped some sweeps at once to take them over. A store
	// that can prove a registered process dead (sqlitestore: its process
	// lock is free) may remove it too, however live its heartbeat looks;
	// never one that may still run.
	Reap(ctx context.Context, now time.Time) (int, error)
}

// ChatOrderStore is an optional capability: strict per-chat order, kept by
// the store, so that updates of one chat are handled one at a time, in
// update id order, by any number of processes sharing the store. Without
// it, a runner keeps each chat's order within its own process only
// ([ChatOrderProcess]); [New] refuses [ChatOrderStrict].
//
// The store keeps each row's [Incoming.Chat]. A strict claim adds one
// condition to claimability, checked in the same atomic step as the claim:
// a row whose stored chat is not empty is claimable only when no other row
// of its chat is unsettled with a lower update id (pending, processing or
// failed; a completed or abandoned row, an unacknowledged exhaustion
// included, releases its chat) and no other row of its chat is processing
// under a lease live at Now (an update recorded after a later one of its
// chat was claimed waits for that one). So, of one chat, only the lowest
// unsettled row is ever claimable, and two strict claims of one chat can
// never both hold live leases, however many processes claim. A refusal for
// order is a false result, like any other, and changes nothing, even for a
// row on its last attempt. A row with an empty chat is never held back,
// nor holds others. Rows recorded before the store kept chats (an older
// schema) have an empty chat and are not ordered. An operator's
// [AdminStore] Requeue of an earlier update does not stop a later one
// already claimed; the requeued one then waits for it.
//
// [Store.Claim] and [Store.Due] of a ChatOrderStore ignore chat order, as
// in any store.
type ChatOrderStore interface {
	Store

	// ClaimInOrder is [Store.Claim] under strict chat order. p is the
	// [ProcessStore] terms of the claim, as for ClaimAs; a store that is
	// not a ProcessStore is only ever passed the zero ProcessClaim.
	ClaimInOrder(ctx context.Context, updateID int64, opts ClaimOpts, p ProcessClaim) (Identity, bool, error)

	// DueInOrder is [Store.Due] listing only rows a ClaimInOrder at q.Now
	// could take, so that rows held back by an earlier update of their chat
	// never fill a page. A chat that is not empty lists only rows whose
	// stored chat is chat: the intake asks for the next update of a chat
	// whose update it just settled.
	DueInOrder(ctx context.Context, q DueQuery, chat string) ([]StoredUpdate, error)
}

// HealthChecker is an optional capability: it reports whether the store
// can record updates durably right now. Without it, the relay's readiness
// asks the [AdminStore] stats, when the store has them, and otherwise
// trusts the store; the webhook answers 503 anyway when writes fail.
// sqlitestore reports a database file that vanished from its path; pgstore
// an unreachable or read-only server.
type HealthChecker interface {
	// Health returns nil while the store can serve, or an error saying why
	// not.
	Health(ctx context.Context) error
}

// Row is the full state of one stored update, as operator tooling sees it.
type Row struct {
	UpdateID int64
	State    State
	Attempts int
	// Crashes counts the attempts that ended with their process: claims
	// of a [ProcessStore] that took the row over from a process whose
	// heartbeat lapsed (see [ProcessClaim.MaxCrashes]). Always 0 in stores
	// without heartbeats.
	Crashes    int
	ClaimID    string // empty when the row was never claimed
	ReceivedAt time.Time
	// DueAt is overloaded by state: the receipt time while pending, the lease
	// end while processing, the retry time while failed, the exhaustion time
	// of an unacknowledged exhaustion.
	DueAt time.Time
	// SettledAt is the zero time while the row is live or an unacknowledged
	// exhaustion.
	SettledAt time.Time
	// Error is the failure text of a failed or abandoned row (an
	// exhaustion's included), and empty otherwise: a claim clears it, as
	// does a completion. Earlier attempts' texts are in the history
	// ([AdminStore.Attempts]).
	Error string
	Body  []byte
}

// Unacknowledged reports whether the row is an exhaustion still waiting for
// its acknowledgement.
func (r Row) Unacknowledged() bool {
	return r.State == StateAbandoned && r.SettledAt.IsZero()
}

// ListQuery selects rows for [AdminStore.List].
type ListQuery struct {
	// State, when set, lists only rows in that state.
	State State
	// Unacknowledged, when set, lists only unacknowledged exhaustions.
	Unacknowledged bool
	// After, when non-nil, continues strictly after this update id.
	After *int64
	// Limit is the page size, at least 1.
	Limit int
}

// Validate reports an error wrapping [ErrInvalidArgument] when Limit is
// below 1, State is set but not one of the five states, or Unacknowledged
// is combined with a State other than abandoned.
func (q ListQuery) Validate() error {
	switch {
	case q.Limit < 1:
		return invalid("ListQuery.Limit %d: want at least 1", q.Limit)
	case q.State != "" && !q.State.known():
		return invalid("ListQuery.State %q: not a row state", q.State)
	case q.Unacknowledged && q.State != "" && q.State != StateAbandoned:
		return invalid("ListQuery.Unacknowledged with State %q: unacknowledged exhaustions are abandoned", q.State)
	}
	return nil
}

// Stats summarises a store for metrics and health checks.
type Stats struct {
	// Count is the number of rows per state.
	Count map[State]int
	// Unacknowledged is the number of unacknowledged exhaustions.
	Unacknowledged int
	// OldestPending is when the longest-waiting pending row became pending
	// (its receipt, or its requeue by [AdminStore.Requeue]), or the zero
	// time when none is pending.
	OldestPending time.Time
}

// AdminStore is an optional capability for operator tooling: listing,
// search, requeue, stats and the attempt history (the tgrelay updates
// command, the dashboard, metrics). Without it, that tooling refuses the
// store (the updates command and the dashboard say the store has no admin
// view), the store's row gauges are not reported, and the runner keeps no
// attempt history ([AdminStore.RecordAttempt]); the runner needs it for
// nothing else.
type AdminStore interface {
	// Search lists the rows q selects in descending update id order (newest
	// first), at most q.Limit, strictly before q.Before when it is set.
	Search(ctx context.Context, q SearchQuery) ([]Row, error)
	// Replies lists the journaled calls ([JournalStore]) q selects across
	// updates, newest intent first (descending [ReplyKey]), at most
	// q.Limit, each with its update's row (without its body).
	Replies(ctx context.Context, q ReplyQuery) ([]Reply, error)
	// Processes lists the registered processes ([ProcessStore]) by id and
	// the processing rows with the process that holds each, newest update
	// first, at most limit of each. A limit below 1 is refused with an
	// error wrapping [ErrInvalidArgument] ([CheckProcessesLimit]).
	Processes(ctx context.Context, limit int) (ProcessList, error)
	// HeldBehind reports the lowest update id below updateID whose row has
	// the same non-empty stored chat ([Incoming.Chat]) and is pending,
	// processing or failed: the update that updateID waits for in its
	// chat's order. It reports false when there is none, or when updateID
	// is missing or has no chat.
	HeldBehind(ctx context.Context, updateID int64) (int64, bool, error)
	// List returns rows in ascending update id order.
	List(ctx context.Context, q ListQuery) ([]Row, error)
	// Get returns one row; ok is false when it does not exist.
	Get(ctx context.Context, updateID int64) (row Row, ok bool, err error)
	// Requeue puts a failed or abandoned row (an unacknowledged exhaustion
	// included) back to pending with zero attempts, due at now, its error
	// and settlement time cleared, so it is handled again from the start.
	// It reports false, changing nothing, for a row in any other state or a
	// missing row. The next claim generates a new claim id as always, so no
	// earlier identity can adopt the requeued row.
	Requeue(ctx context.Context, updateID int64, now time.Time) (bool, error)
	// Stats counts rows by state.
	Stats(ctx context.Context) (Stats, error)

	// RecordAttempt appends rec (see [AttemptRecord]) to the history of its
	// update and reports true, or reports false, recording nothing, when
	// the update has no row. A record outside [AttemptRecord.Validate] is
	// an error wrapping [ErrInvalidArgument]. Records are kept byte for
	// byte until the update's row is pruned: [Store.Prune] deletes them in
	// the same step, and neither a later attempt nor Requeue changes them.
	// Requeue appends, in the same step as the requeue, a record with
	// Outcome [AttemptRequeued], Attempt 0, the row's last claim id and
	// StartedAt and EndedAt at its now.
	RecordAttempt(ctx context.Context, rec AttemptRecord) (bool, error)
	// Attempts lists the history of an update in the order recorded; none
	// when it has no row. [History] adds what the history cannot hold.
	Attempts(ctx context.Context, updateID int64) ([]AttemptRecord, error)
}
