package dashboard

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// The attempt timeline of an update's page: every attempt with the app's
// own answer, so the page answers "why did it fail, each time".

// maxAttemptsShown bounds the timeline an update's page shows (the newest
// are kept).
const maxAttemptsShown = 100

// attemptView is one step of an update's timeline as its page shows it.
// Every text is masked by the page's redactor (the runner masked it before
// it was stored, with what it knew).
type attemptView struct {
	Attempt  int
	Outcome  string
	Class    string // the chip's colour class
	Requeue  bool   // a requeue mark, not an attempt
	Derived  bool
	ClaimID  string
	Process  string
	Started  time.Time
	Duration time.Duration
	Ended    bool
	Status   int
	Error    string
	Headers  []string // "Name: value", in name order
	Body     FormattedBody
	Calls    []replyView
}

// attemptClass maps an outcome to the colour class of its chip.
func attemptClass(outcome string) string {
	switch outcome {
	case string(intake.AttemptCompleted):
		return "state-completed"
	case string(intake.AttemptFailed):
		return "state-failed"
	case string(intake.AttemptCrashed):
		return "state-unacked"
	case string(intake.AttemptLeaseLost):
		return "state-r-uncertain"
	case string(intake.AttemptStale):
		return "state-abandoned"
	case "running":
		return "state-processing"
	}
	return "state-pending"
}

// attempts returns the timeline of update id, at most maxAttemptsShown
// steps (the newest), and how many older ones are hidden.
func (h *Handler) attempts(ctx context.Context, id int64) ([]attemptView, int, error) {
	steps, _, _, err := intake.History(ctx, h.cfg.Store, id)
	if err != nil {
		return nil, 0, err
	}
	hidden := 0
	if len(steps) > maxAttemptsShown {
		hidden = len(steps) - maxAttemptsShown
		steps = steps[hidden:]
	}
	out := make([]attemptView, 0, len(steps))
	for _, s := range steps {
		v := attemptView{Attempt: s.Attempt, Outcome: string(s.Outcome), Requeue: s.Outcome == intake.AttemptRequeued,
			Derived: s.Derived, ClaimID: s.ClaimID, Process: s.Process, Started: s.StartedAt,
			Duration: s.Duration(), Ended: !s.EndedAt.IsZero(), Status: s.Status, Error: h.redact(s.Error)}
		if s.Running {
			v.Outcome = "running"
		}
		v.Class = attemptClass(v.Outcome)
		if len(s.Body) > 0 {
			v.Body = formatBody(s.Body, h.cfg.MaxBodyBytes, h.redact)
		}
		for k, vs := range s.Header {
			v.Headers = append(v.Headers, k+": "+h.redact(strings.Join(vs, ", ")))
		}
		slices.Sort(v.Headers)
		for _, e := range s.Calls {
			answer := h.redact(strings.Join(strings.Fields(string(e.Body)), " "))
			e.Body = nil
			v.Calls = append(v.Calls, replyView{JournalEntry: e, Answer: cut(answer, maxJournalBodyShown, "…")})
		}
		out = append(out, v)
	}
	return out, hidden, nil
}
