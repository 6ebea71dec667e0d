package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// attemptJSON is one step of an update's timeline as 'updates show --json'
// prints it: an attempt (or a requeue mark) with the gateway calls it made.
type attemptJSON struct {
	Attempt    int               `json:"attempt"`
	Outcome    string            `json:"outcome"`
	Derived    bool              `json:"derived,omitempty"`
	ClaimID    string            `json:"claim_id,omitempty"`
	Process    string            `json:"process,omitempty"`
	StartedAt  *time.Time        `json:"started_at,omitempty"`
	EndedAt    *time.Time        `json:"ended_at,omitempty"`
	DurationMS *int64            `json:"duration_ms,omitempty"`
	Error      string            `json:"error,omitempty"`
	Status     int               `json:"status,omitempty"`
	Header     map[string]string `json:"header,omitempty"`
	Body       string            `json:"body,omitempty"`
	Calls      []callJSON        `json:"calls,omitempty"`
}

// timeline returns the update's attempts, gaps filled and calls joined
// (see [intake.History]).
func (u *updatesCmd) timeline(ctx context.Context, id int64) ([]intake.AttemptStep, error) {
	var s intake.AdminStore = u.store
	if o, ok := s.(*openedStore); ok {
		if a, ok := o.store.(intake.AdminStore); ok {
			s = a // the store itself, so History finds the journal
		}
	}
	steps, _, _, err := intake.History(ctx, s, id)
	if err != nil {
		return nil, fmt.Errorf("attempts of update %d: %w", id, err)
	}
	return steps, nil
}

// stepOutcome names a step's outcome as show prints it.
func stepOutcome(s intake.AttemptStep) string {
	if s.Running {
		return "running"
	}
	return string(s.Outcome)
}

// toAttemptsJSON returns steps as --json prints them, every text masked by
// u.red once more (the runner masked them before they were stored, with
// what it knew).
func (u *updatesCmd) toAttemptsJSON(steps []intake.AttemptStep) []attemptJSON {
	out := make([]attemptJSON, 0, len(steps))
	for _, s := range steps {
		a := attemptJSON{Attempt: s.Attempt, Outcome: stepOutcome(s), Derived: s.Derived, ClaimID: s.ClaimID,
			Process: s.Process, Error: u.red.Redact(s.Error), Status: s.Status, Body: u.red.Redact(string(s.Body)),
			Calls: toCallsJSON(s.Calls)}
		if len(a.Calls) == 0 {
			a.Calls = nil
		}
		if !s.StartedAt.IsZero() {
			t := s.StartedAt.UTC()
			a.StartedAt = &t
		}
		if !s.EndedAt.IsZero() {
			t := s.EndedAt.UTC()
			a.EndedAt = &t
			d := s.Duration().Milliseconds()
			a.DurationMS = &d
		}
		for k, vs := range s.Header {
			if a.Header == nil {
				a.Header = map[string]string{}
			}
			a.Header[k] = u.red.Redact(strings.Join(vs, ", "))
		}
		out = append(out, a)
	}
	return out
}

// maxAttemptBodyLine is how many characters of an attempt's body the text
// timeline shows (--json prints it whole).
const maxAttemptBodyLine = 300

// printTimeline prints the attempts of an update, oldest first.
func (u *updatesCmd) printTimeline(steps []intake.AttemptStep) error {
	if len(steps) == 0 {
		_, err := fmt.Fprintln(u.out, "attempts: none yet")
		return err
	}
	fmt.Fprintln(u.out, "attempts (oldest first; the app's answers as received, masked):")
	tw := tabwriter.NewWriter(u.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tOUTCOME\tSTARTED\tDURATION\tSTATUS\tPROCESS\tCLAIM")
	for _, s := range steps {
		if s.Outcome == intake.AttemptRequeued {
			fmt.Fprintf(tw, "  -\trequeued\t%s\t-\t-\t-\t-\n", fmtTime(s.StartedAt))
			continue
		}
		dur, status := "-", "-"
		if !s.EndedAt.IsZero() {
			dur = s.Duration().String()
		}
		if s.Status != 0 {
			status = fmt.Sprint(s.Status)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Attempt, stepOutcome(s), fmtTime(s.StartedAt), dur, status,
			orDash(s.Process), orDash(s.ClaimID))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range steps {
		if s.Outcome == intake.AttemptRequeued {
			continue
		}
		var lines []string
		if s.Error != "" {
			lines = append(lines, "error: "+oneLine(u.red.Redact(s.Error), maxErrorColumn*4))
		}
		if len(s.Header) > 0 {
			lines = append(lines, "headers: "+u.headerLine(s.Header))
		}
		if len(s.Body) > 0 {
			lines = append(lines, "body: "+oneLine(u.red.Redact(string(s.Body)), maxAttemptBodyLine))
		}
		for _, c := range s.Calls {
			st := ""
			if c.Status != 0 {
				st = fmt.Sprintf(" %d", c.Status)
			}
			lines = append(lines, fmt.Sprintf("call: %s #%d %s%s", c.Method, c.Occurrence, c.Outcome, st))
		}
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(u.out, "  attempt %d:\n", s.Attempt)
		for _, l := range lines {
			if _, err := fmt.Fprintf(u.out, "    %s\n", l); err != nil {
				return err
			}
		}
	}
	return nil
}

// headerLine prints an attempt's kept headers in name order, masked.
func (u *updatesCmd) headerLine(h http.Header) string {
	names := make([]string, 0, len(h))
	for k := range h {
		names = append(names, k)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, k+": "+u.red.Redact(strings.Join(h[k], ", ")))
	}
	return oneLine(strings.Join(parts, "; "), maxAttemptBodyLine)
}
