package intake

// Lines behind: a chat's updates left in the store for lack of room.
//
// Once MaxQueued is reached, an accepted update is recorded but not
// scheduled: the store keeps it until a sweep lists it. A later update of
// the same chat, accepted once room has freed, must not be scheduled
// before it, or the chat runs out of order. So the update's line is marked
// behind, and while it is, the accepted updates of that line are left to
// the sweep too, which lists a line's due rows in order and schedules them
// in that order.
//
// A line stops being behind when a sweep that began after its latest mark
// lists every due row (its page not full): every update the line left in
// the store before that sweep began is then scheduled, or was scheduled
// already. Marks are numbered so that a sweep clears only the marks made
// before it began; a line marked while the sweep ran stays behind, and
// another sweep is asked for at once. The sweeps of a run that has lines
// behind skip the pending grace, so that they list this process's own
// rows.
//
// A run remembers at most MaxQueued lines; past that, every line is
// behind until a sweep clears the lot.

// markBehindLocked notes that an update of line key was left in the store
// unscheduled.
func (r *Runner) markBehindLocked(rn *run, key string) {
	rn.marks++
	if rn.allBehind != 0 {
		rn.allBehind = rn.marks
		return
	}
	if _, ok := rn.behind[key]; !ok && len(rn.behind) >= r.cfg.MaxQueued {
		clear(rn.behind)
		rn.allBehind = rn.marks
		return
	}
	rn.behind[key] = rn.marks
}

// isBehindLocked reports whether line key has updates left in the store
// that no sweep has scheduled yet.
func (rn *run) isBehindLocked(key string) bool {
	if rn.allBehind != 0 {
		return true
	}
	_, ok := rn.behind[key]
	return ok
}

// anyBehindLocked reports whether some line is behind.
func (rn *run) anyBehindLocked() bool { return rn.allBehind != 0 || len(rn.behind) > 0 }

// scheduledLocked reports whether update id is scheduled here: queued on a
// line, or its exhaustion being delivered.
func (rn *run) scheduledLocked(id int64) bool {
	_, queued := rn.queued[id]
	_, delivering := rn.delivering[id]
	return queued || delivering
}

// scheduleAcceptedLocked schedules the update an Accept just recorded,
// unless its line is behind: then the update is left to the sweep too,
// after the line's earlier ones.
func (r *Runner) scheduleAcceptedLocked(rn *run, j job, key string) {
	if !rn.isBehindLocked(key) {
		r.scheduleLocked(rn, j, key)
		return
	}
	if !rn.scheduledLocked(j.id) { // a sweep may have scheduled it already
		r.markBehindLocked(rn, key)
	}
}

// caughtUpLocked clears the marks up to mark, made before a sweep that
// listed every due row began, and asks for another sweep at once when
// lines marked since are still behind.
func (r *Runner) caughtUpLocked(rn *run, mark uint64) {
	for key, m := range rn.behind {
		if m <= mark {
			delete(rn.behind, key)
		}
	}
	if rn.allBehind <= mark {
		rn.allBehind = 0
	}
	if rn.anyBehindLocked() && !rn.draining {
		select {
		case rn.kick <- struct{}{}:
		default:
		}
	}
}
