package dashboard

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Bounds of request parameters.
const (
	maxChatParam    = 64
	maxClaimIDParam = 128
	chatScanBatch   = 500
)

// rowView is one row as the lists and the update page show it.
type rowView struct {
	intake.Row
	Chat string
	// Unacked: an exhaustion waiting for its acknowledgement.
	Unacked bool
	// CanAck and CanRequeue: the buttons the page may show.
	CanAck, CanRequeue bool
	// HeldBehind is the earlier update of its chat a pending row waits
	// for; Held reports that there is one (see [Handler.markHeld]).
	HeldBehind int64
	Held       bool
	// Base is Config.Prefix, for the links of the row's parts.
	Base string
}

func (h *Handler) view(r intake.Row) rowView {
	r.Error = h.redact(r.Error)
	v := rowView{Row: r, Chat: h.redact(chatOf(r.Body)), Unacked: r.Unacknowledged(), Base: h.cfg.Prefix}
	v.Body = nil // pages that show the body format it themselves
	if !h.cfg.ReadOnly {
		v.CanAck = v.Unacked && h.durable != nil
		// An expired update would expire again at once: its deadline
		// counts from its arrival.
		v.CanRequeue = (r.State == intake.StateFailed || r.State == intake.StateAbandoned) && !r.Expired()
	}
	return v
}

type updatesData struct {
	State  string
	Chat   string
	States []intake.State
	Rows   []rowView
	// Next is the address of the next page; empty on the last one.
	Next template.URL
	// First is the address of the first page with the same filters.
	First template.URL
	// Paged: this is not the first page.
	Paged bool
	// Scanned counts the rows a chat filter read; ScanCut reports that the
	// scan stopped at its bound before filling the page.
	Scanned int
	ScanCut bool
	// Newest: rows are listed newest first (the store can search);
	// Query is the search text; Exact is the update whose id it names.
	Newest bool
	Query  string
	Exact  *rowView
	// Bulk: the listing is one the bulk requeue applies to (failed or
	// abandoned rows, by State and Chat).
	Bulk bool
}

// link is the address of a page with query q. Both come from the handler
// (the prefix was validated, q is encoded), so it is a safe URL.
func (h *Handler) link(page string, q url.Values) template.URL {
	u := h.cfg.Prefix + page
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return template.URL(u)
}

// pageQuery reads after and limit.
func (h *Handler) pageQuery(q url.Values) (after *int64, limit int, err error) {
	limit = h.cfg.PageSize
	if s := q.Get("limit"); s != "" {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 {
			return nil, 0, fmt.Errorf("limit must be a positive number")
		}
		limit = min(n, MaxPageSize)
	}
	if s := q.Get("after"); s != "" {
		n, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || n < 0 {
			return nil, 0, fmt.Errorf("after must be an update id")
		}
		after = &n
	}
	return after, limit, nil
}

func (h *Handler) updates(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, limit, err := h.pageQuery(q)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	d := updatesData{State: q.Get("state"), Chat: strings.TrimSpace(q.Get("chat")), States: allStates, Paged: after != nil}
	expired := d.State == intake.StateNameExpired
	if d.State != "" && !expired && !slices.Contains(allStates, intake.State(d.State)) {
		h.fail(w, r, http.StatusBadRequest, "Bad request", "Unknown state; want pending, processing, failed, completed, abandoned or expired.")
		return
	}
	if len(d.Chat) > maxChatParam {
		h.fail(w, r, http.StatusBadRequest, "Bad request", "The chat id is too long.")
		return
	}
	d.Query = strings.TrimSpace(q.Get("q"))
	if is := h.cfg.Store; after == nil && q.Get("order") != "oldest" {
		h.updatesNewest(w, r, is, d, limit)
		return
	}
	if d.Query != "" {
		h.fail(w, r, http.StatusBadRequest, "Bad request", "Search lists newest first, and this store cannot search.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	lq := intake.ListQuery{State: intake.State(d.State), After: after}
	if expired {
		// Stores keep an expired row as abandoned: scan those.
		lq.State = intake.StateAbandoned
	}
	var rows []intake.Row
	var nextAfter int64
	hasNext := false
	if d.Chat == "" && !expired {
		lq.Limit = limit + 1
		rows, err = h.cfg.Store.List(ctx, lq)
		if err != nil {
			h.storeFailed(w, r, err)
			return
		}
		if len(rows) > limit {
			rows = rows[:limit]
			nextAfter, hasNext = rows[limit-1].UpdateID, true
		}
	} else {
		keep := func(row intake.Row) bool {
			return (d.Chat == "" || chatOf(row.Body) == d.Chat) && (!expired || row.Expired())
		}
		rows, nextAfter, hasNext, d.Scanned, d.ScanCut, err = h.scanChat(ctx, lq, keep, limit)
		if err != nil {
			h.storeFailed(w, r, err)
			return
		}
	}
	for _, row := range rows {
		d.Rows = append(d.Rows, h.view(row))
	}
	if err := h.markHeld(ctx, d.Rows); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	filter := url.Values{}
	if d.State != "" {
		filter.Set("state", d.State)
	}
	if d.Chat != "" {
		filter.Set("chat", d.Chat)
	}
	if q.Get("limit") != "" {
		filter.Set("limit", strconv.Itoa(limit))
	}
	filter.Set("order", "oldest")
	d.First = h.link("updates", filter)
	filter.Del("order")
	if hasNext {
		filter.Set("after", strconv.FormatInt(nextAfter, 10))
		d.Next = h.link("updates", filter)
	}
	h.render(w, r, http.StatusOK, "updates", page{Title: "Updates", Nav: "updates", Live: true, Data: d})
}

// scanChat reads rows in update id order, keeping those keep accepts (of
// one chat, or expired), until the page is full, the store has no more,
// or MaxChatScan rows were read. It returns where the next page
// continues, if there is one.
func (h *Handler) scanChat(ctx context.Context, lq intake.ListQuery, keep func(intake.Row) bool, limit int) (rows []intake.Row, next int64, hasNext bool, scanned int, cut bool, err error) {
	return scanRows(chatScanBatch, lq.After, func(after *int64, n int) ([]intake.Row, error) {
		lq.After, lq.Limit = after, n
		return h.cfg.Store.List(ctx, lq)
	}, keep, limit)
}

// Bounds of the journaled replies an update's page shows.
const (
	maxJournalShown     = 100
	maxJournalBodyShown = 300
)

// replyView is one journaled Bot API call of an update.
type replyView struct {
	intake.JournalEntry
	Answer string // the recorded answer, redacted, on one line, cut
	// Outcome shadows the entry's: a pending entry whose attempt no
	// longer runs shows "unknown" (see explainCall), never "pending"
	// forever on a finished update.
	Outcome string
	Why     string
}

type updateData struct {
	Row   rowView
	Body  FormattedBody
	Found bool
	// HasJournal: the store journals replies; Replies are the first
	// maxJournalShown of them, RepliesHidden the rest.
	HasJournal    bool
	Replies       []replyView
	RepliesHidden int
	// DueLabel names what Row.DueAt means in the row's state.
	DueLabel string
	// Attempts is the update's timeline (attempts.go); AttemptsHidden
	// counts the older steps not shown.
	Attempts       []attemptView
	AttemptsHidden int
}

func dueLabel(r intake.Row) string {
	switch {
	case r.State == intake.StatePending:
		return "Received"
	case r.State == intake.StateProcessing:
		return "Lease until"
	case r.State == intake.StateFailed:
		return "Retry at"
	case r.Unacknowledged():
		return "Exhausted at"
	}
	return "Due"
}

// parseID reads the {id} path value.
func parseID(r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	return id, err == nil && id >= 0
}

func (h *Handler) update(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(r)
	if !ok {
		h.fail(w, r, http.StatusBadRequest, "Bad request", "An update id is a non-negative number.")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	row, found, err := h.cfg.Store.Get(ctx, id)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if !found {
		h.fail(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("Update %d is not in the store (never recorded, or pruned after its retention).", id))
		return
	}
	d := updateData{Row: h.view(row), Found: true, DueLabel: dueLabel(row),
		Body: formatBody(row.Body, h.cfg.MaxBodyBytes, h.redact)}
	one := []rowView{d.Row}
	if err := h.markHeld(ctx, one); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	d.Row = one[0]
	if d.Attempts, d.AttemptsHidden, err = h.attempts(ctx, id); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if js, ok := h.cfg.Store.(intake.JournalStore); ok {
		d.HasJournal = true
		entries, err := js.Journal(ctx, id)
		if err != nil {
			h.storeFailed(w, r, err)
			return
		}
		if len(entries) > maxJournalShown {
			d.RepliesHidden = len(entries) - maxJournalShown
			entries = entries[:maxJournalShown]
		}
		for _, e := range entries {
			answer := h.redact(strings.Join(strings.Fields(string(e.Body)), " "))
			e.Body = nil
			cv := explainCall(e, row, time.Now())
			d.Replies = append(d.Replies, replyView{JournalEntry: e, Answer: cut(answer, maxJournalBodyShown, "…"), Outcome: cv.Outcome, Why: cv.Why})
		}
	}
	h.render(w, r, http.StatusOK, "update", page{Title: fmt.Sprintf("Update %d", id), Nav: "updates", Live: true, Data: d})
}

// The actions of the update and exhaustion pages.
const (
	actionAck     = "acknowledge"
	actionRequeue = "requeue"
)

type actionData struct {
	Action   string // actionAck or actionRequeue
	Identity intake.Identity
	Row      rowView
	Found    bool
	// Done: the action applied. Stale: it was refused because the row
	// changed; Message says how.
	Done, Stale bool
	Message     string
}

// identityOf reads the exact identity an action names: the path's id and
// the attempt and claim_id parameters.
func identityOf(r *http.Request, values url.Values) (intake.Identity, error) {
	id, ok := parseID(r)
	if !ok {
		return intake.Identity{}, fmt.Errorf("an update id is a non-negative number")
	}
	attempt, err := strconv.Atoi(values.Get("attempt"))
	if err != nil || attempt < 0 {
		return intake.Identity{}, fmt.Errorf("the attempt is missing or not a number")
	}
	claim := values.Get("claim_id")
	if len(claim) > maxClaimIDParam {
		return intake.Identity{}, fmt.Errorf("the claim id is too long")
	}
	return intake.Identity{UpdateID: id, Attempt: attempt, ClaimID: claim}, nil
}

// checkAction refuses an action the handler cannot take.
func (h *Handler) checkAction(w http.ResponseWriter, r *http.Request) (string, bool) {
	action := r.PathValue("action")
	switch {
	case action != actionAck && action != actionRequeue:
		h.fail(w, r, http.StatusNotFound, "Not found", "There is no such page.")
	case h.cfg.ReadOnly:
		h.fail(w, r, http.StatusForbidden, "Read-only", "This dashboard is read-only: it changes nothing.")
	case action == actionAck && h.durable == nil:
		h.fail(w, r, http.StatusNotImplemented, "Not available", "This store keeps no exhaustions to acknowledge.")
	default:
		return action, true
	}
	return "", false
}

// stale explains why id no longer names what an action expects; it
// returns "" when id is still current for the action.
func stale(action string, id intake.Identity, row intake.Row, found bool) string {
	switch {
	case !found:
		return fmt.Sprintf("Update %d is no longer in the store: it was pruned.", id.UpdateID)
	case row.Attempts != id.Attempt || row.ClaimID != id.ClaimID:
		return fmt.Sprintf("Update %d has moved on since this page was loaded: it is %s at attempt %d now, not attempt %d. Someone else acted first (or the relay ran it again); look at it afresh.",
			id.UpdateID, row.State, row.Attempts, id.Attempt)
	case action == actionAck && !row.Unacknowledged():
		if row.State == intake.StateAbandoned {
			return fmt.Sprintf("Update %d was already acknowledged (at %s). Someone else acted first.", id.UpdateID, row.SettledAt.UTC().Format(time.DateTime))
		}
		return fmt.Sprintf("Update %d is %s now, not an unacknowledged exhaustion. Someone else acted first.", id.UpdateID, row.State)
	case action == actionRequeue && row.State != intake.StateFailed && row.State != intake.StateAbandoned:
		return fmt.Sprintf("Update %d is %s now; only failed or abandoned updates can be requeued. Someone else acted first.", id.UpdateID, row.State)
	}
	return ""
}

// confirm is the confirmation step of an action: it shows the row and the
// exact identity the action will name, and a POST form.
func (h *Handler) confirm(w http.ResponseWriter, r *http.Request) {
	action, ok := h.checkAction(w, r)
	if !ok {
		return
	}
	id, err := identityOf(r, r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	row, found, err := h.cfg.Store.Get(ctx, id.UpdateID)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	d := actionData{Action: action, Identity: id, Found: found, Row: h.view(row)}
	code := http.StatusOK
	if d.Message = stale(action, id, row, found); d.Message != "" {
		d.Stale, code = true, http.StatusConflict
	}
	h.render(w, r, code, "confirm", page{Title: confirmTitle(action, id.UpdateID), Nav: "exhaustions", Data: d})
}

func confirmTitle(action string, id int64) string {
	if action == actionAck {
		return fmt.Sprintf("Acknowledge update %d?", id)
	}
	return fmt.Sprintf("Requeue update %d?", id)
}

// act applies an action with the exact identity the form names and shows
// the result. A stale identity is refused with 409 and an explanation.
func (h *Handler) act(w http.ResponseWriter, r *http.Request) {
	action, ok := h.checkAction(w, r)
	if !ok {
		return
	}
	id, err := identityOf(r, r.PostForm)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	d := actionData{Action: action, Identity: id}
	defer h.stats.Forget()
	var applied bool
	switch action {
	case actionAck:
		applied, err = h.durable.AcknowledgeExhaustion(ctx, id, time.Now())
	case actionRequeue:
		// The store's Requeue names the update only, so the identity is
		// checked first. A change between the check and the requeue can
		// only be another exhaustion of the same update, which the
		// requeue then puts back to pending just the same.
		var row intake.Row
		var found bool
		row, found, err = h.cfg.Store.Get(ctx, id.UpdateID)
		if err == nil && stale(action, id, row, found) == "" {
			applied, err = h.cfg.Store.Requeue(ctx, id.UpdateID, time.Now())
		}
	}
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	row, found, err := h.cfg.Store.Get(ctx, id.UpdateID)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	d.Found, d.Row = found, h.view(row)
	code := http.StatusOK
	if applied {
		d.Done = true
		if action == actionAck {
			d.Message = fmt.Sprintf("Update %d is acknowledged (attempt %d, claim %s). It will be pruned after the retention.", id.UpdateID, id.Attempt, id.ClaimID)
		} else {
			d.Message = fmt.Sprintf("Update %d is pending again, from attempt 0; the relay will forward it anew.", id.UpdateID)
		}
		h.log.Info("dashboard: "+action+" applied", "update_id", id.UpdateID, "attempt", id.Attempt, "claim_id", id.ClaimID, "remote", r.RemoteAddr)
	} else {
		d.Stale, code = true, http.StatusConflict
		if d.Message = stale(action, id, row, found); d.Message == "" {
			d.Message = fmt.Sprintf("The store refused to %s update %d with attempt %d: someone else acted first.", action, id.UpdateID, id.Attempt)
		}
		h.log.Info("dashboard: "+action+" refused: stale identity", "update_id", id.UpdateID, "attempt", id.Attempt, "claim_id", id.ClaimID, "remote", r.RemoteAddr)
	}
	h.render(w, r, code, "result", page{Title: resultTitle(action, applied), Nav: "exhaustions", Data: d})
}

func resultTitle(action string, applied bool) string {
	switch {
	case !applied:
		return "Not changed: someone else acted first"
	case action == actionAck:
		return "Acknowledged"
	}
	return "Requeued"
}
