// Package intake receives Telegram updates durably and handles each one at
// least once.
//
// The wiring is a store, a runner, a webhook, then Start and Close:
//
//	store, err := sqlitestore.Open(ctx, "bot.db", sqlitestore.Config{})
//	r, err := intake.New(intake.Config{Store: store, Handler: handle})
//	hook, err := intake.NewWebhook(intake.WebhookConfig{Runner: r, Secret: secret})
//	http.Handle("/telegram", hook) // the URL you give setWebhook
//	err = r.Start(ctx)             // handle what is recorded and what arrives
//	defer r.Close(ctx)             // stop, and wait for the handlers in flight
//
// handle is func(ctx context.Context, u intake.Update) error: nil completes
// the update, an error retries it later (see [DefaultRetry]), and an update
// whose attempts are spent becomes an exhaustion, the intake's dead letter
// (see [Config.ExhaustionHandler]). Long polling calls [Runner.Accept]
// instead of a webhook. Handlers of libraries that pass only a context find
// their update and attempt with [UpdateFrom] and [AttemptFrom], and report
// an error with [ReportError].
//
// An update is written to a [Store] before Telegram is answered, then handled
// outside the request by a [Runner] under a renewable lease.
//
// # The store contract
//
// A store is one core interface and at most five optional capabilities, in
// the manner of database/sql/driver: the [Runner] (and the relay) detect the
// capabilities once, at construction, so pass the store itself, never a
// wrapper that would hide them. memstore, sqlitestore and pgstore implement
// the core and every capability;
// [github.com/tgrelay/tgrelay/intake/storetest] checks the core on every
// store and each capability where it is implemented.
//
//	Interface       What it adds                          Without it
//	Store (core)    add, batch add (optionally claimed),  —
//	                fenced claim/renew/settle/Owns by
//	                Identity, durable exhaustion, due
//	                lists, prune
//	ProcessStore    heartbeats; ClaimAs and AddBatchAs    a dead process's updates wait out
//	                record the claiming process; crash    their leases; every attempt counts
//	                budget                                against MaxAttempts
//	ChatOrderStore  strict per-chat order across          New refuses ChatOrderStrict; order
//	                processes (ClaimInOrder, DueInOrder)  is kept within each process only
//	JournalStore    the gateway's journal of outgoing     the gateway fences calls but
//	                calls and their (deferred) outcomes   cannot replay them
//	AdminStore      listing, search, requeue, stats,      no updates command, dashboard,
//	                attempt history                       row metrics or attempt history
//	HealthChecker   a readiness check                     readiness trusts the store
//
// # Receiving
//
// [Webhook] is the http.Handler for Telegram's webhook. It checks the
// secret header (in constant time, before reading the body), bounds the
// body, and calls [Runner.Accept], which records the raw body keyed by its
// update_id. Only then does Telegram get its 200; a store failure answers
// 503 so Telegram delivers the update again, and a repeat of a recorded
// update_id (within [Config.Retention]) is answered 200 and not recorded
// again. Long polling calls [Runner.Accept] the same way.
//
// Concurrent Accept calls share one [Store.AddBatch]: a call that
// finds no commit in progress commits at once, and callers that arrive
// meanwhile are committed together next (at most [Config.MaxBatch] per
// commit). There is no batching window, so an idle intake adds no latency.
//
// Claim on add: unless chat order is strict, an update that a started
// runner can take at once — nothing of its chat is scheduled or being
// accepted in this process, and a claim token is free (four per handler
// slot) — is recorded already claimed by this runner in the add's own
// transaction (attempt 1, a fresh claim id, the lease). Its handler starts
// right after that commit, before Accept returns, or, with every slot
// busy, as soon as one frees, its lease renewed meanwhile; either way with
// no claim write in between: one durable commit between Telegram and the
// handler. Other updates are recorded pending and claimed when their turn
// comes, as always. A row recorded claimed is an ordinary claimed row: if
// its process dies, it is reclaimed when its lease lapses.
//
// # Handling
//
// Each update runs on the line of its chat (taken from the first payload's
// chat, message.chat, from, user or voter_chat id; an update with none runs
// alone), so updates of one chat run in order within a process, and
// different chats run in parallel, at most [Config.MaxConcurrent] handlers
// at a time. With [ChatOrderStrict] the store also keeps each chat in
// order across every process sharing it: an update is claimed only when no
// earlier update of its chat is unsettled and none of its chat is being
// handled, and a process that settles a chat's update takes the chat's next
// one over at once, whichever process recorded it. A line waiting for its
// predecessor holds no slot, and neither does a claim being written or
// waiting for a slot: claims are bounded separately, at four per slot, and
// hold their renewed lease while they wait. At most
// [Config.MaxQueued] updates and exhaustions are scheduled in one process;
// the rest wait in the store for a sweep.
//
// An attempt claims its row ([Store.Claim], or a capability's claim) with a
// lease of
// [Config.LeaseDuration], renews it every quarter lease, one renewal at a
// time, and settles it when the handler returns: completed on nil, failed
// with a retry time, or given up. The handler's slot is freed when it
// returns, before the settlement commits, and a completion commits off the
// chat's line: the chat's next update may start while it does (the update
// stays scheduled, for [Runner.Idle] and [Runner.Close], until it is
// settled). A failure holds the line until its retry is recorded. A handler's context is cancelled with an
// [*OwnershipLostError] cause when a renewal is refused or the last lease
// the store confirmed ends. That signal is advisory: with
// [Config.AttemptHandler] the handler receives the attempt's [Identity],
// and a domain write guarded by the store's Owns check inside its own
// transaction is authoritative, even when workers are killed mid-write.
//
// Delivery is at least once: a handler that finished but whose settlement
// was lost runs again — after its chat's next update, when that one had
// started while the completion was committing and the process died in
// between. Handlers must be idempotent (or fence their writes).
//
// # Processes that die
//
// With a [ProcessStore] (memstore, sqlitestore and pgstore are all one),
// [Runner.Start] registers a fresh process id, renews its heartbeat every
// [Config.HeartbeatInterval] and claims every update as that process
// ([ProcessStore.ClaimAs]). When a process dies, its heartbeat lapses
// [Config.HeartbeatTimeout] after its last renewal; the first runner to
// renew its own heartbeat after that reaps it and sweeps at once, and the
// updates the dead process held are claimed again, with fresh identities,
// long before their leases end. The takeover is fenced like any reclaim: the
// dead (or paused) process's identities can no longer renew, settle or own.
// A runner that cannot prove its own heartbeat for a HeartbeatTimeout (the
// store refused a renewal or none got through) stops its attempts with
// [ErrHeartbeatLapsed], as others may take them over, and registers anew
// when the store answers. A clean [Runner.Close] removes the heartbeat, so
// a successor starts at once.
//
// An attempt whose process's heartbeat lapsed before it ended is a crash.
// Crashes count against [Config.MaxCrashes] (by default 10), not
// [Config.MaxAttempts]: an update forwarded while its process was killed
// for another reason (a deploy, a neighbour's OOM kill, a lost host) keeps
// its attempts, while an update that kills every process that handles it
// (a poison update) is given up after MaxCrashes crashes with
// [CrashesSpentText]. The rule can be told apart in the store alone: a
// failure the handler returned, or a lease that ended while its process
// still renewed its heartbeat, is an attempt; a takeover from a process
// whose heartbeat lapsed is a crash.
//
// # Retries and exhaustion (dead letters)
//
// A failed attempt is retried after the delay [Config.RetryFunc] (by
// default [DefaultRetry]) decides, until [Config.MaxAttempts]. The retry
// runs in this process at its due time (a 429's retry_after of 1 s means
// 1 s); the sweep takes over retries no process waits for (after a
// restart, or another process's). By default a failed update keeps its
// place on its chat's line: the chat's later updates wait until it
// succeeds or is given up, so a chat never sees "two" before "one";
// [Config.RetryOutOfOrder] lets them run meanwhile. A handler
// can decide itself by returning [Abandon] or [RetryLater]. With a
// [Config.ExhaustionHandler] an update that is given up becomes an
// exhaustion in its own row, atomically, and is delivered to that handler
// at least once, after any restart, until it returns nil. Without one it is
// settled as abandoned and reported to the [Observer]; an update a claim
// finds with its attempts already spent stays an unacknowledged exhaustion
// for operator tooling (see [Config.ExhaustionHandler]).
//
// # Attempt history
//
// With an [AdminStore] (memstore, sqlitestore and pgstore are), the runner
// records every attempt when it ends ([AttemptRecord]): its identity and
// process, when it started and ended, how it ended (completed, failed,
// lease lost, stale), its error, and the app's answer that its handler
// reported with [ReportAnswer] (package forward reports every answer of
// the app's endpoint): status, a few headers and the first
// [MaxAttemptBody] bytes of the body. Every text passes through
// [Config.Redactor] before it is stored. Records survive later attempts,
// a completion and a requeue (which leaves a mark), and go with the
// update when it is pruned. [History] returns an update's timeline for
// operator tooling, with the attempts nobody recorded (a process that
// died while handling) shown as crashed and each attempt's gateway calls
// joined from the journal.
//
// # Updates with a deadline
//
// Telegram waits only briefly for the answer to a callback query (about
// 15 s), an inline query, a pre-checkout query (10 s: the payment fails
// after it) and a shipping query. The runner knows an update's type
// ([Update.Kind], parsed with its chat in one pass) and counts a deadline
// from its arrival ([Incoming.ReceivedAt], which [Store.Due] reports back):
// see [Deadlines] for the defaults and how to change them. Such an update
// runs on a lane of its own, never behind an earlier update of its chat
// and in handler slots of its own; its handler's context ends at its
// deadline; it is retried only while a retry can be due before the
// deadline; and once none can, it ends expired: abandoned and settled at
// once with [ExpiredText], reported to [Observer.ExpireFunc], never an
// exhaustion ([Row.Expired] tells it apart; operator tooling names its
// state "expired"). [Deadlines.LateFunc] is called, once, when such an
// update is not handled a margin before its deadline, so a relay can
// decline it safely in time. A successful_payment is a message: it has no
// deadline.
//
// # Lifecycle
//
// [Runner.Start] sweeps once (taking over everything due, without the
// pending grace) and then every [Config.SweepInterval]. [Runner.Sweep] runs
// one pass on demand; [Runner.Idle] waits until nothing is scheduled;
// [Runner.Close] stops scheduling and drains, cancelling handlers when its
// context ends.
//
// Every time the intake passes to a store is its own clock, truncated to
// milliseconds; tests run it under testing/synctest. Processes on several
// hosts sharing one store must have clocks that agree: pgstore checks, in
// every claim and heartbeat, that this host's clock is within a bound of the
// database's, and refuses otherwise.
//
// # Observers
//
// [Observer] is a struct of optional funcs, one per kind of event, each
// with its own typed arguments, as net/http/httptrace.ClientTrace is; the
// zero value observes nothing. Every tgrelay package that reports events
// has one of this shape, in its Config's Observer field: intake, poll,
// throttle ({EventFunc}), gateway ({CallFunc}) and relay ({EventFunc}, with
// [github.com/tgrelay/tgrelay/relay.Observers] to fan out). This is the
// standard library's habit for hooks a caller sets on a value it configures
// (httptrace.ClientTrace, http.Server.ConnState, slog.HandlerOptions'
// ReplaceAttr): a nil func costs nothing, a hook added later breaks no
// caller (a method added to an interface breaks every implementation), and
// a caller sets only the funcs it wants, without an adapter type.
package intake
