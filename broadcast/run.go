package broadcast

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/throttle"
	"golang.org/x/time/rate"
)

// State says where a broadcast stands in a [Report].
type State string

// The states of a [Report].
const (
	// StateRunning: a progress report of a run in progress.
	StateRunning State = "running"
	// StateFinished: every recipient has an outcome.
	StateFinished State = "finished"
	// StateHalted: a verdict halted the run (Report.Halt says which);
	// run the same name again once the cause is fixed.
	StateHalted State = "halted"
	// StateStopped: the caller's context ended the run.
	StateStopped State = "stopped"
	// StateDryRun: counts only; nothing was written or sent.
	StateDryRun State = "dry-run"
)

// Report counts a broadcast's recipients by outcome. Total = Delivered +
// Unreachable + Failed + Uncertain + Pending.
type Report struct {
	Name  string
	State State
	Total int // audience size after de-duplication

	Delivered   int
	Unreachable int
	Failed      int
	Uncertain   int
	Pending     int
	Migrated    int // recipients whose chat moved, sent to the new id (any outcome)

	Halt *Verdict // the verdict that halted the run, when State is StateHalted
}

// file names inside the broadcast's state directory.
const (
	snapshotFile = "audience.json"
	journalFile  = "journal.ndjson"
	lockFile     = "lock"
)

// Run sends a broadcast, or resumes it by name, and returns how it ended.
//
// On the first run it calls Config.AudienceFunc, validates and de-duplicates
// the recipients and writes them as a snapshot; later runs use the snapshot.
// Every recipient gets an intent line in the journal before its first send
// and an outcome line after; a recipient found with an intent and no
// outcome becomes uncertain and is never sent again automatically. Up to
// Config.Concurrency sends are in flight under one token bucket of
// Config.Rate; a retry_after pauses every sender.
//
// Run holds an exclusive kernel lock on Dir/Name/lock for its whole
// duration; a second Run of the same name fails with [ErrLocked]. The lock
// is checked before every send and every journal write; a runner that lost
// it ends with [ErrLockLost] and writes nothing more.
//
// Cancelling ctx stops the run: no new send starts, sends in flight finish
// and are recorded, waiting recipients are released, and the report's State
// is [StateStopped] (the error is nil). An error is returned for invalid
// options, a lost lock, an I/O failure or an invalid verdict; the journal
// then keeps the intents of unfinished recipients, so the next run records
// them uncertain.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(c.Dir, c.Name)
	if c.DryRun {
		return dryRun(ctx, &c, dir)
	}
	_, statErr := os.Stat(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("broadcast: state dir: %w", err)
	}
	if errors.Is(statErr, os.ErrNotExist) {
		if err := syncDir(c.Dir); err != nil {
			return nil, err
		}
	}
	lock, err := acquireLock(filepath.Join(dir, lockFile))
	if err != nil {
		return nil, err
	}
	defer lock.release()

	audience, err := loadAudience(ctx, &c, dir, lock.check)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, journalFile)
	res, err := replayFile(path, len(audience))
	if err != nil {
		return nil, err
	}
	if err := settleDamage(&c, path, &res, lock.check); err != nil {
		return nil, err
	}
	j, err := openJournal(path, res.intactEnd, lock.check)
	if err != nil {
		return nil, err
	}
	defer j.close()

	r := &runner{cfg: &c, lock: lock, journal: j, audience: audience, states: res.states,
		migrated: res.migrated, limiter: rate.NewLimiter(rate.Limit(c.Rate), c.burst())}
	// Crash recovery: an intent without an outcome may have been delivered.
	for i, s := range r.states {
		if s == stateSending {
			if err := j.append(entry{I: i, O: string(OutcomeUncertain), R: "interrupted"}); err != nil {
				return nil, err
			}
			r.states[i] = stateUncertain
		}
	}
	return r.run(ctx)
}

// loadAudience reads the snapshot, or computes, validates and writes it.
// A snapshot that exists must carry c.Fingerprint (when both are set). On
// the first run the empty journal is created before the snapshot is
// published, so a snapshot without a journal always means damage.
// checkLock is nil for a dry run, which writes nothing.
func loadAudience(ctx context.Context, c *Config, dir string, checkLock func() error) ([]Recipient, error) {
	path := filepath.Join(dir, snapshotFile)
	snap, ok, err := readSnapshot(path)
	if err != nil {
		return nil, err
	}
	if ok {
		if c.Fingerprint != "" && snap.Fingerprint != "" && c.Fingerprint != snap.Fingerprint {
			return nil, fmt.Errorf("%w (it started with %.20s, this run has %.20s); resume with the same message, or start a new --name", ErrMessageChanged, snap.Fingerprint, c.Fingerprint)
		}
		return snap.Recipients, nil
	}
	if c.AudienceFunc == nil {
		return nil, errors.New("broadcast: Config.AudienceFunc is required on the first run")
	}
	rs, err := c.AudienceFunc(ctx)
	if err != nil {
		return nil, fmt.Errorf("broadcast: audience: %w", err)
	}
	if rs, err = dedupe(rs); err != nil {
		return nil, err
	}
	if checkLock == nil { // dry run: nothing is written
		return rs, nil
	}
	if err := createJournal(filepath.Join(dir, journalFile)); err != nil {
		return nil, err
	}
	if err := writeSnapshot(path, snapshot{Fingerprint: c.Fingerprint, Recipients: rs}, checkLock); err != nil {
		return nil, err
	}
	return rs, nil
}

// createJournal creates the empty journal of a broadcast that has no
// snapshot yet, and its mark, durably. A journal left by a crash before the snapshot was
// published is empty and kept; one with lines is refused (they would be
// about an audience nobody kept).
func createJournal(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("broadcast: create journal: %w", err)
	}
	info, err := f.Stat()
	f.Close()
	if err != nil {
		return fmt.Errorf("broadcast: create journal: %w", err)
	}
	if info.Size() > 0 {
		return fmt.Errorf("%w: %s has lines but there is no audience snapshot; move it away to start afresh", ErrJournalDamaged, path)
	}
	if err := writeMark(filepath.Join(filepath.Dir(path), markFile), 0, true); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// replayFile replays the journal at path, after reading its mark (first, so
// that a runner appending meanwhile never makes the mark look ahead of the
// journal). A missing journal replays as empty, with res.missing set.
func replayFile(path string, total int) (replayResult, error) {
	reached, markOK, markErr := readMark(filepath.Join(filepath.Dir(path), markFile))
	if markErr != nil && !errors.Is(markErr, errBadMark) {
		return replayResult{}, markErr
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		res := newReplayResult(total)
		res.missing = true
		return res, nil
	}
	if err != nil {
		return replayResult{}, fmt.Errorf("broadcast: open journal: %w", err)
	}
	defer f.Close()
	res, err := replay(f, total)
	res.markMissing, res.markBad, res.reached = !markOK, markErr != nil, reached
	return res, err
}

// settleDamage refuses a damaged journal with a [*DamageError], or, with
// Config.RepairUncertain, records every recipient without an outcome
// uncertain: in a repaired journal (checkLock set), or only in res for a
// dry run (checkLock nil).
func settleDamage(c *Config, path string, res *replayResult, checkLock func() error) error {
	d := res.damage()
	if d == nil {
		return nil
	}
	if !c.RepairUncertain {
		return &DamageError{Journal: path, Damage: *d}
	}
	if checkLock != nil {
		return repairJournal(path, res, checkLock)
	}
	for i, s := range res.states {
		if !s.final() {
			res.states[i] = stateUncertain
		}
	}
	return nil
}

// dryRun counts without locking, writing or sending. A stale intent counts
// as uncertain, as the next real run will record it.
func dryRun(ctx context.Context, c *Config, dir string) (*Report, error) {
	_, statErr := os.Stat(filepath.Join(dir, snapshotFile))
	audience, err := loadAudience(ctx, c, dir, nil)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, journalFile)
	res, err := replayFile(path, len(audience))
	if err != nil {
		return nil, err
	}
	if statErr != nil { // no snapshot yet: no journal expected
		res = newReplayResult(len(audience))
	}
	if err := settleDamage(c, path, &res, nil); err != nil {
		return nil, err
	}
	for i, s := range res.states {
		if s == stateSending {
			res.states[i] = stateUncertain
		}
	}
	r := &runner{cfg: c, audience: audience, states: res.states, migrated: res.migrated}
	rep := r.report(StateDryRun)
	r.progress(rep)
	return &rep, nil
}

// pipelineFactor × Config.Concurrency bounds the recipients between
// dispatch and their outcome being durable: the window's, and those
// writing their outcome after leaving it (see runner.run).
const pipelineFactor = 2

// runner is the state of one run.
type runner struct {
	cfg      *Config
	lock     *fileLock
	journal  *journal
	audience []Recipient
	limiter  *rate.Limiter

	mu         sync.Mutex
	states     []state
	migrated   map[int]int64
	pauseUntil time.Time
	halt       *Verdict
	fatal      error
	lastReport time.Time
	cancel     context.CancelFunc

	window chan struct{} // one token per send in flight (Config.Concurrency)

	progressMu sync.Mutex
}

// report counts the states; the caller holds r.mu (or runs alone).
func (r *runner) report(s State) Report {
	rep := Report{Name: r.cfg.Name, State: s, Total: len(r.audience), Migrated: len(r.migrated), Halt: r.halt}
	for _, st := range r.states {
		switch st {
		case stateDelivered:
			rep.Delivered++
		case stateUnreachable:
			rep.Unreachable++
		case stateFailed:
			rep.Failed++
		case stateUncertain:
			rep.Uncertain++
		default:
			rep.Pending++
		}
	}
	return rep
}

// progress hands rep to Config.ProgressFunc, one call at a time, recovering
// a panic.
func (r *runner) progress(rep Report) {
	if r.cfg.ProgressFunc == nil {
		return
	}
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	r.callProgress(rep)
}

// callProgress calls Config.ProgressFunc, recovering a panic in it.
func (r *runner) callProgress(rep Report) {
	defer func() { _ = recover() }()
	r.cfg.ProgressFunc(rep)
}

func (r *runner) run(ctx context.Context) (*Report, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.cancel = cancel

	r.mu.Lock()
	r.lastReport = time.Now()
	start := r.report(StateRunning)
	r.mu.Unlock()
	r.progress(start)

	// The dispatcher takes each recipient's place in the window, in
	// audience order, and the recipient's goroutine gives it back once its
	// send has a verdict: at most Concurrency sends are in flight, and those
	// holding a place but not yet sending wait for a token, so the bucket
	// always has waiters. The outcome is written after the place is given
	// back, so fsyncs never keep a place idle; pipeline bounds the
	// goroutines still writing one.
	pipeline := make(chan struct{}, pipelineFactor*r.cfg.Concurrency)
	r.window = make(chan struct{}, r.cfg.Concurrency)
	var wg sync.WaitGroup
dispatch:
	for i := range r.audience {
		r.mu.Lock()
		settled := r.states[i] != statePending
		r.mu.Unlock()
		if settled {
			continue
		}
		select {
		case pipeline <- struct{}{}:
		case <-runCtx.Done():
			break dispatch
		}
		select {
		case r.window <- struct{}{}:
		case <-runCtx.Done():
			<-pipeline
			break dispatch
		}
		if runCtx.Err() != nil {
			<-r.window
			<-pipeline
			break
		}
		wg.Go(func() {
			defer func() { <-pipeline }()
			r.deliver(runCtx, i)
		})
	}
	wg.Wait()

	r.mu.Lock()
	fatal := r.fatal
	end := StateFinished
	switch {
	case r.halt != nil:
		end = StateHalted
	case r.report(StateRunning).Pending > 0:
		end = StateStopped
	}
	rep := r.report(end)
	r.mu.Unlock()
	if fatal != nil {
		return nil, fatal
	}
	r.progress(rep)
	return &rep, nil
}

// fail records a fatal error and stops the run.
func (r *runner) fail(err error) {
	r.mu.Lock()
	if r.fatal == nil {
		r.fatal = err
	}
	r.mu.Unlock()
	r.cancel()
}

// halted records the first halting verdict and stops the run.
func (r *runner) halted(v Verdict) {
	r.mu.Lock()
	if r.halt == nil {
		r.halt = &v
	}
	r.mu.Unlock()
	r.cancel()
}

// stateOutcome is the journal outcome of each final state.
var stateOutcome = [...]Outcome{stateDelivered: OutcomeDelivered, stateUnreachable: OutcomeUnreachable,
	stateFailed: OutcomeFailed, stateUncertain: OutcomeUncertain}

// settle journals the outcome of recipient i and records it.
func (r *runner) settle(i int, st state, reason string, migratedTo int64) {
	if err := r.journal.append(entry{I: i, O: string(stateOutcome[st]), R: reason, M: migratedTo}); err != nil {
		r.fail(err)
		return
	}
	r.mu.Lock()
	r.states[i] = st
	if migratedTo != 0 {
		r.migrated[i] = migratedTo
	}
	due := false
	if now := time.Now(); now.Sub(r.lastReport) >= r.cfg.ProgressInterval {
		r.lastReport = now
		due = true
	}
	r.mu.Unlock()
	if due {
		r.progressNow()
	}
}

// progressNow reports the current counts. Holding progressMu while counting
// keeps successive reports monotonic.
func (r *runner) progressNow() {
	if r.cfg.ProgressFunc == nil {
		return
	}
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	r.mu.Lock()
	rep := r.report(StateRunning)
	r.mu.Unlock()
	r.callProgress(rep)
}

// release journals that recipient i goes back to pending.
func (r *runner) release(i int) {
	if err := r.journal.append(entry{I: i, S: markReleased}); err != nil {
		r.fail(err)
	}
}

// deliver runs the attempts and the outcome of recipient i, holding the
// place in the window the dispatcher took for it. Each attempt waits for a
// token; the intent is written (durably) after the first token, just
// before the first send, so a recipient still waiting for its turn when the
// run stops or crashes stays plainly pending. The place is given back once
// the verdict is known and a halt it causes is in effect (so no further
// send starts on a halting verdict), before the outcome is written.
func (r *runner) deliver(ctx context.Context, i int) {
	held := true
	free := func() { // gives the place in the window back, once
		if held {
			held = false
			<-r.window
		}
	}
	defer free()
	intent := false // the intent line is durable
	stop := func() {
		free()
		if intent {
			r.release(i)
		}
	}
	target := r.audience[i]
	var migratedTo int64
	maxAttempts := r.cfg.MaxAttempts
	for attempt := 1; ; attempt++ {
		if err := r.pace(ctx); err != nil {
			stop()
			return
		}
		permit, err := r.turn(ctx, target)
		if err != nil {
			stop()
			return
		}
		if !intent {
			if err := r.journal.append(entry{I: i, S: markSending}); err != nil {
				permit.Cancel()
				r.fail(err)
				return
			}
			intent = true
		}
		if err := r.lock.check(); err != nil {
			permit.Cancel()
			r.fail(err)
			return
		}
		if ctx.Err() != nil {
			permit.Cancel()
			stop()
			return
		}
		err = r.send(ctx, target)
		finishTurn(permit, err, r.cfg.ClassifyFunc)
		if err == nil {
			free()
			r.settle(i, stateDelivered, "", migratedTo)
			return
		}
		v := r.cfg.ClassifyFunc(err)
		if verr := v.Validate(); verr != nil {
			r.fail(fmt.Errorf("broadcast: recipient %d: %w", i, verr))
			return
		}
		switch v.Kind {
		case KindAmbiguous:
			r.halted(v)
			free()
			r.settle(i, stateUncertain, v.Reason, migratedTo)
			return
		case KindPermanent:
			switch {
			case v.Stop:
				r.halted(v)
				free()
				r.release(i)
			case v.Unreachable:
				free()
				r.settle(i, stateUnreachable, v.Reason, migratedTo)
			default:
				free()
				r.settle(i, stateFailed, v.Reason, migratedTo)
			}
			return
		case KindMigrated:
			if migratedTo != 0 {
				free()
				r.settle(i, stateFailed, "migrated-twice", migratedTo)
				return
			}
			migratedTo = v.MigrateTo
			target = ChatID(v.MigrateTo)
			maxAttempts++ // the resend to the new chat is one more try
			continue
		case KindPauseAll:
			if v.Pause > r.cfg.MaxRetryDelay {
				r.halted(v)
				stop()
				return
			}
			r.pauseAll(v.Pause)
		}
		if attempt >= maxAttempts {
			free()
			r.settle(i, stateFailed, v.Reason, migratedTo)
			return
		}
		if v.Kind == KindTransient {
			if err := backoff.Sleep(ctx, r.cfg.backoff(attempt)); err != nil {
				stop()
				return
			}
		}
	}
}

// send calls SendFunc with a context that is not cancelled by a stop or a
// halt (the send in flight finishes and is recorded) but carries the
// SendTimeout deadline.
func (r *runner) send(ctx context.Context, target Recipient) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.SendTimeout)
	defer cancel()
	return r.cfg.SendFunc(sctx, target)
}

// turn waits for the send's turn in Config.Limiter, when one is shared;
// a refusal (the limiter could not grant it within its MaxWait) is waited
// out and asked again. The permit is nil without a limiter.
func (r *runner) turn(ctx context.Context, target Recipient) (*throttle.Permit, error) {
	if r.cfg.Limiter == nil {
		return nil, nil
	}
	key := target.ID
	if target.Username != "" {
		key = throttle.UsernameKey(target.Username)
	}
	for {
		p, err := r.cfg.Limiter.Wait(ctx, "sendMessage", key)
		var werr *throttle.WaitError
		if !errors.As(err, &werr) {
			return p, err
		}
		if err := backoff.Sleep(ctx, werr.RetryAfter); err != nil {
			return nil, err
		}
	}
}

// finishTurn tells the shared limiter how a send ended: Telegram's 429
// pauses what it must, a send that never left does not count, anything
// else counts as sent now.
func finishTurn(p *throttle.Permit, err error, classify func(error) Verdict) {
	if p == nil {
		return
	}
	var nd interface{ NotDispatched() bool }
	switch {
	case err == nil:
		p.Done()
	case errors.As(err, &nd) && nd.NotDispatched():
		p.Cancel()
	default:
		if v := classify(err); v.Kind == KindPauseAll {
			p.Limited(v.Pause)
		} else {
			p.Done()
		}
	}
}

// pauseAll makes every sender wait d from now.
func (r *runner) pauseAll(d time.Duration) {
	r.mu.Lock()
	if until := time.Now().Add(d); until.After(r.pauseUntil) {
		r.pauseUntil = until
	}
	r.mu.Unlock()
}

// pace waits for a global pause to end and for a token of the rate limiter.
func (r *runner) pace(ctx context.Context) error {
	for {
		r.mu.Lock()
		wait := time.Until(r.pauseUntil)
		r.mu.Unlock()
		if wait > 0 {
			if err := backoff.Sleep(ctx, wait); err != nil {
				return err
			}
			continue
		}
		if err := r.limiter.Wait(ctx); err != nil {
			return err
		}
		r.mu.Lock()
		paused := time.Now().Before(r.pauseUntil)
		r.mu.Unlock()
		if !paused {
			return nil
		}
	}
}
