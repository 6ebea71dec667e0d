package relay

import (
	"errors"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/wire"
)

// The relay's events reach the dashboard's recorder as its series,
// counters, webhook status and gateway figures.
func TestDashboardObserverMapsEvents(t *testing.T) {
	t.Parallel()
	rec := dashboard.NewRecorder()
	o := dashboardObserver{rec}
	id := intake.Identity{UpdateID: 1, Attempt: 1, ClaimID: "c"}
	for _, e := range []Event{
		{Kind: KindAccepted, ID: id}, {Kind: KindDuplicate, ID: id},
		{Kind: KindForwarded, ID: id}, {Kind: KindClaimed, ID: id},
		{Kind: KindSettled, ID: id, State: intake.StateCompleted},
		{Kind: KindSettled, ID: id, State: intake.StateFailed},
		{Kind: KindExhausted, ID: id}, {Kind: KindLeaseLost, ID: id},
		{Kind: KindGatewayCall, Call: gateway.CallEvent{Outcome: wire.OutcomeAnswered}},
		{Kind: KindGatewayCall, Call: gateway.CallEvent{Outcome: wire.OutcomeAnswered, Replayed: true}},
		{Kind: KindGatewayCall, Call: gateway.CallEvent{Outcome: wire.OutcomeUnknown}},
		{Kind: KindLimiter, Limiter: throttle.Event{Kind: throttle.EventGranted}},
		{Kind: KindLimiter, Limiter: throttle.Event{Kind: throttle.EventTooManyRequests, RetryAfter: 3 * time.Second}},
		{Kind: KindWebhookChecked, Owned: false, Host: "elsewhere.example", Time: time.Now(), Err: errors.New("check failed")},
	} {
		o.Observe(e)
	}
	s := rec.Snapshot()
	for series, want := range map[dashboard.Series]uint64{
		dashboard.SeriesAccepted: 1, dashboard.SeriesForwarded: 1, dashboard.SeriesCompleted: 1,
		dashboard.SeriesRetried: 1, dashboard.SeriesExhausted: 1,
	} {
		if s.Totals[series] != want {
			t.Errorf("%s = %d, want %d", series, s.Totals[series], want)
		}
	}
	if s.LeasesLost != 1 {
		t.Errorf("leases lost %d, want 1", s.LeasesLost)
	}
	got := map[string]uint64{}
	for _, c := range s.Gateway {
		got[c.Name] = c.N
	}
	if got["answered"] != 1 || got["replayed"] != 1 || got["unknown"] != 1 || s.Pauses != 1 || s.PauseFor != 3*time.Second {
		t.Errorf("gateway %v, pauses %d for %v", got, s.Pauses, s.PauseFor)
	}
	if !s.HasWebhook || s.Webhook.Owned || s.Webhook.OwnerHost != "elsewhere.example" || s.Webhook.LastError != "check failed" {
		t.Errorf("webhook %+v", s.Webhook)
	}
}
