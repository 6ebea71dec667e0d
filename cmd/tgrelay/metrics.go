package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/pacedstats"
	"github.com/tgrelay/tgrelay/relay"
)

// statsTimeout bounds the store query behind the state gauges of one
// scrape, and the readiness probe.
const statsTimeout = 5 * time.Second

// relayMetrics are serve's Prometheus metrics, on a registry of their own
// (no global state). Label values come from fixed sets, never from input.
type relayMetrics struct {
	reg *prometheus.Registry

	accepted       prometheus.Counter
	duplicate      prometheus.Counter
	rejected       *prometheus.CounterVec // reason
	attempts       prometheus.Counter
	failures       *prometheus.CounterVec // reason
	settlements    *prometheus.CounterVec // state
	leasesLost     prometheus.Counter
	exhausted      prometheus.Counter
	expired        *prometheus.CounterVec // type
	acknowledged   prometheus.Counter
	exhaustFailed  prometheus.Counter
	unactedReplies prometheus.Counter
	storeErrors    *prometheus.CounterVec // step
	forwardSeconds *prometheus.HistogramVec
	// The children every update touches, looked up once.
	forwardOK, forwardError prometheus.Observer
	completed               prometheus.Counter
	pollBatches             prometheus.Counter
	pollErrors              prometheus.Counter
	webhookOwned            prometheus.Gauge
	appRefusals             prometheus.Counter
	declines                *prometheus.CounterVec // kind, outcome
	gateway                 *gatewayMetrics
}

// newRelayMetrics registers serve's metrics; stats reads the store's
// counts at scrape time.
func newRelayMetrics(stats func(context.Context) (intake.Stats, error)) *relayMetrics {
	reg := prometheus.NewRegistry()
	m := &relayMetrics{
		reg:       reg,
		accepted:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_updates_accepted_total", Help: "Updates newly recorded (webhook or long polling)."}),
		duplicate: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_updates_duplicate_total", Help: "Updates received again and not recorded again."}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tgrelay_updates_rejected_total",
			Help: "Updates refused, by reason: invalid (not an update), unauthorized (wrong secret), too_large, method, store_error (Telegram delivers again)."}, []string{"reason"}),
		attempts: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_attempts_total", Help: "Forward attempts started (claims taken)."}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tgrelay_attempt_failures_total",
			Help: "Failed forward attempts, by reason: http_429, http_503, http_4xx, http_5xx, app_auth, timeout, connection, cancelled, panic, unparsable, other."}, []string{"reason"}),
		settlements: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tgrelay_settlements_total", Help: "Attempt settlements applied, by resulting state."}, []string{"state"}),
		leasesLost:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_leases_lost_total", Help: "Attempts that lost their lease."}),
		exhausted:   prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_exhaustions_total", Help: "Updates given up and kept as exhaustions."}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tgrelay_updates_expired_total",
			Help: "Updates with a deadline (callback, inline, pre-checkout, shipping queries) that ended expired: their deadline passed before the app answered. Not exhaustions."}, []string{"type"}),

		acknowledged: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_exhaustions_acknowledged_total",
			Help: "Exhaustions acknowledged by the exhaustion endpoint."}),
		unactedReplies: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_unacted_replies_total",
			Help: "Bot API calls the app put in a forward's response body (webhook replies) that were not performed."}),
		exhaustFailed: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_exhaustion_delivery_failures_total",
			Help: "Failed deliveries to the exhaustion endpoint (delivered again later)."}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tgrelay_store_errors_total", Help: "Store errors of the runner, by step."}, []string{"step"}),
		forwardSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "tgrelay_forward_duration_seconds",
			Help: "Time of one forward to the bot's endpoint, by outcome (ok or error).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"outcome"}),
		pollBatches: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_poll_batches_total", Help: "getUpdates batches recorded in full and confirmed."}),
		pollErrors:  prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_poll_errors_total", Help: "Failed getUpdates calls or batches (retried)."}),
		appRefusals: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_app_auth_failures_total",
			Help: "Update forwards the app answered 401 or 403: a configuration problem (check --app-secret-token against the app's secret check); each such update is held, not given up."}),
		declines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tgrelay_declines_total",
			Help: "Queries the app had not answered near Telegram's deadline, answered by the relay (see --decline-margin), by kind (callback_query, pre_checkout_query, shipping_query) and outcome: declined (sent), answered_already (the app's answer came first and was replayed), failed."}, []string{"kind", "outcome"}),
		webhookOwned: prometheus.NewGauge(prometheus.GaugeOpts{Name: "tgrelay_webhook_owned", Help: "1 while the last webhook check found the webhook pointing here, 0 when it moved; absent in polling mode."}),
	}
	m.gateway = newGatewayMetrics(reg)
	m.forwardOK = m.forwardSeconds.WithLabelValues("ok")
	m.forwardError = m.forwardSeconds.WithLabelValues("error")
	m.completed = m.settlements.WithLabelValues(string(intake.StateCompleted))
	for _, r := range []string{relay.RejectInvalid, relay.RejectUnauthorized, relay.RejectTooLarge, relay.RejectMethod, relay.RejectStoreError} {
		m.rejected.WithLabelValues(r)
	}
	// The types with a deadline are shown at zero from the start.
	for _, k := range []string{intake.KindCallbackQuery, intake.KindInlineQuery, intake.KindPreCheckoutQuery, intake.KindShippingQuery} {
		m.expired.WithLabelValues(k)
	}
	reg.MustRegister(m.accepted, m.duplicate, m.rejected, m.attempts, m.failures, m.settlements, m.leasesLost,
		m.exhausted, m.expired, m.acknowledged, m.exhaustFailed, m.unactedReplies, m.appRefusals, m.declines, m.storeErrors, m.forwardSeconds, m.pollBatches, m.pollErrors,
		newStatsCollector(stats),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in Prometheus' exposition format.
func (m *relayMetrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Timeout: statsTimeout + time.Second})
}

// registerWebhookOwned exposes tgrelay_webhook_owned (webhook mode with a
// claim only).
func (m *relayMetrics) registerWebhookOwned() { m.reg.MustRegister(m.webhookOwned) }

// registerApp adds the gauges of the app's side: tgrelay_app_auth_failing
// (1 while the app's last answer to a forward was 401 or 403) and
// tgrelay_app_auth_held_updates (the updates held for it).
func (m *relayMetrics) registerApp(app func() relay.AppStatus) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tgrelay_app_auth_failing",
			Help: "1 while the app's last answer to a forward was 401 or 403 (a configuration alert: check --app-secret-token), else 0.",
		}, func() float64 { return boolGauge(app().AuthFailing) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tgrelay_app_auth_held_updates",
			Help: "Updates held, unspent, because the app answers 401 or 403; forwarded again until it accepts them.",
		}, func() float64 { return float64(app().Held) }),
	)
}

// registerStoreFile adds tgrelay_store_file_ok, 1 while the store's path
// names the database file it has open, 0 while it does not (the SQLite file
// was deleted or replaced: intake then answers 503).
func (m *relayMetrics) registerStoreFile(ok func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tgrelay_store_file_ok",
		Help: "1 while the SQLite path names the open database file, 0 while it was deleted or replaced (updates are refused with 503 until it is back).",
	}, func() float64 { return boolGauge(ok()) }))
}

// Observe feeds the relay's events into the metrics; it is the relay's
// Prometheus [relay.Observer] EventFunc.
func (m *relayMetrics) Observe(e relay.Event) {
	switch e.Kind {
	case relay.KindAccepted:
		m.accepted.Inc()
	case relay.KindDuplicate:
		m.duplicate.Inc()
	case relay.KindRejected:
		m.rejected.WithLabelValues(e.Reason).Inc()
	case relay.KindClaimed:
		m.attempts.Inc()
	case relay.KindForwarded:
		h := m.forwardOK
		if e.Err != nil {
			h = m.forwardError
		}
		h.Observe(e.Duration.Seconds())
	case relay.KindFailed:
		m.failures.WithLabelValues(e.Reason).Inc()
	case relay.KindSettled:
		if e.State == intake.StateCompleted {
			m.completed.Inc()
			break
		}
		m.settlements.WithLabelValues(string(e.State)).Inc()
	case relay.KindLeaseLost:
		m.leasesLost.Inc()
	case relay.KindExhausted:
		m.exhausted.Inc()
	case relay.KindExpired:
		m.expired.WithLabelValues(relay.UpdateKindLabel(e.Reason)).Inc()

	case relay.KindExhaustionFailed:
		m.exhaustFailed.Inc()
	case relay.KindAcknowledged:
		m.acknowledged.Inc()
	case relay.KindUnactedReply:
		m.unactedReplies.Inc()
	case relay.KindAppAuthRefused:
		m.appRefusals.Inc()
	case relay.KindDeclined:
		outcome := "declined"
		switch {
		case e.Err != nil:
			outcome = "failed"
		case e.Decline.Replayed:
			outcome = "answered_already"
		}
		m.declines.WithLabelValues(e.Reason, outcome).Inc()
	case relay.KindStoreError:
		m.storeErrors.WithLabelValues(string(e.Step)).Inc()
	case relay.KindPollBatch:
		m.pollBatches.Inc()
	case relay.KindPollError:
		m.pollErrors.Inc()
	case relay.KindGatewayCall, relay.KindLimiter:
		m.gateway.observe(e)
	case relay.KindWebhookClaimed, relay.KindWebhookChecked:
		if e.Err == nil {
			m.webhookOwned.Set(boolGauge(e.Owned))
		}
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// statsCollector reads the store's counts at scrape time, shared and paced
// (package pacedstats): counting reads the whole table, and a scrape must
// neither keep the database busy nor time out on a big table.
type statsCollector struct {
	counts                       *pacedstats.Cache
	rows, pendingExh, oldest, up *prometheus.Desc
}

func newStatsCollector(stats func(context.Context) (intake.Stats, error)) *statsCollector {
	return &statsCollector{
		counts:     &pacedstats.Cache{Stats: stats},
		rows:       prometheus.NewDesc("tgrelay_updates", "Stored updates by state.", []string{"state"}, nil),
		pendingExh: prometheus.NewDesc("tgrelay_exhaustions_pending", "Unacknowledged exhaustions in the store.", nil, nil),
		oldest:     prometheus.NewDesc("tgrelay_oldest_pending_age_seconds", "Age of the oldest pending update; 0 when none is pending.", nil, nil),
		up: prometheus.NewDesc("tgrelay_store_up", fmt.Sprintf("1 when the store's latest count of its rows succeeded, 0 otherwise (a count is reused for %d times what it took, %v to %v).",
			pacedstats.Pace, pacedstats.MinAge, pacedstats.MaxAge), nil, nil),
	}
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.rows
	ch <- c.pendingExh
	ch <- c.oldest
	ch <- c.up
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), statsTimeout)
	defer cancel()
	st, _, err := c.counts.Get(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, 1)
	for _, s := range []intake.State{intake.StatePending, intake.StateProcessing, intake.StateFailed, intake.StateCompleted, intake.StateAbandoned} {
		ch <- prometheus.MustNewConstMetric(c.rows, prometheus.GaugeValue, float64(st.Count[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(c.pendingExh, prometheus.GaugeValue, float64(st.Unacknowledged))
	age := 0.0
	if !st.OldestPending.IsZero() {
		age = max(time.Since(st.OldestPending).Seconds(), 0)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, age)
}
