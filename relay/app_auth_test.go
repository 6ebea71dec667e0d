package relay_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

// TestAppAuthRefusalHoldsTheUpdate: an app whose secret check refuses the
// forward (403 while the secret is wrong) holds the update in its first
// attempt, however many times it refuses: no attempt spent, no exhaustion,
// an error log line naming the setting, events and the status alert. Once
// the app's secret is fixed, the update is delivered, still as attempt 1,
// and the alert clears.
func TestAppAuthRefusalHoldsTheUpdate(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	const appSecret = "app-only_s3cret"
	var want atomic.Value // the secret the app checks
	want.Store("another-secret")
	ep := newBotEndpoint(t, nil)
	ep.respond = func(int64, int) (int, string) { return http.StatusOK, "" }
	checked := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(forward.HeaderTelegramSecret) != want.Load().(string) {
			w.WriteHeader(http.StatusForbidden) // as Telegraf's and grammY's secret checks do
			return
		}
		ep.srv.Config.Handler.ServeHTTP(w, r)
	})
	app := httptest.NewServer(checked)
	t.Cleanup(app.Close)

	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	cfg.Forward = forward.Config{URL: app.URL + "/update", AppSecretToken: appSecret}
	cfg.Intake.MaxAttempts = 2
	cfg.AdminListen = "127.0.0.1:0"
	cfg.Dashboard = relay.DashboardConfig{Enabled: true}
	cfg.SettingNameFunc = func(f string) string {
		if f == "Forward.AppSecretToken" {
			return "--app-secret-token"
		}
		return ""
	}
	r := start(t, cfg)

	up := sendChatter(t, srv, 1, 1)[0]
	testkit.WaitFor(t, "three refusals of the update", func() bool { return rec.count(string(relay.KindAppAuthRefused)) >= 3 })
	st := r.Status().App
	if !st.AuthFailing || st.AuthCode != http.StatusForbidden || st.Held != 1 || st.AuthFailingSince.IsZero() {
		t.Errorf("App status while refused = %+v, want failing with 403 and 1 held", st)
	}
	for _, e := range rec.all(relay.KindAppAuthRefused) {
		if e.ID.Attempt != 1 || e.Count != 1 || e.Duration <= 0 || e.Duration > relay.MaxAppAuthHoldDelay {
			t.Errorf("refusal event = %+v, want attempt 1, 1 held, a bounded wait", e)
		}
	}
	lines := logLines(logs, "relay: the app refuses forwards (401/403): a configuration problem, not a bad update; the update is held and forwarded again, its attempts unspent")
	if len(lines) == 0 {
		t.Fatalf("no alert log line; logs:\n%s", logs)
	}
	if hint, _ := lines[0]["hint"].(string); !strings.Contains(hint, "--app-secret-token") || lines[0]["level"] != "ERROR" {
		t.Errorf("alert line = %v, want an error naming --app-secret-token", lines[0])
	}
	if strings.Contains(logs.String(), appSecret) {
		t.Error("the logs contain the app's secret")
	}
	if code, body := get(t, r.AdminURL()+"/readyz"); code != http.StatusOK || !strings.Contains(body, "warning: the app refuses forwards with 403") || !strings.Contains(body, "--app-secret-token") {
		t.Errorf("/readyz while refused = %d %q, want 200 with a warning naming --app-secret-token", code, body)
	}
	if code, page := get(t, r.DashboardURL()); code != http.StatusOK || !strings.Contains(page, "refuses forwards (403)") || !strings.Contains(page, "held, not given up") {
		t.Errorf("dashboard overview while refused (%d) shows no app alert:\n%s", code, page)
	}

	want.Store(appSecret) // the operator fixes the configuration
	testkit.WaitFor(t, "the update delivered", func() bool { return ep.distinct() == 1 })
	testkit.WaitFor(t, "the alert to clear", func() bool { return rec.count(string(relay.KindAppAuthAccepted)) == 1 })
	hits := ep.hitsOf(up.ID)
	if len(hits) != 1 || hits[0].attempt != 1 {
		t.Errorf("delivered as %+v, want attempt 1 (the refusals spent no attempt)", hits)
	}
	testkit.WaitFor(t, "the hold to end", func() bool { return r.Status().App.Held == 0 })
	if _, body := get(t, r.AdminURL()+"/readyz"); body != "ready\n" {
		t.Errorf("/readyz after the fix = %q, want ready", body)
	}
	if _, page := get(t, r.DashboardURL()); !strings.Contains(page, "accepts forwards") {
		t.Errorf("dashboard overview after the fix shows no recovery:\n%s", page)
	}
	if st := r.Status().App; st.AuthFailing || st.Refusals < 3 {
		t.Errorf("App status after the fix = %+v, want not failing, refusals counted", st)
	}
	if n := rec.count(string(relay.KindExhausted)) + rec.count(string(relay.KindFailed)); n != 0 {
		t.Errorf("%d failures or exhaustions recorded for refusals", n)
	}
	stats, err := r.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Unacknowledged != 0 {
		t.Errorf("%d exhaustions", stats.Unacknowledged)
	}
	testkit.WaitFor(t, "the update completed", func() bool {
		s, _ := r.Stats(t.Context())
		return s.Count[intake.StateCompleted] == 1
	})
}

// TestAppAuthHoldEndsOnStop: a stop ends a hold at once (it does not wait
// for the drain deadline), and an update on its last attempt is not made
// an exhaustion by the stop: its hold lasts until the drain deadline,
// which leaves it unsettled for a later process.
func TestAppAuthHoldEndsOnStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		maxAttempts int
		drain       time.Duration
		wantState   intake.State
	}{
		{"first of two attempts: the stop ends the hold", 2, time.Hour, intake.StateFailed},
		{"last attempt: held until the drain deadline, never exhausted", 1, 100 * time.Millisecond, intake.StateProcessing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := fakeTelegram(t)
			ep := newBotEndpoint(t, func(int64, int) (int, string) { return http.StatusUnauthorized, "" })
			logs, rec := &testkit.SyncBuffer{}, newRecorder()
			cfg := baseConfig(t, srv, ep, logs, rec)
			cfg.Intake.MaxAttempts = tc.maxAttempts
			cfg.DrainTimeout = tc.drain
			r, err := relay.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Start(t.Context()); err != nil {
				t.Fatal(err)
			}
			up := sendChatter(t, srv, 1, 1)[0]
			testkit.WaitFor(t, "a refusal", func() bool { return rec.count(string(relay.KindAppAuthRefused)) >= 1 })
			stopped := make(chan error, 1)
			go func() { stopped <- r.Close(context.Background()) }()
			testkit.WaitFor(t, "the relay to stop", func() bool {
				select {
				case err := <-stopped:
					// A hold that outlasts the drain cuts it short.
					if cut := tc.wantState == intake.StateProcessing; (err != nil) != cut || (cut && !errors.Is(err, context.DeadlineExceeded)) {
						t.Errorf("Close = %v, want a cut drain's error: %v", err, cut)
					}
					return true
				default:
					return false
				}
			})
			if n := rec.count(string(relay.KindExhausted)); n != 0 {
				t.Errorf("%d exhaustions after the stop", n)
			}
			row, ok, err := cfg.Store.(intake.AdminStore).Get(t.Context(), up.ID)
			if err != nil || !ok {
				t.Fatalf("Get: %v %v", ok, err)
			}
			if row.State != tc.wantState {
				t.Errorf("row state after the stop = %s, want %s", row.State, tc.wantState)
				t.Logf("logs:\n%s", logs)
			}
		})
	}
}
