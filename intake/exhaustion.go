package intake

import "context"

// scheduleExhaustionLocked starts the delivery of e unless one runs for it
// already or the lifecycle is draining. fromAttempt marks an exhaustion
// recorded by an attempt of this runner, which takes over the attempt's
// place in MaxQueued; one found by a sweep needs room of its own. It
// reports whether a delivery was newly scheduled.
func (r *Runner) scheduleExhaustionLocked(rn *run, e Exhaustion, fromAttempt bool) bool {
	if r.cfg.ExhaustionHandler == nil || rn.draining {
		return false
	}
	if _, ok := rn.delivering[e.UpdateID]; ok {
		return false
	}
	if !fromAttempt && len(rn.queued)+len(rn.delivering) >= r.cfg.MaxQueued {
		rn.backlog = true
		return false
	}
	rn.delivering[e.UpdateID] = struct{}{}
	r.idleLocked(rn)
	rn.wg.Add(1)
	go r.deliver(rn, e)
	return true
}

// deliver hands e to the exhaustion handler under a slot of the global
// semaphore and acknowledges it when the handler returns nil. An
// exhaustion that is not acknowledged stays due for a later sweep.
func (r *Runner) deliver(rn *run, e Exhaustion) {
	defer rn.wg.Done()
	defer func() {
		r.mu.Lock()
		r.deliveredLocked(rn, e.UpdateID)
		r.doneLocked(rn)
		r.mu.Unlock()
	}()
	r.mu.Lock()
	draining := rn.draining
	r.mu.Unlock()
	if draining || rn.sem.Acquire(rn.ctx, 1) != nil {
		return
	}
	defer rn.sem.Release(1)

	if err := r.callExhaustionHandler(rn.ctx, e); err != nil {
		r.log.Warn("intake: exhaustion handler failed", "update_id", e.UpdateID, "attempt", e.Attempt, "err", errorText(err))
		if f := r.cfg.Observer.ExhaustionFailureFunc; f != nil {
			guard(func() { f(e, err) })
		}
		return
	}
	ctx, cancel := context.WithTimeout(rn.ctx, r.cfg.LeaseDuration)
	defer cancel()
	ok, err := r.store.AcknowledgeExhaustion(ctx, e.Identity, now())
	if err != nil {
		r.storeError(StepSettle, e.UpdateID, err)
		return
	}
	if ok {
		if f := r.cfg.Observer.AcknowledgeFunc; f != nil {
			guard(func() { f(e.Identity) })
		}
	}
}

func (r *Runner) callExhaustionHandler(ctx context.Context, e Exhaustion) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &PanicError{Value: v}
		}
	}()
	return r.cfg.ExhaustionHandler(ctx, e)
}
