package intake

// Rows requeued while their update is still queued here, or while their
// exhaustion is being delivered.
//
// [AdminStore.Requeue] takes only failed and abandoned rows. A row it
// makes pending again may still have its update queued in this process:
// the update waits on its line, or for its retry, and will claim the row;
// or an attempt of this process just settled the row for good, and its
// line has not yet unqueued the update (the attempt's observers run, or
// the line waits for the runner's lock). A sweep that lists the row skips
// it either way, as it skips every update queued here. In the second case
// nothing would schedule the update again, once its line unqueues it,
// before the next periodic sweep, up to a SweepInterval later, and Idle
// would report the runner idle meanwhile.
//
// So an attempt marks its update ending just before it settles the row
// for good: abandoned, exhausted or expired (markEnding). A sweep that
// lists the row while the mark lasts keeps the update as listed with the
// mark (relistedLocked), and the line that unqueues the update schedules
// it again in the same critical section (runLine), as an accepted update
// is scheduled: on its line, unless the line is behind or no room is
// left (then a catch-up sweep lists it). Scheduled so, it leaves Idle no
// moment to return in between.
//
// The same holds for an exhaustion being delivered: a sweep lists its row
// only once it was requeued (an exhaustion is not due to be claimed), and
// skips it while the delivery runs. The delivery's end schedules it again
// in the critical section that ends the delivery.
//
// An attempt that fails with a retry marks nothing: its retry claims the
// requeued row when it is due (the update stays queued on its line
// meanwhile or, under Config.RetryOutOfOrder, is scheduled again then). A
// completed row cannot be requeued. A mark lasts until its update is
// unqueued, and a delivery's listing until the delivery ends, so there
// are at most as many as queued and delivering updates. A sweep lists
// a marked row only once it was requeued, or once the attempt's lease
// lapsed before the settlement (then the update scheduled again costs a
// claim, which the store refuses unless the row is due). Either way one
// listing schedules the update once more, and asks for no sweep.

// retake is an update to schedule again, on line key.
type retake struct {
	j   job
	key string
}

// markEnding marks update id ending, when it is queued: its attempt is
// about to settle its row for good, and no job of it claims the row again.
// The mark comes before the settlement's write, so that a sweep that lists
// the row requeued once the write committed finds it.
func (r *Runner) markEnding(rn *run, id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := rn.queued[id]; !ok {
		return
	}
	if _, ok := rn.ending[id]; !ok {
		rn.ending[id] = nil
	}
}

// relistedLocked keeps job j, of line key, as a sweep listed it, when its
// update is marked ending (see markEnding) or its exhaustion is being
// delivered: the sweep cannot schedule it meanwhile, and its line
// schedules it again as it unqueues it (unqueueLocked returns it), or the
// delivery as it ends (deliveredLocked). It reports whether j was kept.
func (r *Runner) relistedLocked(rn *run, j job, key string) bool {
	_, ending := rn.ending[j.id]
	_, delivering := rn.delivering[j.id]
	if !ending && !delivering {
		return false
	}
	rn.ending[j.id] = &retake{j: j, key: key}
	return true
}

// deliveredLocked ends the delivery of update id's exhaustion, and
// schedules the update again when a sweep listed its row requeued
// meanwhile (see relistedLocked).
func (r *Runner) deliveredLocked(rn *run, id int64) {
	delete(rn.delivering, id)
	if again := rn.ending[id]; again != nil {
		delete(rn.ending, id)
		r.scheduleAcceptedLocked(rn, again.j, again.key)
	}
}
