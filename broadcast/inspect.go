package broadcast

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// ErrNotFound is returned (wrapped) by [Inspect] when the broadcast has no
// audience snapshot, that is, when no run of it got as far as starting.
var ErrNotFound = errors.New("broadcast: no such broadcast")

// Status is what [Inspect] reads from a broadcast's files: the counts, and
// the recipients an operator has to look at, each list in audience order.
//
// Every list is bounded by the audience (at most [MaxRecipients]
// recipients, the lists together at most Report.Total): Inspect returns all
// of them, so that none is hidden from the operator who must check it by
// hand. A Status is a plain value; it is not updated after Inspect returns.
type Status struct {
	// Report holds the counts, the same numbers a dry run [Run] gives:
	// State is [StateDryRun], Halt is nil, and a recipient with an intent
	// and no outcome counts as uncertain.
	Report

	// Running reports whether a runner held the broadcast's lock when
	// Inspect probed it. The answer may be stale by the time it is read: a
	// runner may start or end at any moment.
	Running bool

	// Uncertain lists the recipients that may or may not have the message
	// (Report.Uncertain of them): recorded uncertain, or with an intent and
	// no outcome. They are never sent again automatically; check them by
	// hand.
	Uncertain []Recipient
	// Failed lists the recipients recorded failed (Report.Failed of them).
	Failed []Recipient
	// Unreachable lists the recipients recorded unreachable
	// (Report.Unreachable of them).
	Unreachable []Recipient
	// Intents lists the recipients with an intent and no outcome, also
	// counted and listed as uncertain. While Running they are most likely
	// sends in flight; otherwise a run ended between their send and its
	// outcome, and the next run records them uncertain.
	Intents []Recipient
	// Migrated lists the recipients whose chat moved to a new id, as the
	// journal records it with their outcome (Report.Migrated of them).
	Migrated []MovedChat
	// Damage, when not nil, says what is wrong with the journal; [Run]
	// refuses to resume until Config.RepairUncertain is chosen. The counts
	// and lists come from the journal's intact lines.
	Damage *Damage
}

// MovedChat is one recipient whose chat moved (a group upgraded to a
// supergroup): the message was sent to To instead, with Outcome.
type MovedChat struct {
	From    Recipient // the recipient as the audience lists it
	To      int64     // the chat id the message went to
	Outcome Outcome   // that send's recorded outcome
}

// Inspect reads the broadcast name in dir (the Config.Dir and Config.Name of
// its runs) without taking its lock and without creating, writing or
// removing any file, so it may run while the broadcast runs. It replays the
// snapshot and the journal as [Run] does (a journal being appended to is
// read up to its last whole line) and probes the lock: a non-blocking shared
// flock on the existing lock file, released at once. A runner starting in
// that same instant fails with [ErrLocked] and may simply be started again;
// a runner already holding the lock is not disturbed.
//
// A name that [ValidName] refuses is [ErrInvalidName]; a broadcast without an
// audience snapshot is [ErrNotFound]. Inspect is safe for concurrent use.
func Inspect(dir, name string) (*Status, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	bdir := filepath.Join(dir, name)
	snap, ok, err := readSnapshot(filepath.Join(bdir, snapshotFile))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s in %s", ErrNotFound, name, dir)
	}
	running, err := probeLock(filepath.Join(bdir, lockFile))
	if err != nil {
		return nil, err
	}
	audience := snap.Recipients
	res, err := replayFile(filepath.Join(bdir, journalFile), len(audience))
	if err != nil {
		return nil, err
	}
	st := &Status{Running: running, Damage: res.damage()}
	for i, s := range res.states {
		r := audience[i]
		switch s {
		case stateSending:
			st.Intents = append(st.Intents, r)
			st.Uncertain = append(st.Uncertain, r)
			res.states[i] = stateUncertain // as a dry run counts it
		case stateUncertain:
			st.Uncertain = append(st.Uncertain, r)
		case stateFailed:
			st.Failed = append(st.Failed, r)
		case stateUnreachable:
			st.Unreachable = append(st.Unreachable, r)
		}
		if to, ok := res.migrated[i]; ok {
			st.Migrated = append(st.Migrated, MovedChat{From: r, To: to, Outcome: s.outcome()})
		}
	}
	r := &runner{cfg: &Config{Name: name}, audience: audience, states: res.states, migrated: res.migrated}
	st.Report = r.report(StateDryRun)
	return st, nil
}

// outcome names a final state; it is empty for pending and sending.
func (s state) outcome() Outcome {
	for o, st := range outcomeState {
		if st == s {
			return Outcome(o)
		}
	}
	return ""
}

// probeLock reports whether a runner holds the lock at path, without
// creating the file: a missing lock file means no runner. It takes a
// non-blocking shared flock and drops it at once.
func probeLock(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("broadcast: open lock: %w", err)
	}
	defer f.Close() // closing drops the shared lock, if taken
	return tryShared(f, path)
}
