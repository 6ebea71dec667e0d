package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Bounds of the Processes page.
const (
	// maxProcessesShown bounds the processes and the held rows the page
	// reads; maxCrashesShown the crashed updates it lists.
	maxProcessesShown = 200
	maxCrashesShown   = 50
	// maxHeldPerProcess bounds the update ids shown beside one process.
	maxHeldPerProcess = 20
)

// processView is one registered serve process.
type processView struct {
	intake.Process
	Live       bool
	Held       []int64 // update ids it holds, newest first, at most maxHeldPerProcess
	HeldCount  int
	HeldHidden int
}

// orphanView is a processing row whose process is gone or unknown.
type orphanView struct {
	intake.Row
	Owner string
	Why   string
}

type processesData struct {
	Supported  bool // the store can list processes
	Heartbeats bool // the store keeps heartbeats (a ProcessStore)
	Processes  []processView
	Orphans    []orphanView
	Crashed    []rowView
	// HeldCut: more processing rows than the page reads.
	HeldCut bool
}

// processes shows the serve processes, their heartbeats and the rows each
// holds, the rows whose process is gone, and the updates that crashed
// their process.
func (h *Handler) processes(w http.ResponseWriter, r *http.Request) {
	var d processesData
	is := h.cfg.Store
	d.Supported = true
	_, d.Heartbeats = h.cfg.Store.(intake.ProcessStore)
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	pl, err := is.Processes(ctx, maxProcessesShown)
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	crashed, err := is.Search(ctx, intake.SearchQuery{Crashed: true, Limit: maxCrashesShown})
	if err != nil {
		h.storeFailed(w, r, err)
		return
	}
	now := time.Now()
	d.Processes, d.Orphans = holdings(pl, now)
	for i := range d.Orphans {
		d.Orphans[i].Error = h.redact(d.Orphans[i].Error)
	}
	d.HeldCut = len(pl.Held) == maxProcessesShown
	for _, row := range crashed {
		d.Crashed = append(d.Crashed, h.view(row))
	}
	h.render(w, r, http.StatusOK, "processes", page{Title: "Processes", Nav: "processes", Live: true, Data: d, Now: now})
}

// holdings groups the processing rows by the process holding them, and
// lists the rows whose process is gone, each with what will happen to it.
func holdings(pl intake.ProcessList, now time.Time) ([]processView, []orphanView) {
	procs := make([]processView, len(pl.Processes))
	byID := make(map[string]*processView, len(pl.Processes))
	for i, p := range pl.Processes {
		procs[i] = processView{Process: p, Live: !p.Until.Before(now)}
		byID[p.ID] = &procs[i]
	}
	var orphans []orphanView
	for _, hd := range pl.Held {
		p := byID[hd.Owner]
		leaseLive := !hd.Row.DueAt.Before(now)
		switch {
		case p != nil && p.Live:
			p.HeldCount++
			if len(p.Held) < maxHeldPerProcess {
				p.Held = append(p.Held, hd.Row.UpdateID)
			} else {
				p.HeldHidden++
			}
			continue
		case hd.Owner == "" && leaseLive:
			// A claim without heartbeats: its lease is what holds it.
			orphans = append(orphans, orphanView{Row: hd.Row, Why: "claimed without a heartbeat; held until its lease ends"})
		case hd.Owner == "":
			orphans = append(orphans, orphanView{Row: hd.Row, Why: "its lease ended: the next sweep takes it over"})
		case p != nil:
			orphans = append(orphans, orphanView{Row: hd.Row, Owner: hd.Owner, Why: "its process's heartbeat lapsed: the next sweep takes it over and counts a crash"})
		default:
			orphans = append(orphans, orphanView{Row: hd.Row, Owner: hd.Owner, Why: "its process left or was reaped: the next sweep takes it over"})
		}
	}
	return procs, orphans
}
