package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// MaxBulk bounds the rows one bulk action names. A filter that selects
// more acts on the first MaxBulk (oldest first), and the confirmation says
// so; run it again for the rest.
const MaxBulk = 500

// maxActionForm bounds the body of a state-changing form: room for a bulk
// action's MaxBulk identities (an update id, an attempt and a claim id
// each, encoded), and far more than a single action needs.
const maxActionForm = MaxBulk*(20+10+maxClaimIDParam) + 4<<10

// The row sets a bulk action takes.
const (
	bulkUnacknowledged = "unacknowledged"
)

// bulkItem is one row a bulk action names, with its exact identity.
type bulkItem struct {
	rowView
	Key string // "update/attempt/claim", the form value naming the identity
}

type bulkData struct {
	Action string // actionAck or actionRequeue
	State  string // the filter: failed, abandoned or unacknowledged
	Chat   string
	Items  []bulkItem
	// More: the filter may select more rows than these (MaxBulk, or the
	// scan's bound of MaxChatScan rows, was reached).
	More         bool
	Max, MaxScan int
}

type bulkResultData struct {
	Action  string
	Applied []int64
	Refused []bulkRefusal
}

type bulkRefusal struct {
	UpdateID int64
	Why      string
}

func identityKey(id intake.Identity) string {
	return fmt.Sprintf("%d/%d/%s", id.UpdateID, id.Attempt, id.ClaimID)
}

func parseIdentityKey(s string) (intake.Identity, error) {
	parts := strings.SplitN(s, "/", 3)
	if len(parts) != 3 || len(parts[2]) > maxClaimIDParam {
		return intake.Identity{}, fmt.Errorf("a row of the confirmed set is malformed")
	}
	id, err1 := strconv.ParseInt(parts[0], 10, 64)
	attempt, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil || id < 0 || attempt < 0 {
		return intake.Identity{}, fmt.Errorf("a row of the confirmed set is malformed")
	}
	return intake.Identity{UpdateID: id, Attempt: attempt, ClaimID: parts[2]}, nil
}

// bulkSelect lists the rows the filter selects that the action applies to,
// oldest first, at most MaxBulk, reading at most MaxChatScan rows, and
// whether there may be more.
func (h *Handler) bulkSelect(ctx context.Context, action, state, chat string) ([]intake.Row, bool, error) {
	var rows []intake.Row
	var after *int64
	for scanned := 0; ; {
		if scanned >= MaxChatScan {
			return rows, true, nil
		}
		lq := intake.ListQuery{Limit: chatScanBatch, After: after}
		if state == bulkUnacknowledged {
			lq.Unacknowledged = true
		} else {
			lq.State = intake.State(state)
		}
		batch, err := h.cfg.Store.List(ctx, lq)
		if err != nil {
			return nil, false, err
		}
		for _, row := range batch {
			v := h.view(row)
			if (action == actionAck && !v.CanAck) || (action == actionRequeue && !v.CanRequeue) || (chat != "" && v.Chat != chat) {
				continue
			}
			if len(rows) == MaxBulk {
				return rows, true, nil
			}
			rows = append(rows, row)
		}
		if len(batch) < lq.Limit {
			return rows, false, nil
		}
		scanned += len(batch)
		last := batch[len(batch)-1].UpdateID
		after = &last
	}
}

// bulkFilter reads and checks a bulk action's filter.
func (h *Handler) bulkFilter(w http.ResponseWriter, r *http.Request, action string, state, chat string) bool {
	switch {
	case state != string(intake.StateFailed) && state != string(intake.StateAbandoned) && state != bulkUnacknowledged:
		h.fail(w, r, http.StatusBadRequest, "Bad request", "A bulk action takes failed, abandoned or unacknowledged rows.")
	case action == actionAck && state != bulkUnacknowledged:
		h.fail(w, r, http.StatusBadRequest, "Bad request", "Only unacknowledged exhaustions can be acknowledged.")
	case len(chat) > maxChatParam:
		h.fail(w, r, http.StatusBadRequest, "Bad request", "The chat id is too long.")
	default:
		return true
	}
	return false
}

// bulkConfirm shows the exact set of rows a bulk action would take, with
// their count, and a form naming each row's identity.
func (h *Handler) bulkConfirm(w http.ResponseWriter, r *http.Request) {
	action, ok := h.checkAction(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	d := bulkData{Action: action, State: q.Get("state"), Chat: strings.TrimSpace(q.Get("chat")), Max: MaxBulk, MaxScan: MaxChatScan}
	if !h.bulkFilter(w, r, action, d.State, d.Chat) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	rows, more, err := h.bulkSelect(ctx, action, d.State, d.Chat)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	d.More = more
	for _, row := range rows {
		d.Items = append(d.Items, bulkItem{rowView: h.view(row), Key: identityKey(intake.Identity{UpdateID: row.UpdateID, Attempt: row.Attempts, ClaimID: row.ClaimID})})
	}
	title := fmt.Sprintf("%s %d %s?", strings.ToUpper(action[:1])+action[1:], len(d.Items), plural(len(d.Items), "update", "updates"))
	h.render(w, r, http.StatusOK, "bulk", page{Title: title, Nav: "exhaustions", Data: d})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// bulkAct applies an action to exactly the identities the confirmation
// named: a row that changed since (another attempt, someone else's action)
// is left alone and reported.
func (h *Handler) bulkAct(w http.ResponseWriter, r *http.Request) {
	action, ok := h.checkAction(w, r)
	if !ok {
		return
	}
	keys := r.PostForm["id"]
	if len(keys) == 0 || len(keys) > MaxBulk {
		h.fail(w, r, http.StatusBadRequest, "Bad request", fmt.Sprintf("A bulk action names 1 to %d rows.", MaxBulk))
		return
	}
	ids := make([]intake.Identity, 0, len(keys))
	for _, k := range keys {
		id, err := parseIdentityKey(k)
		if err != nil {
			h.fail(w, r, http.StatusBadRequest, "Bad request", err.Error())
			return
		}
		if slices.ContainsFunc(ids, func(o intake.Identity) bool { return o.UpdateID == id.UpdateID }) {
			h.fail(w, r, http.StatusBadRequest, "Bad request", "The confirmed set names an update twice.")
			return
		}
		ids = append(ids, id)
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	d := bulkResultData{Action: action}
	defer h.stats.Forget()
	for _, id := range ids {
		var applied bool
		var err error
		var row intake.Row
		var found bool
		switch action {
		case actionAck:
			applied, err = h.durable.AcknowledgeExhaustion(ctx, id, time.Now())
		case actionRequeue:
			row, found, err = h.cfg.Store.Get(ctx, id.UpdateID)
			if err == nil && stale(action, id, row, found) == "" && !row.Expired() {
				applied, err = h.cfg.Store.Requeue(ctx, id.UpdateID, time.Now())
			}
		}
		if err != nil {
			h.storeFailed(w, r, err)
			return
		}
		if applied {
			d.Applied = append(d.Applied, id.UpdateID)
			continue
		}
		if row, found, err = h.cfg.Store.Get(ctx, id.UpdateID); err != nil {
			h.storeFailed(w, r, err)
			return
		}
		why := stale(action, id, row, found)
		if why == "" {
			why = fmt.Sprintf("The store refused to %s update %d: it changed since the confirmation.", action, id.UpdateID)
			if action == actionRequeue && row.Expired() {
				why = fmt.Sprintf("Update %d expired; requeued, it would expire again at once.", id.UpdateID)
			}
		}
		d.Refused = append(d.Refused, bulkRefusal{UpdateID: id.UpdateID, Why: why})
	}
	h.log.Info("dashboard: bulk "+action+" applied", "named", len(ids), "applied", len(d.Applied), "refused", len(d.Refused), "remote", r.RemoteAddr)
	code := http.StatusOK
	if len(d.Applied) == 0 {
		code = http.StatusConflict
	}
	title := fmt.Sprintf("%s: %d of %d", bulkDone(action), len(d.Applied), len(ids))
	h.render(w, r, code, "bulkresult", page{Title: title, Nav: "exhaustions", Data: d})
}

func bulkDone(action string) string {
	if action == actionAck {
		return "Acknowledged"
	}
	return "Requeued"
}
