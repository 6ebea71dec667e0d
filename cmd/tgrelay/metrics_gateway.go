package main

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// maxMethodLabels bounds the distinct method label values of the gateway
// metrics; later methods are counted as "other". The app chooses method
// names, so the set is not fixed.
const maxMethodLabels = 64

// gatewayMetrics are the gateway's Prometheus metrics.
type gatewayMetrics struct {
	calls       *prometheus.CounterVec // method, outcome, replayed, delivered
	stale       prometheus.Counter
	replays     prometheus.Counter
	telegram429 prometheus.Counter
	waits       prometheus.Histogram

	mu      sync.Mutex
	methods map[string]bool
}

func newGatewayMetrics(reg *prometheus.Registry) *gatewayMetrics {
	g := &gatewayMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tgrelay_gateway_calls_total",
			Help: "Bot API calls the gateway answered, by method (at most 64 distinct, then other), outcome (answered, throttled, not-dispatched, unknown, stale, refused), replayed (answered from the journal) and delivered (false: the app's connection had ended, or the write failed, so the app never got the answer; a sent call's outcome is journaled all the same)."},
			[]string{"method", "outcome", "replayed", "delivered"}),
		stale: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_gateway_stale_refusals_total",
			Help: "Calls refused because their attempt no longer held its lease (nothing sent)."}),
		replays: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_gateway_replays_total",
			Help: "Calls answered from the journal instead of being sent again."}),
		telegram429: prometheus.NewCounter(prometheus.CounterOpts{Name: "tgrelay_gateway_telegram_429_total",
			Help: "429 answers from Telegram itself (its limits hit despite the limiter)."}),
		waits: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tgrelay_gateway_limiter_wait_seconds",
			Help: "How long counted calls waited for their turn in the limiter.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		methods: map[string]bool{},
	}
	reg.MustRegister(g.calls, g.stale, g.replays, g.telegram429, g.waits)
	return g
}

// method bounds the method label.
func (g *gatewayMetrics) method(m string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.methods[m] {
		return m
	}
	if len(g.methods) >= maxMethodLabels {
		return "other"
	}
	g.methods[m] = true
	return m
}

func (g *gatewayMetrics) observe(e relay.Event) {
	switch e.Kind {
	case relay.KindGatewayCall:
		c := e.Call
		g.calls.WithLabelValues(g.method(c.Method), string(c.Outcome), strconv.FormatBool(c.Replayed), strconv.FormatBool(!c.Undelivered)).Inc()
		if c.Outcome == wire.OutcomeStale {
			g.stale.Inc()
		}
		if c.Replayed {
			g.replays.Inc()
		}
	case relay.KindLimiter:
		switch e.Limiter.Kind {
		case throttle.EventGranted:
			g.waits.Observe(e.Limiter.Wait.Seconds())
		case throttle.EventTooManyRequests:
			g.telegram429.Inc()
		}
	}
}
