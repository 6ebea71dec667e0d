package relay

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/hookowner"
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
}

// The dashboard shows the relay's own webhook status: what the last good
// check found (Telegram's delivery error included) and a later check's
// failure.
func TestDashboardShowsTheWebhookStatus(t *testing.T) {
	t.Parallel()
	r := &Relay{rec: dashboard.NewRecorder(), now: time.Now, log: slog.New(slog.DiscardHandler), cfg: Config{PublicURL: "https://bot.example/hook"}}
	w := &watcher{r: r}
	w.checked(hookowner.Status{Owned: false, OwnerHost: "elsewhere.example", LastError: "Wrong response from the webhook: 502"}, nil)
	w.checked(hookowner.Status{}, errors.New("check failed"))
	s := r.rec.Snapshot()
	got := s.Webhook
	if !s.HasWebhook || got.Mode != hookowner.ModeWebhook || got.Owned || got.OwnerHost != "elsewhere.example" ||
		got.LastError != "Wrong response from the webhook: 502" || got.CheckError != "check failed" || got.CheckedAt.IsZero() {
		t.Errorf("dashboard webhook %+v", got)
	}
	if st := r.Status().Webhook; st != got {
		t.Errorf("Status().Webhook %+v, dashboard %+v", st, got)
	}
}
