package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Bounds of the Replies page.
const (
	maxMethodParam = 64
	// replyTimeLayout is the format of the since and until filters, as a
	// datetime-local input sends it; times are UTC.
	replyTimeLayout = "2006-01-02T15:04"
)

// The outcome filters of the Replies page, unknown first.
const (
	replyFilterUnknown = "unknown" // unknown, and pending ones no attempt is running
	replyFilterAny     = "any"
)

var replyFilters = []string{replyFilterUnknown, string(intake.CallPending), string(intake.CallAnswered), string(intake.CallNotDispatched), replyFilterAny}

// callView is what a journaled call is known to have done, in words.
type callView struct {
	// Outcome is the outcome shown: the stored one, except that a pending
	// entry whose attempt no longer runs is shown "unknown".
	Outcome string
	// Interrupted: a pending entry whose attempt ended without recording
	// the outcome (a kill, or a lease lost mid-call).
	Interrupted bool
	// Why explains the outcome and what the operator can do.
	Why string
}

// explainCall says what a journal entry means, given its update's row now.
func explainCall(e intake.JournalEntry, row intake.Row, now time.Time) callView {
	switch e.Outcome {
	case intake.CallAnswered:
		return callView{Outcome: string(e.Outcome), Why: fmt.Sprintf("Telegram answered %d; a later identical call of this update gets this answer, not a second message.", e.Status)}
	case intake.CallNotDispatched:
		return callView{Outcome: string(e.Outcome), Why: "The request never left the relay (it failed before its first byte reached Telegram), so nothing was sent; a later identical call may send it."}
	case intake.CallUnknown:
		return callView{Outcome: string(e.Outcome), Why: "The request left the relay but no answer came back (the connection broke after it was sent, or the answer was lost), so Telegram may or may not have acted on it. " +
			"It is never resent automatically, not even by a requeue. Look in the chat: if the message is missing, send it by hand."}
	}
	running := row.State == intake.StateProcessing && row.ClaimID == e.ClaimID && row.Attempts == e.Attempt && !row.DueAt.Before(now)
	if running {
		return callView{Outcome: string(intake.CallPending), Why: "In flight: its attempt is running and has not recorded the outcome yet."}
	}
	return callView{Outcome: string(intake.CallUnknown), Interrupted: true,
		Why: fmt.Sprintf("Interrupted: attempt %d ended (its process was stopped or lost its lease) after the call was about to be sent and before its outcome was recorded, so Telegram may or may not have it. "+
			"It is never resent automatically. Look in the chat: if the message is missing, send it by hand.", e.Attempt)}
}

// replyRow is one line of the Replies page.
type replyRow struct {
	intake.Reply
	callView
	Answer string // the recorded answer or description, redacted, on one line
	State  string // the update's state now
}

type repliesData struct {
	Supported bool // the store can list replies across updates
	Outcome   string
	Method    string
	Chat      string
	Since     string
	Until     string
	Filters   []string
	Rows      []replyRow
	Next      template.URL // the next page's address; empty on the last one
	First     template.URL
	Paged     bool
}

// parseReplyKey reads a "before" cursor: ms:update:method:hash:occurrence.
func parseReplyKey(s string) (*intake.ReplyKey, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 5 {
		return nil, fmt.Errorf("the page cursor is malformed")
	}
	at, err1 := strconv.ParseInt(parts[0], 10, 64)
	id, err2 := strconv.ParseInt(parts[1], 10, 64)
	occ, err3 := strconv.Atoi(parts[4])
	if err1 != nil || err2 != nil || err3 != nil || len(parts[2]) > maxMethodParam || len(parts[3]) > 128 {
		return nil, fmt.Errorf("the page cursor is malformed")
	}
	return &intake.ReplyKey{IntendedAt: time.UnixMilli(at).UTC(), UpdateID: id, Call: intake.Call{Method: parts[2], ParamsHash: parts[3], Occurrence: occ}}, nil
}

func formatReplyKey(k intake.ReplyKey) string {
	return fmt.Sprintf("%d:%d:%s:%s:%d", k.IntendedAt.UnixMilli(), k.UpdateID, k.Method, k.ParamsHash, k.Occurrence)
}

// parseReplyTime reads a since or until filter.
func parseReplyTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(replyTimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("a time is YYYY-MM-DDTHH:MM, in UTC")
	}
	return t, nil
}

// replies lists the journaled calls across updates, unknown ones first by
// default, each explained.
func (h *Handler) replies(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := repliesData{Outcome: q.Get("outcome"), Method: strings.TrimSpace(q.Get("method")), Chat: strings.TrimSpace(q.Get("chat")),
		Since: q.Get("since"), Until: q.Get("until"), Filters: replyFilters}
	if d.Outcome == "" {
		d.Outcome = replyFilterUnknown
	}
	is := h.cfg.Store
	if _, journals := h.cfg.Store.(intake.JournalStore); !journals {
		h.render(w, r, http.StatusOK, "replies", page{Title: "Replies", Nav: "replies", Data: d})
		return
	}
	d.Supported = true
	_, limit, err := h.pageQuery(url.Values{"limit": q["limit"]})
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	rq := intake.ReplyQuery{Method: d.Method, Chat: d.Chat, Limit: limit + 1}
	switch d.Outcome {
	case replyFilterAny:
	case replyFilterUnknown:
		rq.Outcomes = []intake.CallOutcome{intake.CallUnknown, intake.CallPending}
	case string(intake.CallPending), string(intake.CallAnswered), string(intake.CallNotDispatched):
		rq.Outcomes = []intake.CallOutcome{intake.CallOutcome(d.Outcome)}
	default:
		h.fail(w, r, http.StatusBadRequest, "Bad request", "Unknown outcome; want unknown, pending, answered, not_dispatched or any.")
		return
	}
	switch {
	case len(d.Method) > maxMethodParam:
		err = fmt.Errorf("the method is too long")
	case len(d.Chat) > maxChatParam:
		err = fmt.Errorf("the chat id is too long")
	}
	if err == nil {
		rq.Since, err = parseReplyTime(d.Since)
	}
	if err == nil {
		rq.Until, err = parseReplyTime(d.Until)
	}
	if err == nil && q.Get("before") != "" {
		rq.Before, err = parseReplyKey(q.Get("before"))
		d.Paged = true
	}
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	rows, err := is.Replies(ctx, rq)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	filter := url.Values{"outcome": {d.Outcome}}
	for k, v := range map[string]string{"method": d.Method, "chat": d.Chat, "since": d.Since, "until": d.Until} {
		if v != "" {
			filter.Set(k, v)
		}
	}
	if q.Get("limit") != "" {
		filter.Set("limit", strconv.Itoa(limit))
	}
	d.First = h.link("replies", filter)
	if len(rows) > limit {
		rows = rows[:limit]
		filter.Set("before", formatReplyKey(rows[limit-1].Key()))
		d.Next = h.link("replies", filter)
	}
	now := time.Now()
	for _, rep := range rows {
		v := replyRow{Reply: rep, callView: explainCall(rep.JournalEntry, rep.Row, now), State: rep.Row.StateName()}
		v.Answer = h.redact(strings.Join(strings.Fields(string(rep.Body)), " "))
		v.Body = nil
		v.Chat = h.redact(v.Chat)
		v.Row.Error = ""
		d.Rows = append(d.Rows, v)
	}
	h.render(w, r, http.StatusOK, "replies", page{Title: "Replies", Nav: "replies", Live: true, Data: d})
}
