package dashboard

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"strconv"

	"github.com/tgrelay/tgrelay/intake"
)

type exhaustionsData struct {
	Durable bool // the store keeps exhaustions at all
	Rows    []rowView
	Total   int // unacknowledged exhaustions in the store
	Next    template.URL
	Paged   bool
}

// exhaustions lists the unacknowledged exhaustions, oldest update first,
// each with its exact identity and the Acknowledge and Requeue buttons.
// Acknowledged ones are abandoned rows, listed by the Updates page.
func (h *Handler) exhaustions(w http.ResponseWriter, r *http.Request) {
	after, limit, err := h.pageQuery(r.URL.Query())
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	d := exhaustionsData{Durable: h.durable != nil, Paged: after != nil}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	st, _, err := h.stats.Get(ctx)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	d.Total = st.Unacknowledged
	rows, err := h.cfg.Store.List(ctx, intake.ListQuery{Unacknowledged: true, After: after, Limit: limit + 1})
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if len(rows) > limit {
		rows = rows[:limit]
		next := url.Values{"after": {strconv.FormatInt(rows[limit-1].UpdateID, 10)}}
		if r.URL.Query().Get("limit") != "" {
			next.Set("limit", strconv.Itoa(limit))
		}
		d.Next = h.link("exhaustions", next)
	}
	for _, row := range rows {
		d.Rows = append(d.Rows, h.view(row))
	}
	h.render(w, r, http.StatusOK, "exhaustions", page{Title: "Exhaustions", Nav: "exhaustions", Live: true, Data: d})
}
