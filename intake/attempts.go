package intake

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Attempt history: every attempt of an update is recorded when it ends, with
// the app's own answer, so an operator can see why an update failed on each
// attempt. It is part of the [AdminStore] capability; the runner records
// through it when the store has it.

// AttemptOutcome is how one attempt of an update ended, as an
// [AttemptRecord] keeps it.
type AttemptOutcome string

// The attempt outcomes. Stores persist these exact strings.
const (
	// AttemptCompleted: the handler succeeded and the completion was
	// settled.
	AttemptCompleted AttemptOutcome = "completed"
	// AttemptFailed: the handler failed and the failure was settled (a
	// retry scheduled, or the update given up: abandoned, exhausted or
	// expired).
	AttemptFailed AttemptOutcome = "failed"
	// AttemptCrashed: the attempt's process ended while it ran (or Close
	// gave up on it), so nothing settled or recorded it; the next claim
	// took the row over. No runner records it: [History] derives it from
	// the attempt numbers nobody recorded.
	AttemptCrashed AttemptOutcome = "crashed"
	// AttemptLeaseLost: the attempt lost its lease while its handler ran
	// (a renewal was refused, or its lease ended before a renewal could
	// prove it), so its handler's context was cancelled and its end was
	// not settled.
	AttemptLeaseLost AttemptOutcome = "lease_lost"
	// AttemptStale: the handler returned while the attempt still believed
	// it held the lease, but the store refused its settlement: another
	// claim, a requeue or a lapsed lease had made its identity stale.
	AttemptStale AttemptOutcome = "stale"
	// AttemptRequeued is not an attempt but the mark an [AdminStore]
	// records in the history when [AdminStore.Requeue] restarts the
	// update: the attempts after it are numbered from 1 again. Its
	// Attempt is 0 and its StartedAt and EndedAt are the requeue's time.
	AttemptRequeued AttemptOutcome = "requeued"
)

// Valid reports whether o is one of the six outcomes.
func (o AttemptOutcome) Valid() bool {
	switch o {
	case AttemptCompleted, AttemptFailed, AttemptCrashed, AttemptLeaseLost, AttemptStale, AttemptRequeued:
		return true
	}
	return false
}

// Bounds of an [AttemptRecord]: a store must keep a record within them
// byte for byte, and [AttemptRecord.Validate] refuses one beyond them.
const (
	// MaxAttemptBody is the longest [AttemptRecord.Body]: the first few
	// KiB of the app's answer.
	MaxAttemptBody = 4 << 10
	// MaxAttemptError is the longest [AttemptRecord.Error].
	MaxAttemptError = 4 << 10
	// MaxAttemptHeaders is how many header names an [AttemptRecord.Header]
	// holds at most, each with one value of at most MaxAttemptHeaderValue
	// bytes.
	MaxAttemptHeaders     = 16
	MaxAttemptHeaderValue = 256
)

// AttemptRecord is one attempt of an update, kept by an [AdminStore] until
// the update is pruned: never replaced by a later attempt, a success or a
// requeue. Every text in it has passed through the runner's
// [Config.Redactor] before it reached the store.
type AttemptRecord struct {
	// UpdateID, Attempt and ClaimID are the attempt's identity. ClaimID is
	// empty for a plain [Store] and for a derived crashed attempt whose
	// claim id nobody recorded.
	UpdateID int64
	Attempt  int
	ClaimID  string
	// Process is the id of the process that ran it ([ClaimOpts.Owner]),
	// empty without heartbeats.
	Process string
	// StartedAt is when the attempt was claimed; EndedAt when it ended (its
	// settlement, or its handler's return when nothing was settled). A
	// derived crashed attempt has zero times.
	StartedAt time.Time
	EndedAt   time.Time
	// Outcome is how it ended.
	Outcome AttemptOutcome
	// Error is the failure text, masked; empty when it completed.
	Error string
	// Status is the HTTP status the app answered (see [ReportAnswer]),
	// zero when the handler reported no answer (a Go handler, or a forward
	// that got no answer at all).
	Status int
	// Header holds the few response headers the handler chose to keep
	// (such as Content-Type and Retry-After), masked.
	Header http.Header
	// Body is the start of the app's answer body (at most
	// [MaxAttemptBody] bytes), masked.
	Body []byte
}

// Duration is EndedAt minus StartedAt, zero when either is unset.
func (r AttemptRecord) Duration() time.Duration {
	if r.StartedAt.IsZero() || r.EndedAt.IsZero() {
		return 0
	}
	return r.EndedAt.Sub(r.StartedAt)
}

// Validate reports an error wrapping [ErrInvalidArgument] when the outcome
// is unknown, the attempt number is negative, a time is unset, or a text
// is beyond its bound.
func (r AttemptRecord) Validate() error {
	switch {
	case !r.Outcome.Valid():
		return invalid("AttemptRecord.Outcome %q: not an attempt outcome", r.Outcome)
	case r.Attempt < 0:
		return invalid("AttemptRecord.Attempt %d: want 0 or more", r.Attempt)
	case r.StartedAt.IsZero() || r.EndedAt.IsZero():
		return invalid("AttemptRecord without StartedAt or EndedAt: a stored record has both")
	case len(r.Body) > MaxAttemptBody:
		return invalid("AttemptRecord.Body of %d bytes: want at most %d", len(r.Body), MaxAttemptBody)
	case len(r.Error) > MaxAttemptError:
		return invalid("AttemptRecord.Error of %d bytes: want at most %d", len(r.Error), MaxAttemptError)
	case len(r.Header) > MaxAttemptHeaders:
		return invalid("AttemptRecord.Header with %d names: want at most %d", len(r.Header), MaxAttemptHeaders)
	}
	for k, vs := range r.Header {
		if len(vs) != 1 || len(vs[0]) > MaxAttemptHeaderValue {
			return invalid("AttemptRecord.Header %q: want one value of at most %d bytes", k, MaxAttemptHeaderValue)
		}
	}
	return nil
}

// AttemptStep is one entry of an update's timeline, as [History] returns
// it: an attempt, with the gateway calls it made.
type AttemptStep struct {
	AttemptRecord
	// Derived reports that no store record exists: the attempt was claimed
	// (the row's attempt counter counts it) but nobody recorded its end,
	// so its process ended while it ran (crashed), or it is still running
	// (Running).
	Derived bool
	// Running reports the row's current attempt, still processing.
	Running bool
	// Calls are the journal entries this attempt recorded (matched by
	// claim id), when the store is a [JournalStore]; a call a later
	// attempt found already journaled belongs to the attempt that made it.
	Calls []JournalEntry
}

// History returns the timeline of one update: the attempts its store
// recorded, in the order recorded, with the attempts the row's counter
// shows but nobody recorded filled in (the running one, and crashed ones),
// and each attempt's gateway calls joined from the journal. ok is false
// when the update has no row.
func History(ctx context.Context, s AdminStore, updateID int64) (steps []AttemptStep, row Row, ok bool, err error) {
	row, ok, err = s.Get(ctx, updateID)
	if err != nil || !ok {
		return nil, row, ok, err
	}
	recs, err := s.Attempts(ctx, updateID)
	if err != nil {
		return nil, row, ok, err
	}
	var journal []JournalEntry
	if js, isJ := s.(JournalStore); isJ {
		if journal, err = js.Journal(ctx, updateID); err != nil {
			return nil, row, ok, err
		}
	}
	return timeline(recs, row, journal), row, true, nil
}

// timeline fills the gaps of recs (the records of row's update, in the
// order recorded) and joins the journal. Attempt numbers restart after
// each requeue mark, so only the records after the last one are compared
// with the row's counter.
func timeline(recs []AttemptRecord, row Row, journal []JournalEntry) []AttemptStep {
	round := 0
	for i, r := range recs {
		if r.Outcome == AttemptRequeued {
			round = i + 1
		}
	}
	seen := map[int]bool{}
	for _, r := range recs[round:] {
		seen[r.Attempt] = true
	}
	steps := make([]AttemptStep, 0, len(recs)+row.Attempts)
	for _, r := range recs {
		steps = append(steps, AttemptStep{AttemptRecord: r})
	}
	for n := 1; n <= row.Attempts; n++ {
		if seen[n] {
			continue
		}
		st := AttemptStep{Derived: true, AttemptRecord: AttemptRecord{UpdateID: row.UpdateID, Attempt: n}}
		if n == row.Attempts && row.State == StateProcessing {
			st.Running = true
			st.ClaimID = row.ClaimID
		} else {
			st.Outcome = AttemptCrashed
			st.Error = "no record of its end: its process ended while it ran"
			if n == row.Attempts {
				st.ClaimID = row.ClaimID
			}
		}
		steps = append(steps, st)
	}
	// The derived steps belong to the current round: put them among its
	// records in attempt order (a stable sort keeps the recorded order of
	// equal numbers).
	slices.SortStableFunc(steps[round:], func(a, b AttemptStep) int { return a.Attempt - b.Attempt })
	for i := range steps {
		if steps[i].ClaimID == "" || steps[i].Outcome == AttemptRequeued {
			continue
		}
		for _, e := range journal {
			if e.ClaimID == steps[i].ClaimID {
				steps[i].Calls = append(steps[i].Calls, e)
			}
		}
	}
	return steps
}

// AttemptAnswer is the answer of the app an attempt's handler talked to,
// handed to the runner with [ReportAnswer] so that the attempt's record
// keeps it. The runner masks every text of it with [Config.Redactor]
// before it is stored.
type AttemptAnswer struct {
	// Status is the answer's HTTP status code.
	Status int
	// Header holds the response headers worth keeping; the runner keeps
	// at most [MaxAttemptHeaders] names, one value each, cut to
	// [MaxAttemptHeaderValue] bytes.
	Header http.Header
	// Body is the start of the answer's body; the runner keeps at most
	// [MaxAttemptBody] bytes of it. ReportAnswer copies what it keeps.
	Body []byte
}

// answerSlot holds the last answer reported for an attempt. The runner
// puts it in the handler's context (attemptValue.answer) and closes it
// when the handler returned.
type answerSlot struct {
	redact func(string) string
	mu     sync.Mutex
	closed bool
	answer *AttemptAnswer
}

// close ends reports to the slot and returns the answer kept.
func (s *answerSlot) close() *AttemptAnswer {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return s.answer
}

// ReportAnswer records the app's answer to the attempt whose handler ctx
// was given to, for its [AttemptRecord]: package forward reports every
// answer of the app's endpoint. A later report replaces an earlier one.
// It reports false, recording nothing, outside a handler the [Runner]
// called and after the handler returned. The body is masked and cut to
// [MaxAttemptBody] bytes before it is kept.
func ReportAnswer(ctx context.Context, a AttemptAnswer) bool {
	if ctx == nil {
		return false
	}
	v := attemptValueFrom(ctx)
	if v == nil || v.answer == nil {
		return false
	}
	slot := v.answer
	kept := maskAnswer(slot.redact, a)
	slot.mu.Lock()
	defer slot.mu.Unlock()
	if slot.closed {
		return false
	}
	slot.answer = &kept
	return true
}

// maskAnswer returns a bounded, masked copy of a.
func maskAnswer(redact func(string) string, a AttemptAnswer) AttemptAnswer {
	out := AttemptAnswer{Status: a.Status}
	// Mask before cutting, so a secret cannot be cut in two with its
	// first half kept unmasked. The window masked is cut too, and a
	// secret its end cuts in two stays unmasked at the end of the masked
	// text: the window grows until that end lies at least MaxAttemptBody
	// past what is kept (masking shrinks a text by up to the ratio of a
	// secret's length to its mask's), or holds the whole body.
	if len(a.Body) > 0 {
		for w := 4 * MaxAttemptBody; ; w *= 2 {
			b := redact(string(a.Body[:min(len(a.Body), w)]))
			if w >= len(a.Body) || len(b) >= 2*MaxAttemptBody {
				out.Body = []byte(cut(b, MaxAttemptBody))
				break
			}
		}
	}
	names := make([]string, 0, len(a.Header))
	for k, vs := range a.Header {
		if len(vs) > 0 {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	for _, k := range names[:min(len(names), MaxAttemptHeaders)] {
		if out.Header == nil {
			out.Header = http.Header{}
		}
		out.Header[k] = []string{cut(redact(strings.Join(a.Header[k], ", ")), MaxAttemptHeaderValue)}
	}
	return out
}

// cut returns s cut to at most n bytes, on a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// attemptTrace is what the runner knows of one attempt while it runs, for
// its record.
type attemptTrace struct {
	id       Identity
	process  string
	started  time.Time
	answer   *answerSlot
	recorded bool
}

// newAttemptTrace starts the trace of the attempt id claimed at started by
// process, with the answer slot its handler's context carries.
func (r *Runner) newAttemptTrace(id Identity, process string, started time.Time) *attemptTrace {
	return &attemptTrace{id: id, process: process, started: started,
		answer: &answerSlot{redact: r.cfg.Redactor.Redact}}
}

// historyStore returns the store's attempt history, or nil without one.
func (r *Runner) historyStore() AdminStore {
	h, _ := r.cfg.Store.(AdminStore)
	return h
}

// recordAttempt records the end of the attempt tr at at with outcome o.
// A store error is logged: the history is for operators, and the update's
// own outcome is settled already.
func (r *Runner) recordAttempt(ctx context.Context, tr *attemptTrace, o AttemptOutcome, errText string, at time.Time) {
	h := r.historyStore()
	if h == nil || tr == nil || tr.recorded {
		return
	}
	rec := r.attemptRecord(tr, o, errText, at)
	tr.recorded = true
	// Bounded like a settlement, and ended like one when Close gives up
	// on the run: the attempt then reads as crashed, which it was.
	ctx, cancel := context.WithTimeout(ctx, r.cfg.LeaseDuration)
	defer cancel()
	if _, err := h.RecordAttempt(ctx, *rec); err != nil {
		r.log.Warn("intake: attempt history not recorded", "update_id", rec.UpdateID, "attempt", rec.Attempt, "err", err)
	}
}

// settlementRecord is the record of the attempt tr for its settlement to
// state at at with the masked errText ([Settlement.Attempt]): what the
// attempt's record is when the settlement applies. It is nil when the
// store keeps no history or the attempt was recorded already.
func (r *Runner) settlementRecord(tr *attemptTrace, state State, errText string, at time.Time) *AttemptRecord {
	if r.historyStore() == nil || tr == nil || tr.recorded {
		return nil
	}
	o := AttemptFailed
	if state == StateCompleted {
		o = AttemptCompleted
	}
	return r.attemptRecord(tr, o, errText, at)
}

// attemptRecord is the record of the attempt tr, ended at at with outcome
// o and the error errText (masked here).
func (r *Runner) attemptRecord(tr *attemptTrace, o AttemptOutcome, errText string, at time.Time) *AttemptRecord {
	rec := &AttemptRecord{
		UpdateID: tr.id.UpdateID, Attempt: tr.id.Attempt, ClaimID: tr.id.ClaimID, Process: tr.process,
		StartedAt: tr.started, EndedAt: at, Outcome: o,
	}
	if o != AttemptCompleted && errText != "" {
		rec.Error = cut(r.cfg.Redactor.Redact(errText), MaxAttemptError)
	}
	if a := tr.answer.close(); a != nil {
		rec.Status, rec.Header, rec.Body = a.Status, a.Header, a.Body
	}
	return rec
}

// isLost reports whether the lease was lost already.
func (l *lease) isLost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// attemptSettled records the end of l's attempt once its settlement (to
// state, with the masked errText) was answered: applied (ok), or refused,
// when the attempt had lost its lease before (lostBefore) or was found
// stale by the store.
func (r *Runner) attemptSettled(rn *run, l *lease, ok, lostBefore bool, state State, errText string) {
	o := AttemptFailed
	switch {
	case ok && state == StateCompleted:
		o = AttemptCompleted
	case ok:
	case lostBefore:
		o = AttemptLeaseLost
		errText = joinText("it lost its lease while its handler ran", errText)
	default:
		o = AttemptStale
		errText = joinText("the store refused its settlement: another claim, a requeue or its lease's end made it stale", errText)
	}
	r.recordAttempt(rn.ctx, l.trace, o, errText, now())
}

// attemptUnsettled records the end of l's attempt that settles nothing
// because it lost its lease. One that Close gave up on (hctx's cause
// tells) is left unrecorded, as a killed process leaves it: the run is
// ending, and [History] shows it as crashed, which is how its takeover
// counts it.
func (r *Runner) attemptUnsettled(rn *run, l *lease, hctx context.Context, why string) {
	if errors.Is(context.Cause(hctx), ErrClosed) {
		return
	}
	r.recordAttempt(rn.ctx, l.trace, AttemptLeaseLost, why, now())
}

// joinText joins a description and an error text, either possibly empty.
func joinText(what, errText string) string {
	if errText == "" {
		return what
	}
	return what + ": " + errText
}
