package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// callJSON is a journaled Bot API call as 'updates show --json' prints it.
type callJSON struct {
	Method     string     `json:"method"`
	ParamsHash string     `json:"params_hash"`
	Occurrence int        `json:"occurrence"`
	Attempt    int        `json:"attempt"`
	ClaimID    string     `json:"claim_id"`
	Outcome    string     `json:"outcome"`
	Status     int        `json:"status,omitempty"`
	IntendedAt time.Time  `json:"intended_at"`
	DecidedAt  *time.Time `json:"decided_at,omitempty"`
}

// journal returns the update's journaled calls; none when the store keeps
// no journal.
func (u *updatesCmd) journal(ctx context.Context, id int64) ([]intake.JournalEntry, error) {
	j, ok := u.store.store.(intake.JournalStore)
	if !ok {
		return nil, nil
	}
	es, err := j.Journal(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("journal of update %d: %w", id, err)
	}
	return es, nil
}

func toCallsJSON(es []intake.JournalEntry) []callJSON {
	out := make([]callJSON, 0, len(es))
	for _, e := range es {
		c := callJSON{Method: e.Method, ParamsHash: e.ParamsHash, Occurrence: e.Occurrence, Attempt: e.Attempt,
			ClaimID: e.ClaimID, Outcome: string(e.Outcome), Status: e.Status, IntendedAt: e.IntendedAt.UTC()}
		if !e.DecidedAt.IsZero() {
			t := e.DecidedAt.UTC()
			c.DecidedAt = &t
		}
		out = append(out, c)
	}
	return out
}

// printCalls prints the journaled calls of an update as a table; a pending
// call (no outcome recorded) counts as unknown and is never sent again.
func (u *updatesCmd) printCalls(es []intake.JournalEntry) error {
	if len(es) == 0 {
		_, err := fmt.Fprintln(u.out, "calls: none journaled")
		return err
	}
	fmt.Fprintln(u.out, "calls (journaled by the gateway; pending and unknown are never sent again):")
	tw := tabwriter.NewWriter(u.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  INTENDED\tATTEMPT\tMETHOD\tOCCURRENCE\tOUTCOME\tSTATUS")
	for _, e := range es {
		status := "-"
		if e.Status != 0 {
			status = fmt.Sprint(e.Status)
		}
		fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%s\t%s\n", fmtTime(e.IntendedAt), e.Attempt, e.Method, e.Occurrence, e.Outcome, status)
	}
	return tw.Flush()
}
