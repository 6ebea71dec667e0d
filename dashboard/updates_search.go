package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tgrelay/tgrelay/intake"
)

// maxQueryParam bounds the search text of the Updates page.
const maxQueryParam = 200

// updatesNewest is the Updates page of a store that can search: newest
// first, filtered by state and chat, and searched by update id, chat or
// body text.
func (h *Handler) updatesNewest(w http.ResponseWriter, r *http.Request, is intake.AdminStore, d updatesData, limit int) {
	q := r.URL.Query()
	d.Newest = true
	switch {
	case len(d.Query) > maxQueryParam:
		h.fail(w, r, http.StatusBadRequest, "Bad request", "The search text is too long.")
		return
	case h.redact(d.Query) != d.Query:
		// Searching for a secret would tell which bodies carry it. (A
		// piece of one is searched, but never matches inside one: see
		// matchShown.)
		h.fail(w, r, http.StatusBadRequest, "Bad request", "The search text contains a secret; it is not searched.")
		return
	}
	sq := intake.SearchQuery{State: intake.State(d.State), Chat: d.Chat}
	expired := d.State == intake.StateNameExpired
	if expired {
		sq.State = intake.StateAbandoned
	}
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			h.fail(w, r, http.StatusBadRequest, "Bad request", "before must be an update id.")
			return
		}
		sq.Before, d.Paged = &n, true
	}
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	// A number names an update or a chat; anything else is body text.
	if id, err := strconv.ParseInt(d.Query, 10, 64); err == nil {
		if id >= 0 && !d.Paged {
			row, found, err := h.cfg.Store.Get(ctx, id)
			if err != nil {
				h.storeFailed(w, r, err)
				return
			}
			if found {
				v := h.view(row)
				d.Exact = &v
			}
		}
		if sq.Chat == "" {
			sq.Chat = d.Query
		}
	} else {
		sq.Text = d.Query
	}
	keep := func(row intake.Row) bool {
		return (!expired || row.Expired()) && (sq.Text == "" || h.matchShown(row, sq.Text))
	}
	rows, next, more, scanned, cut, err := searchScan(ctx, is, sq, keep, limit)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	if expired {
		d.Scanned, d.ScanCut = scanned, cut
	}
	for _, row := range rows {
		d.Rows = append(d.Rows, h.view(row))
	}
	if d.Exact != nil {
		one := []rowView{*d.Exact}
		if err := h.markHeld(ctx, one); err != nil {
			h.storeFailed(w, r, err)
			return
		}
		d.Exact = &one[0]
	}
	if err := h.markHeld(ctx, d.Rows); err != nil {
		h.storeFailed(w, r, err)
		return
	}
	filter := url.Values{}
	for k, v := range map[string]string{"state": d.State, "chat": d.Chat, "q": d.Query} {
		if v != "" {
			filter.Set(k, v)
		}
	}
	if q.Get("limit") != "" {
		filter.Set("limit", strconv.Itoa(limit))
	}
	d.Bulk = (d.State == string(intake.StateFailed) || d.State == string(intake.StateAbandoned)) && d.Query == "" && !h.cfg.ReadOnly && len(d.Rows) > 0
	d.First = h.link("updates", filter)
	if more {
		filter.Set("before", strconv.FormatInt(next, 10))
		d.Next = h.link("updates", filter)
	}
	h.render(w, r, http.StatusOK, "updates", page{Title: "Updates", Nav: "updates", Live: true, Data: d})
}

// matchShown reports whether the search text q is in row's body as the
// dashboard shows it, with every secret masked. The store matches the raw
// body, so without this check a piece of a secret (the bot token's secret
// half after its public bot id, a prefix of the webhook secret) would find
// the updates whose bodies carry it, and a search could spell the secret
// out one character at a time. With it, a search for any piece of a
// secret, of any length, answers as if the secret were not in the body:
// the answer tells nothing about the secret, and no refusal does either
// (a refusal of pieces would itself say "this is part of a secret").
func (h *Handler) matchShown(row intake.Row, q string) bool {
	return strings.Contains(h.redact(string(row.Body)), q)
}

// searchScan reads rows newest first, keeping those keep accepts, until
// the page is full, the store has no more or MaxChatScan rows were read.
// When more is set, a further page may exist; it continues below next.
func searchScan(ctx context.Context, is intake.AdminStore, sq intake.SearchQuery, keep func(intake.Row) bool, limit int) (rows []intake.Row, next int64, more bool, scanned int, cut bool, err error) {
	return scanRows(max(limit+1, chatScanBatch), sq.Before, func(before *int64, n int) ([]intake.Row, error) {
		sq.Before, sq.Limit = before, n
		return is.Search(ctx, sq)
	}, keep, limit)
}

// scanRows pages through rows with fetch, from the cursor start (nil: the
// first row), batch rows at a time, keeping those keep accepts, until
// limit rows are kept, fetch has no more or MaxChatScan rows were read. It
// returns the rows kept, the cursor the next page continues from when
// more is set, how many rows it read, and whether the scan bound cut it.
// fetch lists at most n rows strictly beyond cursor, in its own order.
func scanRows(batch int, start *int64, fetch func(cursor *int64, n int) ([]intake.Row, error), keep func(intake.Row) bool, limit int) (rows []intake.Row, next int64, more bool, scanned int, cut bool, err error) {
	cursor := start
	for scanned < MaxChatScan {
		n := min(batch, MaxChatScan-scanned)
		got, err := fetch(cursor, n)
		if err != nil {
			return nil, 0, false, scanned, false, err
		}
		for i, row := range got {
			if !keep(row) {
				continue
			}
			if len(rows) == limit {
				// A further match exists: the next page starts after the
				// last row shown.
				return rows, rows[limit-1].UpdateID, true, scanned + i, false, nil
			}
			rows = append(rows, row)
		}
		scanned += len(got)
		if len(got) < n {
			return rows, 0, false, scanned, false, nil
		}
		last := got[len(got)-1].UpdateID
		cursor = &last
	}
	return rows, *cursor, true, scanned, true, nil
}

// markHeld sets HeldBehind on the pending rows that wait for an earlier
// update of their chat, when the store can tell.
func (h *Handler) markHeld(ctx context.Context, rows []rowView) error {
	is := h.cfg.Store
	for i := range rows {
		if rows[i].State != intake.StatePending {
			continue
		}
		id, held, err := is.HeldBehind(ctx, rows[i].UpdateID)
		if err != nil {
			return err
		}
		rows[i].HeldBehind, rows[i].Held = id, held
	}
	return nil
}
