package intake

import (
	"context"
	"log/slog"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/configerr"
)

// Defaults of [Config], used when a field is left at its zero value.
const (
	// DefaultMaxAttempts is the attempt ceiling of one update.
	DefaultMaxAttempts = 5
	// DefaultLeaseDuration is the lease one attempt takes and renews every
	// quarter of it.
	DefaultLeaseDuration = 120 * time.Second
	// DefaultPendingGrace is how long a pending row waits for the process
	// that recorded it before a periodic sweep lists it.
	DefaultPendingGrace = 60 * time.Second
	// DefaultSweepInterval is the period of the background sweep.
	DefaultSweepInterval = 30 * time.Second
	// DefaultRetention is how long settled rows are kept so that Telegram's
	// re-deliveries are refused as duplicates.
	DefaultRetention = 24 * time.Hour
	// DefaultMaxConcurrent is the global bound on handlers running at once,
	// attempts and exhaustion deliveries together.
	DefaultMaxConcurrent = 32
	// DefaultPageSize is how many due rows, and how many due exhaustions,
	// one sweep lists.
	DefaultPageSize = 100
	// DefaultMaxQueued is how many updates and exhaustions one runner keeps
	// scheduled (running or waiting on their chat line) at once.
	DefaultMaxQueued = 1024
	// DefaultAcceptTimeout bounds how long [Runner.Accept] waits for the
	// store to record an update. Telegram waits about 60 s for a webhook's
	// answer; a store that stops answering is reported (503) well before,
	// and the connection is freed for the re-delivery.
	DefaultAcceptTimeout = 10 * time.Second
	// DefaultMaxBatch is how many concurrent [Runner.Accept] calls one group
	// commit ([Store.AddBatch]) records at most.
	DefaultMaxBatch = 256
	// DefaultHeartbeatTimeout is how long a process's heartbeat lasts
	// without a renewal: a process dead this long loses its claims to the
	// others.
	DefaultHeartbeatTimeout = 10 * time.Second
	// DefaultHeartbeatInterval is the period of heartbeat renewals.
	DefaultHeartbeatInterval = 3 * time.Second
	// DefaultMaxCrashes is the crash budget of one update: how many times
	// its process may end while handling it before it is given up.
	DefaultMaxCrashes = 10
)

// Limits of [Config]: a value outside them is refused by [New].
const (
	MaxMaxAttempts    = 1000
	MinLeaseDuration  = 10 * time.Millisecond
	MaxLeaseDuration  = 24 * time.Hour
	MaxPendingGrace   = 24 * time.Hour
	MinSweepInterval  = time.Millisecond
	MaxSweepInterval  = 24 * time.Hour
	MaxRetention      = 365 * 24 * time.Hour
	MaxMaxConcurrent  = 10000
	MaxPageSize       = 10000
	MaxMaxQueued      = 1 << 20
	MaxMaxBatch       = 10000
	MinAcceptTimeout  = time.Millisecond
	MaxAcceptTimeout  = time.Hour
	MinHeartbeat      = time.Millisecond // the least HeartbeatInterval and HeartbeatTimeout
	MaxHeartbeat      = time.Hour        // the most HeartbeatInterval and HeartbeatTimeout
	MaxMaxCrashes     = 1000
	MaxRetryDelay     = 24 * time.Hour // a longer delay from any policy is cut to this
	defaultRetryBase  = 5 * time.Second
	defaultRetryLimit = 15 * time.Minute
)

// Step names the store step that failed, as reported to
// [Observer.StoreErrorFunc].
type Step string

// The store steps.
const (
	// StepClaim: a claim failed.
	StepClaim Step = "claim"
	// StepRenew: Renew failed.
	StepRenew Step = "renew"
	// StepSettle: Settle, Exhaust or AcknowledgeExhaustion
	// failed.
	StepSettle Step = "settle"
	// StepSweep: a background sweep failed (Due, DueExhaustions or Prune).
	// Errors of [Runner.Sweep] and [Runner.Start] are returned instead.
	StepSweep Step = "sweep"
	// StepHeartbeat: a heartbeat renewal, registration, reap or leave of a
	// [ProcessStore] failed. The registration of [Runner.Start] is returned
	// instead.
	StepHeartbeat Step = "heartbeat"
)

// Failure is one failed attempt, as reported to [Observer.FailureFunc].
type Failure struct {
	Identity
	// Err is the handler's error (a recovered panic becomes an error).
	Err error
	// Retrying reports that the update will run again: a retry was
	// scheduled, or the store refused the settlement so the row will be
	// reclaimed when its lease lapses. False when it was abandoned or
	// exhausted.
	Retrying bool
	// Expiring reports that the update was not retried because no retry
	// could be due before its deadline (see [Deadlines]): it ends expired,
	// reported to [Observer.ExpireFunc], not given up.
	Expiring bool
}

// Observer receives the runner's events, for logs and metrics: a struct of
// optional funcs, the shape of every tgrelay observer (see "Observers" in
// the package doc). The funcs are called synchronously from the runner's
// goroutines, concurrently, so they must be fast and safe for concurrent
// use; a panic in one is recovered and ignored (an observer cannot lose an
// update). The zero Observer observes nothing.
type Observer struct {
	// AcceptFunc sees the outcome of every [Runner.Accept] that parsed or
	// refused a body (updateID is -1 for Invalid). Store errors are not
	// reported here; Accept returns them.
	AcceptFunc func(updateID int64, a Acceptance)
	// ClaimFunc sees every attempt taken.
	ClaimFunc func(id Identity)
	// SettleFunc sees every settlement the store applied: completed, failed
	// (a retry is due) or abandoned; an update that ended expired is
	// reported to ExpireFunc instead.
	SettleFunc func(id Identity, s State)
	// FailureFunc sees every failed attempt.
	FailureFunc func(f Failure)
	// LeaseLostFunc sees every attempt that lost its ownership (renewal or
	// settlement refused, or the last proven lease ended).
	LeaseLostFunc func(id Identity)
	// ExhaustFunc sees every exhaustion the store recorded for an attempt of
	// this runner.
	ExhaustFunc func(e Exhaustion)
	// ExhaustionFailureFunc sees every [Config.ExhaustionHandler] call that
	// failed; the exhaustion stays due and is delivered again.
	ExhaustionFailureFunc func(e Exhaustion, err error)
	// AcknowledgeFunc sees every exhaustion acknowledged.
	AcknowledgeFunc func(id Identity)
	// StoreErrorFunc sees every store error the runner could not return to
	// a caller, with the step that failed. updateID is -1 for StepSweep.
	StoreErrorFunc func(step Step, updateID int64, err error)
	// ExpireFunc sees every update with a deadline that this runner ended
	// expired ([ExpiredText]): its deadline passed, or no retry could be
	// due before it. Such an update is no exhaustion: ExhaustFunc does not
	// see it.
	ExpireFunc func(e Expiry)
}

// ChatOrder is how far the runner keeps a chat's updates in order: one
// after the other, in the order of their update ids, never two at once.
type ChatOrder string

// The chat orders.
const (
	// ChatOrderProcess keeps order within one process: a chat's updates
	// that this process accepted or swept run one at a time, in order
	// (and a failed one holds the chat's later ones, unless
	// [Config.RetryOutOfOrder]). Updates of one chat that several
	// processes sharing a store took run in parallel and may overtake each
	// other; so may an update swept after a restart. Handling costs one
	// claim per update and no extra query. The zero value of ChatOrder
	// means ChatOrderProcess.
	ChatOrderProcess ChatOrder = "process"
	// ChatOrderStrict keeps order across every process sharing the store:
	// an update is claimed only when no earlier update of its chat
	// (a lower update id) is pending, processing or failed, and no other
	// update of its chat is being handled, checked by the store in the
	// claim itself ([ChatOrderStore.ClaimInOrder]). It requires a
	// [ChatOrderStore] and refuses [Config.RetryOutOfOrder].
	//
	// The cost: a chat's updates are handled one at a time across the whole
	// cluster, each claim checks the chat's earlier rows (an index lookup),
	// and every settlement that releases a chat lists its next update
	// (one more query) so that it runs at once whichever process recorded
	// it. A failed update holds its chat until it succeeds or is given up,
	// so a poisoned update holds its chat until it is exhausted (its
	// attempts spent, or an outcome that is not retried); an exhaustion,
	// acknowledged or not, releases the chat. A process that dies holding
	// an update holds its chat until that lease lapses and another process
	// reclaims it. An update found with its attempts already spent when
	// claimed (its processes died on every attempt) is exhausted by that
	// claim, and its chat's next update then waits for a sweep (at most
	// PendingGrace plus SweepInterval) rather than being handed on.
	// Updates without a chat ([Incoming.Chat] empty), and rows recorded
	// before the store kept chats, are not ordered.
	ChatOrderStrict ChatOrder = "strict"
)

// Config configures a [Runner]. [New] copies it, so later changes to the
// caller's value have no effect. Zero numeric fields take their DefaultX
// value; a negative or out-of-range value is an error.
type Config struct {
	// Store records and claims updates. Required. Its optional
	// capabilities ([ProcessStore], [ChatOrderStore]) are detected once,
	// by New; the runner uses no other. Pass the store itself, not a
	// wrapper: a wrapper hides them.
	Store Store

	// Handler handles one update. Exactly one of Handler and
	// AttemptHandler is required. A nil error completes the update; an
	// error fails the attempt (see RetryFunc, [Abandon], [RetryLater]); a
	// panic is recovered and fails it. A retry runs in this process at its
	// due time (see RetryOutOfOrder); the sweep is the safety net for
	// retries no process waits for. ctx is cancelled with an
	// [*OwnershipLostError] cause when the attempt loses its lease, and
	// when [Runner.Close] gives up waiting.
	Handler func(ctx context.Context, u Update) error

	// AttemptHandler is Handler with the attempt's fenced [Attempt]
	// identity, to guard domain writes with the store's Owns check in the
	// same transaction.
	AttemptHandler func(ctx context.Context, u Update, a Attempt) error

	// ExhaustionHandler receives every exhaustion — the intake's dead
	// letter: an update whose handling ended for good (attempts spent,
	// abandoned, an unknown outcome not repeated, or its stored body
	// unparsable),
	// at least once, until it returns nil, which acknowledges it. Without
	// it (and unless KeepExhaustions is set), an update this runner gives
	// up is settled as abandoned and only reported to
	// [Observer.FailureFunc]; one a claim finds with its attempts already
	// spent (its processes died on every attempt) stays an unacknowledged
	// exhaustion in the store, for operator tooling or another process's
	// handler.
	ExhaustionHandler func(ctx context.Context, e Exhaustion) error

	// KeepExhaustions, without an ExhaustionHandler, keeps every update
	// whose handling ended for good as an unacknowledged exhaustion record
	// in the store, exactly as with a handler, but delivers it to nobody:
	// it waits for operator tooling ([AdminStore], the tgrelay updates
	// command) or another process's ExhaustionHandler to acknowledge or
	// requeue it. With an ExhaustionHandler it changes nothing.
	KeepExhaustions bool

	// RetryFunc decides, after failed attempt number attempt (1-based, below
	// MaxAttempts), whether to retry and after how long. Nil means
	// [DefaultRetry]. It is not consulted when the error carries a
	// handler's own outcome ([Abandon], [RetryLater]) or when attempts are
	// spent. A panic, or a negative delay, falls back to [Backoff]; a
	// delay above [MaxRetryDelay] is cut to it. It may be called
	// concurrently.
	RetryFunc func(err error, attempt int) (delay time.Duration, retry bool)

	// RetryOutOfOrder lets a chat's later updates run while a failed update
	// of the chat waits for its retry. By default (false) a failed update
	// keeps its place: it waits, in this process, for its retry's due time
	// and runs again, and the chat's later updates wait behind it until it
	// succeeds or is given up, so a chat never sees "two" before "one". Set
	// it when a chat's updates are independent and one slow retry must not
	// delay the rest; the retry then runs at its due time after them. Either
	// way, with [ChatOrderProcess], order is kept within one process only:
	// after a restart, or on another process, a chat's later updates run
	// when found. [ChatOrderStrict] refuses it: there a failed update holds
	// its chat in the store, for every process.
	RetryOutOfOrder bool

	// ChatOrder says how far a chat's updates are kept in order; see
	// [ChatOrderProcess] (the default, also the zero value) and
	// [ChatOrderStrict].
	ChatOrder ChatOrder

	// MaxAttempts is the attempt ceiling of one update, 1 to
	// [MaxMaxAttempts]. Defaults to [DefaultMaxAttempts].
	MaxAttempts int
	// LeaseDuration is the lease one attempt takes; it is renewed every
	// quarter of it. It also bounds every store call the runner makes on
	// its own. [MinLeaseDuration] to [MaxLeaseDuration]; defaults to
	// [DefaultLeaseDuration].
	LeaseDuration time.Duration
	// PendingGrace is how long a pending row is left to the process that
	// recorded it before a periodic sweep lists it. Up to
	// [MaxPendingGrace]; defaults to [DefaultPendingGrace] (zero cannot be
	// expressed: use a nanosecond).
	PendingGrace time.Duration
	// SweepInterval is the period of the background sweep started by
	// [Runner.Start]. [MinSweepInterval] to [MaxSweepInterval]; defaults to
	// [DefaultSweepInterval].
	SweepInterval time.Duration
	// Retention is how long settled rows are kept before a sweep prunes
	// them. Up to [MaxRetention]; defaults to [DefaultRetention].
	Retention time.Duration
	// MaxConcurrent bounds the handlers running at once, attempts and
	// exhaustion deliveries together, 1 to [MaxMaxConcurrent]. Claims are
	// bounded separately, at four per slot: those being written and those
	// holding their (renewed) lease while they wait for a handler slot, so
	// that no slot idles while a claim or a claimed add commits. A handler's slot is freed when it
	// returns, before its settlement commits. Defaults to
	// [DefaultMaxConcurrent].
	MaxConcurrent int
	// PageSize is how many due rows, and how many due exhaustions, one
	// sweep takes over, 1 to [MaxPageSize]. A sweep lists PageSize rows
	// plus as many as are already scheduled in this process (those are
	// skipped), so rows scheduled here can never starve the rest; a listing
	// is therefore at most PageSize + MaxQueued rows. Defaults to
	// [DefaultPageSize].
	PageSize int
	// MaxQueued bounds the updates and exhaustions scheduled in this
	// process (running, or waiting on their chat line or for a slot), 1 to
	// [MaxMaxQueued]. An accepted update beyond it is recorded but left for
	// a sweep, which runs as soon as room frees; until that sweep has
	// scheduled it, its chat's later updates are left for the sweep too, so
	// the chat keeps its order. An update whose handler has returned and
	// whose completion is still committing holds no handler, line or body,
	// and counts apart, up to four times MaxQueued: a store slow to commit
	// completions for a moment does not send the updates accepted
	// meanwhile the sweep's way. Defaults to [DefaultMaxQueued].
	MaxQueued int
	// AcceptTimeout bounds how long [Runner.Accept] waits for the store to
	// record an update, and one group commit of adds (with LeaseDuration,
	// whichever is less): a store that stops answering without closing its
	// connections fails the accept (the webhook answers 503) instead of
	// holding the request for a lease. A call whose group commit began, or
	// that was made the leader of the next one, before its own wait ended
	// still waits for that commit, so an accept returns within twice
	// AcceptTimeout at worst.
	// [MinAcceptTimeout] to [MaxAcceptTimeout]; defaults to
	// [DefaultAcceptTimeout].
	AcceptTimeout time.Duration
	// MaxBatch bounds how many concurrent Accept calls share one
	// [Store.AddBatch], 1 to [MaxMaxBatch]. Defaults to
	// [DefaultMaxBatch].
	MaxBatch int

	// HeartbeatTimeout is how long this process's heartbeat lasts in a
	// [ProcessStore] without a renewal, [MinHeartbeat] to [MaxHeartbeat].
	// When the process dies, the updates it was handling are taken over
	// by other processes (or its successor) this long after its last
	// renewal, instead of when their leases end. When the process cannot
	// prove its heartbeat for this long (the store refused a renewal or
	// none got through), it stops the attempts it claimed under it, as if
	// their leases had ended, since others may take them over; it
	// registers anew as soon as the store answers. Defaults to
	// [DefaultHeartbeatTimeout].
	HeartbeatTimeout time.Duration
	// HeartbeatInterval is the period of heartbeat renewals, [MinHeartbeat]
	// up to below HeartbeatTimeout. Defaults to [DefaultHeartbeatInterval],
	// or a third of a shorter HeartbeatTimeout.
	HeartbeatInterval time.Duration
	// NoHeartbeat, with a [ProcessStore], runs without heartbeats: this
	// process's claims carry no owner and are taken over only when their
	// leases end, and a store outage shorter than a lease stops no
	// attempt. Without a ProcessStore there are no heartbeats anyway.
	NoHeartbeat bool
	// MaxCrashes is the crash budget of one update, 1 to [MaxMaxCrashes],
	// or -1 for none. An attempt whose process's heartbeat lapsed before
	// it ended (the process was killed, crashed, or paused past its
	// heartbeat) is a crash. Crashes count against MaxCrashes instead of
	// MaxAttempts, so processes killed for reasons of their own (a deploy,
	// an OOM kill of a neighbour) do not use up an update's attempts,
	// while an update that itself kills its process every time (a poison
	// update) is still given up after MaxCrashes crashes, with
	// [CrashesSpentText]. -1 counts crashes against MaxAttempts like any
	// attempt. Used only with a [ProcessStore] (see [ProcessClaim.MaxCrashes]).
	// Defaults to [DefaultMaxCrashes].
	MaxCrashes int

	// Deadlines are the answer deadlines of callback, inline, pre-checkout
	// and shipping queries, and the lane such updates run on; see
	// [Deadlines]. The zero value is Telegram's deadlines.
	Deadlines Deadlines

	// Observer receives events. The zero value observes nothing.
	Observer Observer
	// Logger receives store errors and failed attempts, never bodies. Nil
	// discards. Every line passes through Redactor first.
	Logger *slog.Logger
	// Redactor masks every text the runner stores or logs: a failed
	// attempt's error (the row's last error, an [Exhaustion]'s Error) and
	// every log line. A handler's error may quote a bot library's request
	// URL, and so the bot token: register the token (and any other secret
	// a handler's error could carry) with it. Nil masks only what is
	// shaped like a bot token ([botapi.Redact]).
	Redactor *botapi.Redactor
}

// ConfigError is an invalid [Config] field: Field names it ("MaxAttempts",
// "Deadlines.Margin") and Err says what is wrong. It is the one config
// error type of every tgrelay package (relay.ConfigError is the same
// type), so a caller branches with one errors.As.
type ConfigError = configerr.Error

// badField returns a *ConfigError of intake for field.
func badField(field, format string, args ...any) error {
	return configerr.New("intake", field, format, args...)
}

// Validate reports the first invalid field of c as a *[ConfigError], as
// [New] would, without building anything. It does no I/O.
func (c Config) Validate() error {
	_, err := c.fill()
	return err
}

// fill returns a copy of c with defaults filled in, or a *ConfigError
// naming the first invalid field. The bounds are checked before the store
// is required, so a caller that has not opened its store yet learns of
// every other invalid field first.
func (c Config) fill() (Config, error) {
	if c.ChatOrder == "" {
		c.ChatOrder = ChatOrderProcess
	}
	if c.ChatOrder != ChatOrderProcess && c.ChatOrder != ChatOrderStrict {
		return c, badField("ChatOrder", "is %q: want %q or %q (empty means %q)", c.ChatOrder, ChatOrderProcess, ChatOrderStrict, ChatOrderProcess)
	}
	if c.ChatOrder == ChatOrderStrict && c.RetryOutOfOrder {
		return c, badField("RetryOutOfOrder", "contradicts ChatOrder %q: a failed update holds its chat in the store", c.ChatOrder)
	}
	var err error
	fillInt := func(name string, v *int, def, lo, hi int) {
		if err != nil {
			return
		}
		if *v == 0 {
			*v = def
		}
		if *v < lo || *v > hi {
			err = badField(name, "is %d: want %d to %d", *v, lo, hi)
		}
	}
	fillDur := func(name string, v *time.Duration, def, lo, hi time.Duration) {
		if err != nil {
			return
		}
		if *v == 0 {
			*v = def
		}
		if *v < lo || *v > hi {
			err = badField(name, "is %v: want %v to %v", *v, lo, hi)
		}
	}
	fillInt("MaxAttempts", &c.MaxAttempts, DefaultMaxAttempts, 1, MaxMaxAttempts)
	fillDur("LeaseDuration", &c.LeaseDuration, DefaultLeaseDuration, MinLeaseDuration, MaxLeaseDuration)
	fillDur("PendingGrace", &c.PendingGrace, DefaultPendingGrace, time.Nanosecond, MaxPendingGrace)
	fillDur("SweepInterval", &c.SweepInterval, DefaultSweepInterval, MinSweepInterval, MaxSweepInterval)
	fillDur("Retention", &c.Retention, DefaultRetention, time.Nanosecond, MaxRetention)
	fillInt("MaxConcurrent", &c.MaxConcurrent, DefaultMaxConcurrent, 1, MaxMaxConcurrent)
	fillInt("PageSize", &c.PageSize, DefaultPageSize, 1, MaxPageSize)
	fillInt("MaxQueued", &c.MaxQueued, DefaultMaxQueued, 1, MaxMaxQueued)
	fillInt("MaxBatch", &c.MaxBatch, DefaultMaxBatch, 1, MaxMaxBatch)
	fillDur("AcceptTimeout", &c.AcceptTimeout, DefaultAcceptTimeout, MinAcceptTimeout, MaxAcceptTimeout)
	fillDur("HeartbeatTimeout", &c.HeartbeatTimeout, DefaultHeartbeatTimeout, MinHeartbeat, MaxHeartbeat)
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = min(DefaultHeartbeatInterval, max(c.HeartbeatTimeout/3, MinHeartbeat))
	}
	if err == nil && (c.HeartbeatInterval < MinHeartbeat || c.HeartbeatInterval >= c.HeartbeatTimeout) {
		err = badField("HeartbeatInterval", "is %v: want %v up to below the heartbeat timeout (%v)", c.HeartbeatInterval, MinHeartbeat, c.HeartbeatTimeout)
	}
	if err == nil && c.MaxCrashes != -1 {
		if c.MaxCrashes == 0 {
			c.MaxCrashes = DefaultMaxCrashes
		}
		if c.MaxCrashes < 1 || c.MaxCrashes > MaxMaxCrashes {
			err = badField("MaxCrashes", "is %d: want 1 to %d, or -1 for no crash budget", c.MaxCrashes, MaxMaxCrashes)
		}
	}
	if err != nil {
		return c, err
	}
	if c.Deadlines, err = c.Deadlines.fill(); err != nil {
		return c, configerr.Nest("intake", "Deadlines", err)
	}
	if c.Store == nil {
		return c, badField("Store", "is required")
	}
	if (c.Handler == nil) == (c.AttemptHandler == nil) {
		return c, badField("Handler", "is required, or AttemptHandler: exactly one of the two")
	}
	if c.ChatOrder == ChatOrderStrict {
		if _, ok := c.Store.(ChatOrderStore); !ok {
			return c, badField("ChatOrder", "is %q, which requires a ChatOrderStore, and %T is not one", c.ChatOrder, c.Store)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.Logger = slog.New(c.Redactor.Handler(c.Logger.Handler()))
	return c, nil
}
