package intake

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/semaphore"
)

// Runner records Telegram updates and handles each one at least once, under
// a renewable lease, in chat order within the process (across processes
// with [ChatOrderStrict]), with at most
// [Config.MaxConcurrent] handlers at a time.
//
// The lifecycle is [New], [Runner.Start], then [Runner.Close]; a closed
// Runner may be started again. [Runner.Accept] works at any time: before
// Start (and after Close) it records without scheduling, and a later
// start-up sweep takes the update over. All methods are safe for concurrent
// use.
type Runner struct {
	cfg   Config
	store Store      // Config.Store
	keep  bool       // exhaustions are kept: an ExhaustionHandler or KeepExhaustions
	batch *committer // group commit of adds into Store.AddBatch
	// claimOnAdd is set when chat order is per process: an update that can
	// run at once is recorded already claimed.
	claimOnAdd bool
	// The capabilities, detected once by New (nil without).
	proc    ProcessStore   // claims with ClaimAs, adds with AddBatchAs
	procs   ProcessStore   // heartbeats: proc unless Config.NoHeartbeat
	order   ChatOrderStore // set under ChatOrderStrict: claims with ClaimInOrder
	crashes int            // ProcessClaim.MaxCrashes
	policy  func(error, int) (time.Duration, bool)
	strict  bool // Config.ChatOrder is ChatOrderStrict
	log     *slog.Logger

	mu       sync.Mutex
	started  bool       // Accept schedules
	gen      uint64     // bumped by Start and Close
	starting *startCall // the start in flight
	closing  chan struct{}
	run      *run  // the current lifecycle; nil before the first Start or Sweep and after Close
	cursor   int64 // exhaustion paging cursor; -1 when unset
}

// claimsPerSlot is how many claims, per handler slot, may be written or
// wait under their renewed lease for a slot at once. A claim commits in a
// few milliseconds and a forward may take less: with one per slot, the
// slots idle while claims commit (measured in BENCHMARKS.md, relay).
const claimsPerSlot = 4

// committingPerQueued bounds the updates whose completion is committing,
// per MaxQueued (see fullLocked).
const committingPerQueued = 4

// run is one lifecycle: everything Start (or a Sweep) schedules until Close.
type run struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	sem    *semaphore.Weighted // handler slots: Config.MaxConcurrent
	claims *semaphore.Weighted // claim tokens: claims being taken or waiting for a slot, claimsPerSlot per slot
	// The lane of updates with a deadline: handler slots
	// (Config.Deadlines.MaxConcurrent) and claim tokens of its own.
	urgentSem    *semaphore.Weighted
	urgentClaims *semaphore.Weighted
	wg           sync.WaitGroup // every goroutine of this run
	stop         chan struct{}  // closed to stop the background sweeper
	kick         chan struct{}  // a catch-up sweep is wanted (capacity 1)
	hb           *heartbeat     // this lifecycle's process, set by Start (guarded by Runner.mu); nil without one
	workers      *workers       // runs the chat lines and the settlements off them

	// Guarded by Runner.mu.
	held       int                 // queued updates on lines waiting for a retry
	reserved   int                 // accepts holding a line and a claim token while their claimed add commits
	adding     map[string]int      // per line: accepts in flight recorded unclaimed (see Accept)
	waiters    int                 // retries waiting off their line (Config.RetryOutOfOrder)
	stopped    bool                // stop is closed
	draining   bool                // Close began: claim nothing new
	lines      map[string]*line    // chat lines with work
	queued     map[int64]struct{}  // update ids scheduled as attempts
	urgent     map[int64]struct{}  // those of them with a deadline: their own share of MaxQueued
	ending     map[int64]*retake   // queued ids whose attempt settles their row for good (nil until a sweep lists the row), and delivering ids a sweep listed: each to schedule again (relist.go)
	late       map[int64]*lateCall // updates with a deadline whose Deadlines.LateFunc may still be due
	delivering map[int64]struct{}  // update ids whose exhaustion is being delivered
	idle       chan struct{}       // closed while nothing is queued (but held) or delivering
	quiet      bool                // idle is closed
	backlog    bool                // something was not scheduled for lack of room
	behind     map[string]uint64   // lines with updates left in the store for lack of room, by their latest mark (behind.go)
	allBehind  uint64              // nonzero: every line is behind, as of this mark
	marks      uint64              // the latest mark
	refill     bool                // the last sweep filled its page: more may be due
	sweeping   bool                // the background sweeper runs

	// committing holds the queued updates whose handler returned and whose
	// completion commits off their line (see handle), true for those with
	// a deadline, counted in committingUrgent. They count against a bound
	// of their own, not MaxQueued (see fullLocked).
	committing       map[int64]bool
	committingUrgent int
}

// line is the queue of one chat: its updates run one after the other.
type line struct {
	jobs    []job
	waiting bool // the first job waits for its retry; the rest are held
	// reserved is set while an Accept that holds this line waits for its
	// claimed add to commit; the line's goroutine starts when it resolves,
	// and jobs scheduled meanwhile wait behind the accepted update.
	reserved bool
	// urgent is set when the reservation took a claim token of the
	// deadline lane.
	urgent bool
}

// job is one scheduled update.
type job struct {
	id   int64
	body []byte
	chat chatRef
	key  string // the chat key (Incoming.Chat); empty when none
	bad  bool   // the body is not an update: exhaust or abandon without handling
	kind string // the update's type (Update.Kind)
	// received is the update's arrival; deadline, when set, the end of
	// its answer deadline: the job runs on the deadline lane.
	received, deadline time.Time
	// claim, when set, is the claim the update was recorded under by
	// Accept (claim on add): the job runs under it, with the claim token
	// Accept reserved, without claiming again. Only its first run uses it.
	claim *heldClaim
}

// heldClaim is a claim taken by a claimed add, the end of its lease and
// the process it was taken as (ProcessClaim.Process).
type heldClaim struct {
	id         Identity
	leaseUntil time.Time
	owner      string
}

type startCall struct {
	done chan struct{}
	err  error
}

// New returns a Runner for cfg, or a *[ConfigError] naming the first invalid
// field.
// It copies cfg and detects the store's capabilities once.
func New(cfg Config) (*Runner, error) {
	c, err := cfg.fill()
	if err != nil {
		return nil, err
	}
	r := &Runner{cfg: c, policy: c.RetryFunc, log: c.Logger, cursor: -1, strict: c.ChatOrder == ChatOrderStrict}
	if r.policy == nil {
		r.policy = DefaultRetry
	}
	r.store = c.Store
	r.keep = c.ExhaustionHandler != nil || c.KeepExhaustions
	if ps, ok := c.Store.(ProcessStore); ok {
		r.proc = ps
		r.crashes = max(c.MaxCrashes, 0)
		if !c.NoHeartbeat {
			r.procs = ps
		}
	}
	if r.strict {
		r.order = c.Store.(ChatOrderStore) // checked by fill
	}
	// Strict chat order is the store's to judge at every claim, which a
	// claimed add does not ask it: such a runner adds unclaimed.
	r.claimOnAdd = !r.strict
	r.batch = newCommitter(r.commitAdds, c.MaxBatch, min(c.LeaseDuration, c.AcceptTimeout), c.AcceptTimeout)
	return r, nil
}

// now is the intake clock: wall time truncated to milliseconds, the
// precision every store keeps.
func now() time.Time { return time.Now().Truncate(time.Millisecond) }

// Accept parses body as a Telegram update, records it durably, and, while
// the runner is started, schedules it. It returns [Invalid] (recording
// nothing) when body is not a Telegram update as [ParseUpdate] defines
// it (a JSON object holding update_id once, a non-negative integer of at
// most [MaxUpdateID]), [Duplicate] when that update_id is already recorded, and
// [Accepted] otherwise. The raw bytes are recorded, not a re-encoding;
// Accept does not retain body. An error means the store could not record
// the update (the webhook answers 503 so Telegram re-delivers it).
//
// Concurrent calls share one [Store.AddBatch]; a call that finds no commit
// in progress commits at once. Unless chat order is strict, an update the
// started runner can take at once
// (nothing of its chat is scheduled or being accepted in this process, a
// claim token is free, and nothing waits for room) is recorded already
// claimed, in the same commit, and handed to its handler with no second
// write in between: before Accept returns when a slot is free, else as
// soon as one frees, under its renewed lease.
//
// The wait for the store is bounded by [Config.AcceptTimeout] (see there):
// the group commit bounds a call's wait in its queue and its commit, so
// an accept costs no timer or context of its own.
func (r *Runner) Accept(ctx context.Context, body []byte) (Acceptance, error) {
	p, err := parseUpdate(body)
	if err != nil {
		r.observeAccept(-1, Invalid)
		return Invalid, nil
	}
	received := now()
	r.route(&p, received)
	in := Incoming{UpdateID: p.id, Body: body, ReceivedAt: received, Chat: p.key}
	if r.claimOnAdd {
		return r.acceptClaiming(ctx, p, in)
	}
	res, err := r.batch.Do(ctx, addReq{AddRequest: AddRequest{Incoming: in}})
	added := res.Added
	if err != nil {
		return 0, fmt.Errorf("intake: record update %d: %w", p.id, err)
	}
	if !added {
		r.observeAccept(p.id, Duplicate)
		return Duplicate, nil
	}
	r.observeAccept(p.id, Accepted)
	r.mu.Lock()
	if r.started && r.run != nil {
		r.scheduleAcceptedLocked(r.run, r.acceptedJob(p, body, received), p.line)
	}
	r.mu.Unlock()
	return Accepted, nil
}

func (r *Runner) acceptedJob(p parsedUpdate, body []byte, received time.Time) job {
	return job{id: p.id, body: bytes.Clone(body), chat: chatRef{p.chatID, p.chatType}, key: p.key,
		kind: p.kind, received: received, deadline: r.deadlineOf(p.kind, received)}
}

// route puts an update with a deadline on a line of its own, and drops
// its chat key, so that neither this process nor a strict store holds it
// behind an earlier update of its chat.
func (r *Runner) route(p *parsedUpdate, received time.Time) {
	if r.deadlineOf(p.kind, received).IsZero() {
		return
	}
	p.line = "update:" + strconv.FormatInt(p.id, 10)
	p.key = ""
}

// acceptClaiming is Accept with claims on add. When the update can run
// at once, it reserves the update's chat line and a claim token before the
// add, asks the add for a claim, and on commit starts the line with the
// claimed job first; a duplicate or a failed add releases both.
// Otherwise the add is unclaimed, and the chat's line is marked as having
// an accept in flight, so that no later update of the chat is claimed on
// add (and run) before this one is scheduled.
func (r *Runner) acceptClaiming(ctx context.Context, p parsedUpdate, in Incoming) (Acceptance, error) {
	req := addReq{AddRequest: AddRequest{Incoming: in}}
	r.mu.Lock()
	rn := r.run
	if !r.started {
		rn = nil
	}
	var ln *line
	if rn != nil {
		ln = r.reserveLocked(rn, p.id, p.line, !r.deadlineOf(p.kind, in.ReceivedAt).IsZero())
		if ln != nil {
			req.Claim = &ClaimOpts{Now: in.ReceivedAt, LeaseUntil: in.ReceivedAt.Add(r.cfg.LeaseDuration),
				MaxAttempts: r.cfg.MaxAttempts}
			req.process = rn.hb.claimAs(in.ReceivedAt)
		} else {
			rn.adding[p.line]++
		}
	}
	r.mu.Unlock()

	res, err := r.batch.Do(ctx, req)
	accepted := err == nil && res.Added
	if accepted {
		// Told before the update can run, so an observer hears its
		// accept before its claim.
		r.observeAccept(p.id, Accepted)
	}

	// A batch's accepts all return at once, each to take r.mu: what needs
	// no lock (the job, a copy of the body) is done before it, and the
	// line's goroutine starts after it.
	var j job
	if accepted && rn != nil {
		j = r.acceptedJob(p, in.Body, in.ReceivedAt)
	}
	start := false
	r.mu.Lock()
	switch {
	case ln != nil && accepted && res.Claimed():
		r.startClaimedLocked(rn, ln, j, &heldClaim{id: res.Identity, leaseUntil: req.Claim.LeaseUntil, owner: req.process})
		start = true
	case ln != nil:
		r.releaseLocked(rn, ln, p.line)
		if accepted { // recorded, but not claimed: schedule it as any other
			r.scheduleAcceptedLocked(rn, j, p.line)
		}
	default:
		if rn != nil {
			if rn.adding[p.line]--; rn.adding[p.line] <= 0 {
				delete(rn.adding, p.line)
			}
		}
		if accepted && r.started && r.run != nil {
			if rn == nil { // the runner started while the add committed
				j = r.acceptedJob(p, in.Body, in.ReceivedAt)
			}
			r.scheduleAcceptedLocked(r.run, j, p.line)
		}
	}
	r.mu.Unlock()
	if start {
		rn.workers.Go(func() { r.runLine(rn, p.line, ln) })
	}

	if err != nil {
		return 0, fmt.Errorf("intake: record update %d: %w", p.id, err)
	}
	if !res.Added {
		r.observeAccept(p.id, Duplicate)
		return Duplicate, nil
	}
	return Accepted, nil
}

// reserveLocked reserves the chat line key and a claim token for update
// id, to record it claimed, and returns the reserved line; nil when the
// update cannot run at once: the lifecycle drains, an update waits for room
// (backlog), the chat has work scheduled or an accept in flight here, the
// update is scheduled already, MaxQueued is reached, or no claim token is
// free. urgent reserves on the deadline lane. The reservation counts as a
// goroutine of rn until it resolves, so Close waits for it.
func (r *Runner) reserveLocked(rn *run, id int64, key string, urgent bool) *line {
	if rn.draining || rn.backlog || rn.adding[key] > 0 || rn.isBehindLocked(key) {
		return nil
	}
	if _, ok := rn.lines[key]; ok {
		return nil
	}
	if _, ok := rn.queued[id]; ok {
		return nil
	}
	if _, ok := rn.delivering[id]; ok {
		return nil
	}
	// A claim token bounds the updates claimed and waiting for a handler
	// slot (their leases renewed meanwhile, see handle). A busy slot is no
	// reason to record the update unclaimed: it would only cost it a claim
	// of its own later, one more write under exactly the load that can
	// least afford it.
	_, claims := rn.lane(urgent)
	if r.fullLocked(rn, urgent) || !claims.TryAcquire(1) {
		return nil
	}
	ln := &line{reserved: true, urgent: urgent}
	rn.lines[key] = ln
	rn.reserved++
	rn.wg.Add(1) // the line's goroutine, started when the reservation resolves
	return ln
}

// startClaimedLocked resolves the reservation of ln with the claimed job j,
// first on its line; the caller then starts the line (runLine), which the
// reservation counted in rn.wg already. The job runs even when Close
// began meanwhile: it holds a claim, as an attempt in flight does.
func (r *Runner) startClaimedLocked(rn *run, ln *line, j job, c *heldClaim) {
	rn.reserved--
	ln.reserved = false
	j.claim = c
	r.queueLocked(rn, j)
	ln.jobs = append([]job{j}, ln.jobs...)
	r.idleLocked(rn)
}

// releaseLocked resolves the reservation of ln without a claim: it frees
// the claim token, and starts the line for the jobs scheduled behind the
// reservation, or removes it when there are none.
func (r *Runner) releaseLocked(rn *run, ln *line, key string) {
	rn.reserved--
	ln.reserved = false
	_, claims := rn.lane(ln.urgent)
	claims.Release(1)
	if len(ln.jobs) > 0 {
		rn.workers.Go(func() { r.runLine(rn, key, ln) })
		return
	}
	if rn.lines[key] == ln {
		delete(rn.lines, key)
	}
	rn.wg.Done()
}

// Start begins handling: a first sweep takes over everything due, pending
// rows included however fresh (no grace), then a background sweep runs
// every [Config.SweepInterval] with the pending grace. Start is idempotent:
// concurrent callers share one start and its result, and a call on a
// started runner returns nil at once. When the first sweep fails, Start
// returns its error and may be called again. ctx bounds only the first
// sweep; handlers run until [Runner.Close]. With a [ProcessStore] (unless
// [Config.NoHeartbeat]) Start first registers a fresh process id and
// starts renewing its heartbeat, which lasts until Close; a refused
// registration (pgstore's ClockSkewError included) fails Start.
func (r *Runner) Start(ctx context.Context) error {
	if err := r.lockOpen(ctx); err != nil {
		return err
	}
	if r.started {
		sc := r.starting
		r.mu.Unlock()
		if sc == nil {
			return nil
		}
		select {
		case <-sc.done:
			return sc.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	sc := &startCall{done: make(chan struct{})}
	r.started = true
	r.gen++
	gen := r.gen
	r.starting = sc
	rn := r.ensureRunLocked(ctx)
	r.mu.Unlock()

	err := r.startHeartbeat(ctx, rn)
	if err == nil {
		_, err = r.sweep(ctx, rn, now())
	}

	r.mu.Lock()
	if r.starting == sc {
		r.starting = nil
	}
	if err != nil {
		if r.gen == gen {
			r.started = false
		}
		sc.err = fmt.Errorf("intake: start: %w", err)
	} else if r.gen == gen && !rn.stopped && !rn.sweeping {
		rn.sweeping = true
		rn.wg.Add(1)
		go r.sweepLoop(rn)
	}
	close(sc.done)
	r.mu.Unlock()
	return sc.err
}

// Sweep runs one sweep now, without [Runner.Start]: it schedules the due
// rows (pending ones only after the pending grace) and the due exhaustions,
// prunes settled rows older than the retention, and returns how many
// updates and exhaustions it newly scheduled. The scheduled work runs in
// the background; [Runner.Idle] waits for it and [Runner.Close] ends it.
func (r *Runner) Sweep(ctx context.Context) (int, error) {
	if err := r.lockOpen(ctx); err != nil {
		return 0, err
	}
	rn := r.ensureRunLocked(ctx)
	r.mu.Unlock()
	t := now()
	n, err := r.sweep(ctx, rn, t.Add(-r.cfg.PendingGrace))
	if err != nil {
		return n, fmt.Errorf("intake: sweep: %w", err)
	}
	return n, nil
}

// Idle waits until nothing is scheduled to run now: no update on a chat
// line and no exhaustion being delivered. A failed update waiting for its
// retry's due time, and the updates of its chat held behind it, do not
// count: Idle returns while they wait, as it does while a retry waits in
// the store. It returns ctx.Err() when ctx ends first.
func (r *Runner) Idle(ctx context.Context) error {
	r.mu.Lock()
	rn := r.run
	var ch chan struct{}
	if rn != nil {
		ch = rn.idle
	}
	r.mu.Unlock()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops scheduling (updates waiting on a chat line are left in the
// store for a later sweep), stops the background sweep, and waits for the
// handlers in flight. When ctx ends first it cancels the handlers' contexts
// with cause [ErrClosed] and returns ctx.Err() without waiting further;
// handlers that ignore their context then finish in the background, and
// their attempts are retried after their leases lapse (or, with a
// [ProcessStore], after the heartbeat Close stops renewing lapses).
// A handler so cancelled is left unsettled when it returns, whatever it
// returns, as a killed process leaves it: a close never turns an update
// into an exhaustion, and writes nothing on the run it ended. After a
// complete drain Close removes the heartbeat, so a successor takes over at
// once. Close is idempotent, and Close without Start returns nil. A later Start begins a
// new lifecycle.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	for r.closing != nil { // another Close runs: wait for it, then re-check
		ch := r.closing
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		r.mu.Lock()
	}
	r.started = false
	r.gen++
	rn := r.run
	if rn == nil {
		r.mu.Unlock()
		return nil
	}
	closing := make(chan struct{})
	r.closing = closing
	sc := r.starting
	rn.draining = true
	if !rn.stopped {
		rn.stopped = true
		close(rn.stop)
	}
	r.mu.Unlock()

	defer func() {
		r.mu.Lock()
		if r.run == rn {
			r.run = nil
		}
		r.closing = nil
		close(closing)
		r.mu.Unlock()
	}()

	if sc != nil {
		select {
		case <-sc.done:
		case <-ctx.Done():
			rn.cancel(ErrClosed)
			return ctx.Err()
		}
	}
	drained := make(chan struct{})
	go func() {
		rn.wg.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		r.endHeartbeat(ctx, rn, true)
		rn.cancel(ErrClosed)
		rn.workers.wait() // the idle ones, which leave with rn.ctx
		return nil
	case <-ctx.Done():
		rn.cancel(ErrClosed) // first: it also ends a renewal in flight
		r.endHeartbeat(ctx, rn, false)
		return ctx.Err()
	}
}

// endHeartbeat ends rn's heartbeat, if it has one; leave removes it from
// the store (nothing of this lifecycle is in flight any more).
func (r *Runner) endHeartbeat(ctx context.Context, rn *run, leave bool) {
	r.mu.Lock()
	hb := rn.hb
	rn.hb = nil
	r.mu.Unlock()
	if hb != nil {
		hb.end(ctx, leave)
	}
}

// lockOpen waits for a Close in progress to finish and returns with r.mu
// held, or returns ctx.Err() without it.
func (r *Runner) lockOpen(ctx context.Context) error {
	for {
		r.mu.Lock()
		ch := r.closing
		if ch == nil {
			return nil
		}
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ensureRunLocked returns the current lifecycle, creating it when needed.
// Its context keeps ctx's values but not its cancellation.
func (r *Runner) ensureRunLocked(ctx context.Context) *run {
	if r.run != nil {
		return r.run
	}
	rctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	idle := make(chan struct{})
	close(idle)
	r.run = &run{
		ctx:          rctx,
		cancel:       cancel,
		sem:          semaphore.NewWeighted(int64(r.cfg.MaxConcurrent)),
		claims:       semaphore.NewWeighted(int64(claimsPerSlot * r.cfg.MaxConcurrent)),
		urgentSem:    semaphore.NewWeighted(int64(r.cfg.Deadlines.MaxConcurrent)),
		urgentClaims: semaphore.NewWeighted(int64(claimsPerSlot * r.cfg.Deadlines.MaxConcurrent)),
		urgent:       make(map[int64]struct{}),
		late:         make(map[int64]*lateCall),
		stop:         make(chan struct{}),
		kick:         make(chan struct{}, 1),
		lines:        make(map[string]*line),
		behind:       make(map[string]uint64),
		queued:       make(map[int64]struct{}),
		ending:       make(map[int64]*retake),
		committing:   make(map[int64]bool),
		adding:       make(map[string]int),
		delivering:   make(map[int64]struct{}),
		idle:         idle,
		quiet:        true,
		// As many idle workers as lines and settlements in flight at
		// full load: one per handler slot, and one for its settlement.
		workers: newWorkers(rctx, 2*(r.cfg.MaxConcurrent+r.cfg.Deadlines.MaxConcurrent)),
	}
	return r.run
}

// sweepLoop is the background sweep of one lifecycle.
func (r *Runner) sweepLoop(rn *run) {
	defer rn.wg.Done()
	t := time.NewTicker(r.cfg.SweepInterval)
	defer t.Stop()
	for {
		var pendingBefore time.Time
		select {
		case <-rn.stop:
			return
		case <-t.C:
			pendingBefore = now().Add(-r.cfg.PendingGrace)
			rn.workers.trim()
		case <-rn.kick:
			// Room freed after an accepted update found none, or the last
			// page was full and has mostly run: take over the rest at once,
			// without the grace, as the start-up sweep does (claims are
			// atomic, so a row another process recorded is still safe).
			pendingBefore = now()
		}
		ctx, cancel := context.WithTimeout(rn.ctx, r.cfg.LeaseDuration)
		_, err := r.sweep(ctx, rn, pendingBefore)
		cancel()
		if err != nil {
			r.storeError(StepSweep, -1, err)
		}
	}
}

// sweep lists due rows and exhaustions, schedules them on rn, and prunes.
func (r *Runner) sweep(ctx context.Context, rn *run, pendingBefore time.Time) (int, error) {
	// Rows already scheduled here are listed again while due; widen the
	// page by their number so they cannot starve the rest. The marks of
	// lines behind are read before the clock: every update left behind
	// by then was received at or before at.
	r.mu.Lock()
	limit := r.cfg.PageSize + len(rn.queued)
	mark, catchingUp := rn.marks, rn.anyBehindLocked()
	r.mu.Unlock()
	at := now()
	if catchingUp || pendingBefore.After(at) {
		pendingBefore = at
	}
	q := DueQuery{Now: at, PendingBefore: pendingBefore, Limit: limit}
	var rows []StoredUpdate
	var err error
	if r.order != nil {
		rows, err = r.order.DueInOrder(ctx, q, "")
	} else {
		rows, err = r.store.Due(ctx, q)
	}
	if err != nil {
		return 0, fmt.Errorf("list due updates: %w", err)
	}
	// A full page means more rows may be due than one page holds: sweep
	// again as soon as this page has mostly run, not a SweepInterval later.
	r.mu.Lock()
	rn.refill = len(rows) == limit
	r.mu.Unlock()
	n := r.scheduleRows(rn, rows)
	if catchingUp && len(rows) < limit {
		r.mu.Lock()
		r.caughtUpLocked(rn, mark)
		r.mu.Unlock()
	}
	if r.cfg.ExhaustionHandler != nil {
		m, err := r.sweepExhaustions(ctx, rn)
		n += m
		if err != nil {
			return n, err
		}
	}
	if _, err := r.store.Prune(ctx, at.Add(-r.cfg.Retention)); err != nil {
		return n, fmt.Errorf("prune settled updates: %w", err)
	}
	return n, nil
}

// scheduleRows schedules listed rows on their chat lines and returns how
// many were newly scheduled. Once a row of a line is left in the store for
// lack of room, the line's later rows are left with it, even when room
// frees meanwhile: they run after it, from a later sweep.
func (r *Runner) scheduleRows(rn *run, rows []StoredUpdate) int {
	n := 0
	var left map[string]bool // lines a row of which this pass left in the store
	for _, row := range rows {
		p, perr := parseUpdate(row.Body)
		received := row.ReceivedAt
		if received.IsZero() {
			received = now() // the store does not say: count from now
		}
		r.route(&p, received)
		key := p.line
		if perr != nil {
			key = "update:" + strconv.FormatInt(row.UpdateID, 10)
		}
		j := job{id: row.UpdateID, body: row.Body, chat: chatRef{p.chatID, p.chatType}, key: p.key, bad: perr != nil,
			kind: p.kind, received: received, deadline: r.deadlineOf(p.kind, received)}
		r.mu.Lock()
		switch {
		case left[key]:
			// Left with the line's earlier row, whose mark, made in this
			// pass, keeps the line behind.
		case r.scheduleLocked(rn, j, key):
			n++
		case r.relistedLocked(rn, j, key):
			// Its line schedules it again as it unqueues it.
		case rn.isBehindLocked(key) && !rn.scheduledLocked(j.id):
			if left == nil {
				left = make(map[string]bool)
			}
			left[key] = true
		}
		r.mu.Unlock()
	}
	return n
}

// handOff, under strict chat order, schedules the next update of chat key,
// whose update this process just settled for good: that update may have
// been recorded, and its claim refused, by another process (or before a
// restart), and nobody else would look for it before a sweep. Of a chat
// only its lowest unsettled update is claimable, so one row is listed.
func (r *Runner) handOff(rn *run, key string) {
	at := now()
	ctx, cancel := context.WithTimeout(rn.ctx, r.cfg.LeaseDuration)
	rows, err := r.order.DueInOrder(ctx, DueQuery{Now: at, PendingBefore: at, Limit: 1}, key)
	cancel()
	if err != nil {
		r.storeError(StepSweep, -1, fmt.Errorf("list the next update of a chat: %w", err))
		return
	}
	r.scheduleRows(rn, rows)
}

// sweepExhaustions schedules one page of due exhaustions, continuing after
// the page of the previous sweep so that exhaustions whose delivery keeps
// failing cannot hide the ones after them.
func (r *Runner) sweepExhaustions(ctx context.Context, rn *run) (int, error) {
	r.mu.Lock()
	cursor := r.cursor
	r.mu.Unlock()
	q := ExhaustionQuery{Limit: r.cfg.PageSize}
	if cursor >= 0 {
		q.After = &cursor
	}
	page, err := r.store.DueExhaustions(ctx, q)
	if err != nil {
		return 0, fmt.Errorf("list due exhaustions: %w", err)
	}
	if len(page) == 0 && cursor >= 0 {
		q.After = nil
		if page, err = r.store.DueExhaustions(ctx, q); err != nil {
			return 0, fmt.Errorf("list due exhaustions: %w", err)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(page) == 0 {
		r.cursor = -1
	} else {
		r.cursor = page[len(page)-1].UpdateID
	}
	n := 0
	for _, e := range page {
		if r.scheduleExhaustionLocked(rn, e, false) {
			n++
		}
	}
	return n, nil
}

// scheduleLocked puts job j on the chat line key unless it is scheduled
// already, the lifecycle is draining, or MaxQueued is reached (then the
// line is behind, and a catch-up sweep is requested for when room frees).
// It reports whether the update was newly scheduled.
func (r *Runner) scheduleLocked(rn *run, j job, key string) bool {
	id := j.id
	if rn.draining {
		return false
	}
	if _, ok := rn.queued[id]; ok {
		return false
	}
	if _, ok := rn.delivering[id]; ok {
		return false
	}
	if r.fullLocked(rn, !j.deadline.IsZero()) {
		rn.backlog = true
		r.markBehindLocked(rn, key)
		return false
	}
	r.queueLocked(rn, j)
	ln := rn.lines[key]
	if ln == nil {
		ln = &line{}
		rn.lines[key] = ln
		rn.wg.Add(1)
		rn.workers.Go(func() { r.runLine(rn, key, ln) })
	}
	ln.jobs = append(ln.jobs, j)
	if ln.waiting {
		rn.held++
	}
	r.idleLocked(rn)
	return true
}

// idleLocked opens or closes rn.idle to match what is scheduled to run
// now: queued updates not held behind a retry, and deliveries.
func (r *Runner) idleLocked(rn *run) {
	busy := len(rn.queued)-rn.held+len(rn.delivering) > 0
	switch {
	case busy && rn.quiet:
		rn.quiet = false
		rn.idle = make(chan struct{})
	case !busy && !rn.quiet:
		rn.quiet = true
		close(rn.idle)
	}
}

// doneLocked notes that scheduled work ended.
func (r *Runner) doneLocked(rn *run) {
	running := len(rn.queued) - len(rn.committing)
	n := running + len(rn.delivering)
	r.idleLocked(rn)
	refill := rn.refill && running <= r.cfg.PageSize/2
	roomy := n <= r.cfg.MaxQueued/2 && len(rn.committing) <= committingPerQueued*r.cfg.MaxQueued/2
	if (refill || rn.backlog && roomy) && !rn.draining {
		rn.backlog = false
		rn.refill = false
		select {
		case rn.kick <- struct{}{}:
		default:
		}
	}
}

// runLine runs the jobs of one chat line in order, each claimed under a
// claim token and handled in a handler slot (see handle). A line waiting
// for its predecessor holds neither. A failed job whose retry is due later
// stays first on its line and waits for its due time (holding the chat's
// later jobs, unless Config.RetryOutOfOrder), then runs again.
func (r *Runner) runLine(rn *run, key string, ln *line) {
	defer rn.wg.Done()
	for {
		r.mu.Lock()
		if len(ln.jobs) == 0 {
			delete(rn.lines, key)
			r.mu.Unlock()
			return
		}
		j := ln.jobs[0]
		draining := rn.draining
		r.mu.Unlock()

		// A claim token bounds the claims being taken or waiting for a
		// handler slot; the slot, taken under the claim, bounds handlers
		// (see handle).
		var res outcome
		switch {
		case j.claim != nil:
			// Claimed on add, with the claim token Accept reserved: run
			// it, even while draining, like an attempt in flight. A retry
			// of it on this line claims again.
			res = r.handle(rn, j, j.claim.id, j.claim.leaseUntil, j.claim.owner)
			r.mu.Lock()
			ln.jobs[0].claim = nil
			r.mu.Unlock()
			j.claim = nil
		case !draining && laneClaims(rn, j).Acquire(rn.ctx, 1) == nil:
			res = r.attempt(rn, j)
		}
		if !res.retryAt.IsZero() && !r.cfg.RetryOutOfOrder {
			if r.waitRetry(rn, ln, res.retryAt) {
				continue // the first job runs again
			}
			r.dropLine(rn, ln) // closing: the rows stay in the store
			continue
		}

		r.mu.Lock()
		ln.jobs[0] = job{}
		ln.jobs = ln.jobs[1:]
		// An emptied line goes in the same critical section as its last
		// job, so that whoever sees the runner idle (doneLocked) also
		// finds the chat's line free.
		last := len(ln.jobs) == 0
		if last {
			delete(rn.lines, key)
		}
		var again *retake
		if res.settle == nil {
			again = r.unqueueLocked(rn, j.id, res.released)
		} else {
			r.committingLocked(rn, j.id)
		}
		switch {
		case again != nil:
			// Requeued since its attempt settled it, and listed due: it is
			// no exhaustion any more, and runs again at once (see
			// relistedLocked). Should it still be one (a sweep listed the
			// row when the attempt's lease had lapsed), it stays due for
			// the exhaustion sweep.
			r.scheduleAcceptedLocked(rn, again.j, again.key)
		case res.exhaustion != nil:
			r.scheduleExhaustionLocked(rn, *res.exhaustion, true)
		}
		if !res.retryAt.IsZero() {
			r.retryOffLineLocked(rn, j, key, res.retryAt)
		}
		r.doneLocked(rn)
		r.mu.Unlock()
		if r.strict && res.released && j.key != "" {
			r.handOff(rn, j.key)
		}
		if last {
			if res.settle != nil {
				// Nothing else waits on this line: the settlement runs
				// here rather than on a worker of its own.
				res.settle()
			}
			return
		}
		if res.settle != nil {
			rn.workers.Go(res.settle)
		}
	}
}

// waitRetry holds line ln (whose first job failed) until at, the retry's
// due time. It reports false when the lifecycle stopped meanwhile.
func (r *Runner) waitRetry(rn *run, ln *line, at time.Time) bool {
	wait := at.Sub(now())
	if wait <= 0 {
		return true
	}
	r.mu.Lock()
	ln.waiting = true
	rn.held += len(ln.jobs)
	r.idleLocked(rn)
	r.mu.Unlock()

	t := time.NewTimer(wait)
	defer t.Stop()
	var due bool
	select {
	case <-t.C:
		due = true
	case <-rn.stop:
	}

	r.mu.Lock()
	ln.waiting = false
	rn.held -= len(ln.jobs)
	r.idleLocked(rn)
	r.mu.Unlock()
	return due
}

// dropLine unschedules every job of ln without running it; their rows stay
// in the store for a later sweep.
func (r *Runner) dropLine(rn *run, ln *line) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range ln.jobs {
		r.unqueueLocked(rn, j.id, false)
	}
	ln.jobs = nil
	r.doneLocked(rn)
}

// retryOffLineLocked schedules job j again on its line at its retry time
// without holding the line (Config.RetryOutOfOrder). At most MaxQueued
// retries wait this way; beyond that, and when the lifecycle ends first,
// the sweep finds the row when it is due.
func (r *Runner) retryOffLineLocked(rn *run, j job, key string, at time.Time) {
	if rn.draining || rn.waiters >= r.cfg.MaxQueued {
		return
	}
	rn.waiters++
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		t := time.NewTimer(at.Sub(now()))
		defer t.Stop()
		select {
		case <-t.C:
		case <-rn.stop:
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		rn.waiters--
		r.scheduleLocked(rn, j, key)
	}()
}

// storeError reports a store failure the runner cannot return to a caller.
func (r *Runner) storeError(step Step, updateID int64, err error) {
	r.log.Warn("intake: store error", "step", string(step), "update_id", updateID, "err", err)
	if f := r.cfg.Observer.StoreErrorFunc; f != nil {
		guard(func() { f(step, updateID, err) })
	}
}

func (r *Runner) observeAccept(id int64, a Acceptance) {
	if f := r.cfg.Observer.AcceptFunc; f != nil {
		guard(func() { f(id, a) })
	}
}

// guard runs an observer, swallowing its panic: an observer cannot lose an
// update.
func guard(f func()) {
	defer func() { _ = recover() }()
	f()
}

// errorText returns err's message, guarding against an Error method that
// panics, as text every store can keep: invalid UTF-8 and NUL bytes are
// replaced by U+FFFD, since a PostgreSQL text holds neither. A handler's
// error may quote any bytes (an update's, an app's answer), and a text the
// store refuses would fail the settlement of every attempt, leaving the
// update to run again forever.
func errorText(err error) (s string) {
	defer func() {
		if recover() != nil {
			s = fmt.Sprintf("%T (its Error method panicked)", err)
		}
	}()
	if err == nil {
		return "<nil>"
	}
	return storableText(err.Error())
}

// storableText returns s with invalid UTF-8 and NUL bytes replaced by
// U+FFFD.
func storableText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
