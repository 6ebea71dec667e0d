package main

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/wire"
)

// TestGatewayMetricsDelivered: an answer the app never got (its
// connection gone) is counted apart from the ones it got.
func TestGatewayMetricsDelivered(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	g := newGatewayMetrics(reg)
	for _, c := range []gateway.CallEvent{
		{Method: "sendMessage", Outcome: wire.OutcomeAnswered},
		{Method: "sendMessage", Outcome: wire.OutcomeAnswered},
		{Method: "sendMessage", Outcome: wire.OutcomeAnswered, Undelivered: true},
		{Method: "sendMessage", Outcome: wire.OutcomeNotDispatched, Undelivered: true},
	} {
		g.observe(relay.Event{Kind: relay.KindGatewayCall, Call: c})
	}
	for _, tc := range []struct {
		outcome, delivered string
		want               float64
	}{
		{"answered", "true", 2},
		{"answered", "false", 1},
		{"not-dispatched", "false", 1},
		{"not-dispatched", "true", 0},
	} {
		if got := counterValue(t, reg, "tgrelay_gateway_calls_total", map[string]string{
			"method": "sendMessage", "outcome": tc.outcome, "replayed": "false", "delivered": tc.delivered}); got != tc.want {
			t.Errorf("calls{outcome=%s,delivered=%s} = %v, want %v", tc.outcome, tc.delivered, got, tc.want)
		}
	}
}

// counterValue returns the value of the counter name with exactly labels
// in reg (0 when there is none).
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(labels) {
				continue
			}
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestDeclineMetrics: declines are counted by kind and outcome.
func TestDeclineMetrics(t *testing.T) {
	t.Parallel()
	m := newRelayMetrics(func(context.Context) (intake.Stats, error) { return intake.Stats{}, nil })
	for _, e := range []relay.Event{
		{Kind: relay.KindDeclined, Reason: relay.DeclineCallbackQuery},
		{Kind: relay.KindDeclined, Reason: relay.DeclineCallbackQuery, Decline: relay.Decline{Replayed: true}},
		{Kind: relay.KindDeclined, Reason: relay.DeclinePreCheckoutQuery, Err: &relay.DeclineError{}},
		{Kind: relay.KindDeclined, Reason: relay.DeclinePreCheckoutQuery},
	} {
		m.Observe(e)
	}
	for _, tc := range []struct {
		kind, outcome string
		want          float64
	}{
		{relay.DeclineCallbackQuery, "declined", 1},
		{relay.DeclineCallbackQuery, "answered_already", 1},
		{relay.DeclinePreCheckoutQuery, "failed", 1},
		{relay.DeclinePreCheckoutQuery, "declined", 1},
	} {
		if got := counterValue(t, m.reg, "tgrelay_declines_total", map[string]string{"kind": tc.kind, "outcome": tc.outcome}); got != tc.want {
			t.Errorf("declines{kind=%s,outcome=%s} = %v, want %v", tc.kind, tc.outcome, got, tc.want)
		}
	}
}
