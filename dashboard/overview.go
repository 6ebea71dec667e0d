package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// storeTimeout bounds every store call a page makes.
const storeTimeout = 10 * time.Second

// minChartBuckets is the shortest span a chart draws (five minutes): a
// recorder younger than Window is charted from its start, not over an hour
// it never saw.
const minChartBuckets = 30

// allStates lists the row states in lifecycle order.
var allStates = []intake.State{intake.StatePending, intake.StateProcessing, intake.StateFailed, intake.StateCompleted, intake.StateAbandoned}

type stateCount struct {
	State intake.State
	N     int
}

type overviewData struct {
	StoreName      string
	States         []stateCount
	Rows           int
	Unacknowledged int
	OldestPending  time.Time
	// CountedAt is when the counts were taken, set when that was longer
	// ago than a refresh (they are shared and paced: package pacedstats);
	// zero otherwise.
	CountedAt time.Time

	HasRecorder bool
	Snapshot    Snapshot
	Charts      []chart
	Window      time.Duration // the span the charts draw
	Bucket      time.Duration

	Health health
	// StoreDown: the store did not answer, so its figures are missing.
	StoreDown bool
}

// chartSpan is how many of the newest buckets to draw: the whole window,
// or, for a recorder younger than it, from its start (at least
// minChartBuckets).
func chartSpan(s Snapshot) int {
	age := s.Taken.Sub(s.Started)
	if age >= Window {
		return numBuckets
	}
	return min(max(int(age/BucketWidth)+2, minChartBuckets), numBuckets)
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), storeTimeout)
	defer cancel()
	now := time.Now()
	hin := healthInput{Now: now, StatsOK: true}
	if hc, ok := h.cfg.Store.(intake.HealthChecker); ok {
		hin.HasHealth = true
		if hin.HealthErr = hc.Health(ctx); hin.HealthErr != nil {
			h.log.Error("dashboard: store health", "err", h.redact(hin.HealthErr.Error()))
			h.stats.Forget() // no counts from before beside a failing check
		}
	}
	st, counted, err := h.stats.Get(ctx)
	if err != nil {
		// The verdict still renders: it says the store is down.
		h.log.Error("dashboard: store", "path", r.URL.Path, "err", h.redact(err.Error()))
		hin.StatsOK = false
		st = intake.Stats{Count: map[intake.State]int{}}
	}
	hin.Stats = st
	if _, ok := h.cfg.Store.(intake.ProcessStore); ok {
		if is := h.cfg.Store; hin.StatsOK {
			pl, err := is.Processes(ctx, maxProcessesShown)
			if err != nil {
				h.log.Error("dashboard: store", "path", r.URL.Path, "err", h.redact(err.Error()))
			} else {
				hin.Heartbeats, hin.Procs = true, pl.Processes
			}
		}
	}
	d := overviewData{StoreName: h.redact(h.cfg.StoreName), Unacknowledged: st.Unacknowledged,
		OldestPending: st.OldestPending, Window: Window, Bucket: BucketWidth}
	if now.Sub(counted) >= h.cfg.RefreshInterval {
		d.CountedAt = counted
	}
	if d.StoreName == "" {
		d.StoreName = "unnamed"
	}
	for _, s := range allStates {
		d.States = append(d.States, stateCount{State: s, N: st.Count[s]})
		d.Rows += st.Count[s]
	}
	if rec := h.cfg.Recorder; rec != nil {
		d.HasRecorder = true
		d.Snapshot = rec.Snapshot()
		hin.HasRecorder, hin.Snapshot = true, d.Snapshot
		d.Snapshot.Webhook.LastError = h.redact(d.Snapshot.Webhook.LastError)
		d.Snapshot.Webhook.CheckError = h.redact(d.Snapshot.Webhook.CheckError)
		d.Snapshot.Webhook.OwnerHost = h.redact(d.Snapshot.Webhook.OwnerHost)
		span := chartSpan(d.Snapshot)
		d.Window = time.Duration(span) * BucketWidth
		var b [numSeries][]uint32
		for k, all := range d.Snapshot.Buckets {
			b[k] = all[len(all)-span:]
		}
		t := d.Snapshot.Totals
		d.Charts = []chart{
			newChart(SeriesAccepted, "Accepted/s", true, b[SeriesAccepted], t[SeriesAccepted]),
			newChart(SeriesForwarded, "Forwarded/s", true, b[SeriesForwarded], t[SeriesForwarded]),
			newChart(SeriesCompleted, "Completed", false, b[SeriesCompleted], t[SeriesCompleted]),
			newChart(SeriesRetried, "Retried", false, b[SeriesRetried], t[SeriesRetried]),
			newChart(SeriesExhausted, "Exhausted", false, b[SeriesExhausted], t[SeriesExhausted]),
			newChart(SeriesExpired, "Expired", false, b[SeriesExpired], t[SeriesExpired]),
		}
	}
	d.StoreDown = !hin.StatsOK
	d.Health = judge(hin)
	for i := range d.Health.Checks {
		d.Health.Checks[i].Text = h.redact(d.Health.Checks[i].Text)
	}
	d.Health.Reason = h.redact(d.Health.Reason)
	h.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Live: true, Data: d, Now: now})
}
