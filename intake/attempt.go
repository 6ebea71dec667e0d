package intake

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/transport"
)

// Attempt is the identity of one attempt on one update, handed to
// [Config.AttemptHandler] and found with [AttemptFrom]. Every attempt, a retry included, has a new
// Identity. Persist all three identity fields with a domain write and guard
// the write with the store's Owns check inside the same transaction.
type Attempt struct {
	Identity
	lease *lease
	store Store
}

// LeaseUntil returns the end of the last lease the store confirmed for
// this attempt. It moves forward with every renewal.
func (a Attempt) LeaseUntil() time.Time {
	if a.lease == nil {
		return time.Time{}
	}
	a.lease.mu.Lock()
	defer a.lease.mu.Unlock()
	return a.lease.until
}

// Owns asks the store whether this attempt still holds a live lease now.
// Outside the transaction of a domain write it is only advisory: use the
// store's transaction-scoped check (OwnsTx) to fence a write.
func (a Attempt) Owns(ctx context.Context) (bool, error) {
	if a.store == nil {
		return false, nil
	}
	return a.store.Owns(ctx, a.Identity, now())
}

// lease tracks one attempt's ownership while its handler runs.
type lease struct {
	mu     sync.Mutex
	id     Identity
	until  time.Time // last lease the store confirmed
	active bool      // cleared when the handler has returned
	lost   bool
	// timer ends the lease at until (leaseDeadline); nil until the first
	// renewal is due, unless the lease ends before that.
	timer  *time.Timer
	cancel context.CancelCauseFunc
	// renew starts the renewals when the first one is due (see
	// renewLoop); stopRenew, set once they run, ends them.
	renew     *time.Timer
	stopRenew context.CancelFunc
	// trace is the attempt's record in the making (attempts.go).
	trace *attemptTrace
}

// watchEndLocked arms the timer that ends the lease after d unless a
// renewal moves its end first (leaseDeadline). l.mu is held.
func (l *lease) watchEndLocked(r *Runner, d time.Duration) {
	l.timer = time.AfterFunc(d, func() { r.leaseDeadline(l) })
}

// loseLocked cancels the handler's context with an ownership-lost cause,
// once.
func (l *lease) loseLocked(err error) bool {
	if l.lost {
		return false
	}
	l.lost = true
	l.cancel(&OwnershipLostError{Identity: l.id, Err: err})
	return true
}

// outcome is what one attempt left to schedule.
type outcome struct {
	// exhaustion is the exhaustion the attempt recorded, for delivery.
	exhaustion *Exhaustion
	// retryAt is the due time of the retry the store accepted; zero when
	// none was scheduled.
	retryAt time.Time
	// released reports that the attempt settled its row for good
	// (completed, abandoned or exhausted), which releases its chat under
	// strict chat order.
	released bool
	// settle, when set, settles the completion and then unschedules the
	// update. The line runs it in the background once it is done with the
	// job (rn.wg counts it already), so that the update cannot be
	// unscheduled, and the runner seen idle, while its line is still
	// there.
	settle func()
}

// claim claims update id through the capability the runner detected: a
// strict claim of a [ChatOrderStore] under [ChatOrderStrict], a claim by
// process owner of a [ProcessStore], or the core claim.
func (r *Runner) claim(ctx context.Context, id int64, opts ClaimOpts, owner string) (Identity, bool, error) {
	p := ProcessClaim{Process: owner, MaxCrashes: r.crashes}
	switch {
	case r.order != nil:
		return r.order.ClaimInOrder(ctx, id, opts, p)
	case r.proc != nil:
		return r.proc.ClaimAs(ctx, id, opts, p)
	}
	return r.store.Claim(ctx, id, opts)
}

// attempt claims job j and handles it (see handle).
// The caller holds a claim token (run.claims); attempt frees it when the
// claim fails, handle once a handler slot is had.
func (r *Runner) attempt(rn *run, j job) outcome {
	leaseFor := r.cfg.LeaseDuration
	taken := now()
	r.mu.Lock()
	hb := rn.hb
	r.mu.Unlock()
	opts := ClaimOpts{Now: taken, LeaseUntil: taken.Add(leaseFor), MaxAttempts: r.cfg.MaxAttempts}
	owner := hb.claimAs(taken)
	cctx, ccancel := context.WithTimeout(rn.ctx, leaseFor)
	id, ok, err := r.claim(cctx, j.id, opts, owner)
	ccancel()
	if err != nil {
		laneClaims(rn, j).Release(1)
		r.storeError(StepClaim, j.id, err)
		return outcome{}
	}
	if !ok {
		laneClaims(rn, j).Release(1)
		return outcome{} // someone else holds it, it is not due, or its attempts were spent
	}
	return r.handle(rn, j, id, opts.LeaseUntil, owner)
}

// handle runs the handler of job j under the claim id, whose lease ends at
// leaseUntil, renewing the lease, and settles the outcome. The claim was
// taken by attempt, or by the add that recorded the update (claim on add),
// as process owner (ProcessClaim.Process; empty for none).
//
// The caller holds a claim token (run.claims). handle waits for a handler
// slot (run.sem) under the claim, its lease renewed, frees the token once
// it has the slot, and frees the slot once the handler returned, before
// the settlement commits: a slot is never held while a store write
// commits, and a claim is never left unrenewed.
func (r *Runner) handle(rn *run, j job, id Identity, leaseUntil time.Time, owner string) outcome {
	if f := r.cfg.Observer.ClaimFunc; f != nil {
		guard(func() { f(id) })
	}

	hctx, hcancel := context.WithCancelCause(rn.ctx)
	defer hcancel(nil)
	at := now()
	l := &lease{id: id, until: leaseUntil, active: true, cancel: hcancel, trace: r.newAttemptTrace(id, owner, at)}
	r.mu.Lock()
	hb := rn.hb
	r.mu.Unlock()
	hb.track(l, owner)
	defer hb.untrack(l)
	// Most handlers return long before the first renewal is due, so the
	// renewals get a goroutine only when it is (a timer until then), and
	// the lease's end a timer of its own only then too (renewLoop), unless
	// it comes first: one timer per attempt rather than two.
	rn.wg.Add(1)
	l.mu.Lock()
	if left := leaseUntil.Sub(at); left <= r.renewEvery() {
		l.watchEndLocked(r, left)
	}
	l.renew = time.AfterFunc(r.renewEvery(), func() { r.renewLoop(rn, l) })
	l.mu.Unlock()

	sem, claims := rn.lane(!j.deadline.IsZero())
	// An update with a deadline waits for a slot only until its deadline.
	actx, acancel := hctx, context.CancelFunc(func() {})
	if !j.deadline.IsZero() {
		actx, acancel = context.WithDeadline(hctx, j.deadline)
	}
	serr := sem.Acquire(actx, 1)
	acancel()
	claims.Release(1)
	stopLease := func() {
		l.mu.Lock()
		l.active = false
		if l.timer != nil {
			l.timer.Stop()
		}
		stopRenew := l.stopRenew
		if l.renew.Stop() {
			rn.wg.Done() // the renewals never started
		}
		l.mu.Unlock()
		if stopRenew != nil {
			stopRenew()
		}
	}
	if serr != nil {
		stopLease()
		if hctx.Err() == nil && !j.deadline.IsZero() {
			return r.expire(rn, l, j, "") // its deadline passed waiting for a slot
		}
		// The lease was lost, or Close gave up, before a slot freed: the
		// handler never ran, and the row is reclaimed after its lease.
		r.attemptUnsettled(rn, l, hctx, "its handler never ran: it lost its lease before a handler slot freed")
		return outcome{}
	}
	if !j.deadline.IsZero() && !now().Before(j.deadline) {
		// Found past its deadline (swept late, or retried late): nobody
		// waits for an answer any more.
		stopLease()
		sem.Release(1)
		return r.expire(rn, l, j, "")
	}

	var herr error
	if j.bad {
		herr = ErrUnparsableBody
	} else {
		u := j.update()
		a := Attempt{Identity: id, lease: l, store: r.store}
		v := &attemptValue{update: u, attempt: a, answer: l.trace.answer}
		ctx, cancel := context.Context(hctx), context.CancelFunc(func() {})
		if !j.deadline.IsZero() {
			ctx, cancel = context.WithDeadline(hctx, j.deadline)
		}
		ctx = transport.WithResultFunc(withAttempt(ctx, v), v.observe)
		herr = v.outcome(r.callHandler(ctx, u, a))
		l.trace.answer.close()
		cancel()
	}

	// The handler returned: nothing a renewal learns from now on changes
	// anything.
	stopLease()
	sem.Release(1)

	if errors.Is(context.Cause(hctx), ErrClosed) {
		// Close gave up on the handler (its drain deadline passed) and
		// cancelled the run, so no settlement could be written now: each
		// would fail on the run's ended context and read as a store error
		// and a lost lease. The row is left as a killed process leaves it,
		// to be taken over (as a crash, with a ProcessStore) once its
		// heartbeat or lease lapses, and run again; a close never gives
		// an update up.
		r.log.Info("intake: attempt cancelled by Close; left unsettled, to run again",
			"update_id", id.UpdateID, "attempt", id.Attempt)
		if f := r.cfg.Observer.FailureFunc; f != nil && herr != nil {
			fl := Failure{Identity: id, Err: herr, Retrying: true}
			guard(func() { f(fl) })
		}
		return outcome{}
	}
	if herr == nil {
		r.answered(rn, j.id)
		if r.strict {
			// In strict chat order the store releases the chat only once
			// the completion is committed, so the line waits for it.
			return outcome{released: r.settle(rn, l, Settlement{State: StateCompleted, At: now()})}
		}
		// The completion commits off the chat's line: the chat's next
		// update may start while it does (this one was handled first).
		// The update stays scheduled until it is settled, so Idle, Close
		// and the sweep all still count it; MaxQueued counts it apart
		// (see fullLocked), and the settlement keeps its id, not its body.
		rn.wg.Add(1)
		uid := j.id
		return outcome{settle: func() {
			defer rn.wg.Done()
			r.settle(rn, l, Settlement{State: StateCompleted, At: now()})
			r.mu.Lock()
			r.unqueueLocked(rn, uid, false)
			r.doneLocked(rn)
			r.mu.Unlock()
		}}
	}
	return r.fail(rn, l, j, herr)
}

// callHandler runs the configured handler, turning a panic into an error.
func (r *Runner) callHandler(ctx context.Context, u Update, a Attempt) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v}
		}
	}()
	if r.cfg.AttemptHandler != nil {
		return r.cfg.AttemptHandler(ctx, u, a)
	}
	return r.cfg.Handler(ctx, u)
}

// leaseDeadline fires when the last confirmed lease ends.
func (r *Runner) leaseDeadline(l *lease) {
	l.mu.Lock()
	if !l.active || now().Before(l.until) {
		l.mu.Unlock() // settled, or a renewal moved the deadline meanwhile
		return
	}
	lost := l.loseLocked(nil)
	l.mu.Unlock()
	if lost {
		r.leaseLost(l.id)
	}
}

// renewEvery is how often a lease is renewed: every quarter of it.
func (r *Runner) renewEvery() time.Duration { return max(r.cfg.LeaseDuration/4, time.Millisecond) }

// renewLoop renews the lease every quarter of it, one renewal at a time,
// from when the first renewal is due until the handler returns (stopLease
// cancels it) or the lease is lost.
func (r *Runner) renewLoop(rn *run, l *lease) {
	defer rn.wg.Done()
	l.mu.Lock()
	if !l.active {
		l.mu.Unlock() // the handler returned as the first renewal fell due
		return
	}
	if l.timer == nil {
		l.watchEndLocked(r, l.until.Sub(now()))
	}
	ctx, cancel := context.WithCancel(rn.ctx)
	l.stopRenew = cancel
	l.mu.Unlock()
	defer cancel()
	leaseFor := r.cfg.LeaseDuration
	t := time.NewTicker(r.renewEvery())
	defer t.Stop()
	for first := true; ; first = false {
		if !first {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
		at := now()
		until := at.Add(leaseFor)
		sctx, cancel := context.WithTimeout(ctx, leaseFor)
		ok, err := r.store.Renew(sctx, l.id, until, at)
		cancel()
		l.mu.Lock()
		if !l.active || l.lost {
			l.mu.Unlock() // a late answer after settlement changes nothing
			return
		}
		switch {
		case err != nil:
			l.mu.Unlock()
			// Keep the last proven deadline: the lease may still be ours.
			r.storeError(StepRenew, l.id.UpdateID, err)
		case ok:
			if until.After(l.until) {
				l.until = until
				l.timer.Reset(until.Sub(now()))
			}
			l.mu.Unlock()
		default:
			lost := l.loseLocked(nil)
			l.mu.Unlock()
			if lost {
				r.leaseLost(l.id)
			}
			return // refused: the lease is someone else's, renewing it again changes nothing
		}
	}
}

func (r *Runner) leaseLost(id Identity) {
	r.log.Info("intake: attempt lost ownership", "update_id", id.UpdateID, "attempt", id.Attempt)
	if f := r.cfg.Observer.LeaseLostFunc; f != nil {
		guard(func() { f(id) })
	}
}

// settle applies s to the attempt and reports whether the store applied it.
// A refusal or a store error means the attempt lost the row.
func (r *Runner) settle(rn *run, l *lease, s Settlement) bool {
	return r.settleObserved(rn, l, s, true)
}

// settleObserved is settle, reporting the settlement to
// Observer.SettleFunc only when observe is set.
func (r *Runner) settleObserved(rn *run, l *lease, s Settlement, observe bool) bool {
	ctx, cancel := context.WithTimeout(rn.ctx, r.cfg.LeaseDuration)
	defer cancel()
	lostBefore := l.isLost()
	// The attempt's record rides on the settlement, one write for both;
	// a refused settlement records nothing, and attemptSettled records
	// the refusal instead.
	s.Attempt = r.settlementRecord(l.trace, s.State, s.Error, s.At)
	ok, err := r.store.Settle(ctx, l.id, s)
	if err != nil {
		r.storeError(StepSettle, l.id.UpdateID, err)
	}
	if ok && s.Attempt != nil {
		l.trace.recorded = true
	}
	r.attemptSettled(rn, l, ok, lostBefore, s.State, s.Error)
	if ok {
		if f := r.cfg.Observer.SettleFunc; f != nil && observe {
			guard(func() { f(l.id, s.State) })
		}
		return true
	}
	r.ownershipLostAfter(l, err)
	return false
}

// ownershipLostAfter records that a settlement or exhaustion was refused.
func (r *Runner) ownershipLostAfter(l *lease, err error) {
	l.mu.Lock()
	lost := l.loseLocked(err)
	l.mu.Unlock()
	if lost {
		r.leaseLost(l.id)
	}
}

// fail settles a failed attempt: a retry, an exhaustion, or an abandonment.
func (r *Runner) fail(rn *run, l *lease, j job, herr error) outcome {
	d := decide(r.policy, herr, l.id.Attempt, r.cfg.MaxAttempts)
	if !j.deadline.IsZero() && d.retry {
		// A retry only while the deadline allows: one due at or after it
		// would answer nobody.
		if at := now(); !at.Add(d.delay).Before(j.deadline) {
			r.log.Info("intake: attempt failed; no retry before its deadline", "update_id", l.id.UpdateID,
				"attempt", l.id.Attempt, "kind", j.kind, "err", errorText(herr))
			if f := r.cfg.Observer.FailureFunc; f != nil {
				fl := Failure{Identity: l.id, Err: herr, Expiring: true}
				guard(func() { f(fl) })
			}
			return r.expire(rn, l, j, errorText(herr))
		}
	}
	if d.guarded {
		r.log.Warn("intake: retry policy panicked or returned a negative delay; using the default backoff",
			"update_id", l.id.UpdateID, "attempt", l.id.Attempt)
	}
	msg := r.cfg.Redactor.Redact(errorText(herr))
	if f := botapi.Classify(herr); !d.retry && f.Reason == botapi.ReasonUnknown && f.Evidence == botapi.EvidenceTransport {
		// Say it where the operator reads the dead letter.
		msg = "outcome unknown, not repeated: " + msg
	}
	at := now()
	retrying := d.retry
	var res outcome
	switch {
	case !d.retry && r.keep:
		r.markEnding(rn, j.id)
		ctx, cancel := context.WithTimeout(rn.ctx, r.cfg.LeaseDuration)
		lostBefore := l.isLost()
		ok, err := r.store.Exhaust(ctx, l.id, at, msg)
		cancel()
		if err != nil {
			r.storeError(StepSettle, l.id.UpdateID, err)
		}
		r.attemptSettled(rn, l, ok, lostBefore, StateAbandoned, msg)
		if ok {
			res.released = true
			res.exhaustion = &Exhaustion{Identity: l.id, Body: j.body, ExhaustedAt: at, Error: msg}
			if f := r.cfg.Observer.ExhaustFunc; f != nil {
				e := *res.exhaustion
				guard(func() { f(e) })
			}
		} else {
			r.ownershipLostAfter(l, err)
			retrying = true // the row is still processing: a reclaim will run it
		}
	case !d.retry:
		r.markEnding(rn, j.id)
		res.released = r.settle(rn, l, Settlement{State: StateAbandoned, At: at, Error: msg})
		retrying = !res.released
	default:
		// Due on a whole millisecond, the stores' precision, never before
		// the delay: the in-process retry then finds the row due.
		retryAt := at.Add(d.delay + time.Millisecond - 1).Truncate(time.Millisecond)
		if r.settle(rn, l, Settlement{State: StateFailed, At: at, RetryAt: retryAt, Error: msg}) {
			res.retryAt = retryAt
		}
	}
	r.log.Info("intake: attempt failed", "update_id", l.id.UpdateID, "attempt", l.id.Attempt,
		"retrying", retrying, "err", msg)
	if f := r.cfg.Observer.FailureFunc; f != nil {
		fl := Failure{Identity: l.id, Err: herr, Retrying: retrying}
		guard(func() { f(fl) })
	}
	return res
}
