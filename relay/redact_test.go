package relay_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

// The app's URL carries the app's secret token in its path (a secret path,
// as some apps check), and the app is down: the forward's error quotes the
// URL (today the forward leaves the URL out; this holds it to that). Neither the log, nor the row's stored error, nor the exhaustion
// payload delivered to the exhaustion endpoint shows the secret: the relay
// masks every secret it is configured with.
func TestRelayMasksSecretsInStoredErrors(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	const appSecret = "app-secret-path-token-42"
	down := closedport.Addr(t)
	cfg.Forward.URL = "http://" + down + "/hook/" + appSecret
	cfg.Forward.AppSecretToken = appSecret
	cfg.Forward.ExhaustionURL = ep.exhaustionURL()
	cfg.Intake.MaxAttempts = 2
	st := cfg.Store.(*sqlitestore.Store)
	start(t, cfg)
	ups := sendChatter(t, srv, 1, 1)
	testkit.WaitFor(t, "the exhaustion delivered", func() bool { return len(ep.exhaustionPayloads()) == 1 })

	p := ep.exhaustionPayloads()[0]
	row, ok, err := st.Get(t.Context(), ups[0].ID)
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	texts := map[string]string{"exhaustion payload": p.Error, "stored error": row.Error, "log": logs.String()}
	for what, text := range texts {
		if strings.Contains(text, appSecret) {
			t.Errorf("%s shows the app secret: %s", what, text)
		}
		assertNoSecrets(t, what, text, srv.Token)
	}
	for _, text := range []string{p.Error, row.Error} {
		if !strings.Contains(text, "connection refused") {
			t.Errorf("stored error %q: want the cause", text)
		}
	}
}

// With the dashboard's admin token, what HandleAdmin mounts (serve's
// /metrics) needs the token; /healthz and /readyz stay open for probes.
func TestRelayAdminEndpointsNeedTheToken(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	cfg.AdminListener = listen(t)
	const admin = "a-long-random-admin-token-0123"
	cfg.Dashboard = relay.DashboardConfig{Enabled: true, AdminToken: admin}
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.HandleAdmin("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "tgrelay_figures 1\n") }))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	fetch := func(path, token string) int {
		req, _ := http.NewRequest(http.MethodGet, r.AdminURL()+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, token string
		want        int
	}{
		{"/metrics", "", http.StatusUnauthorized},
		{"/metrics", "wrong-token-of-some-length", http.StatusUnauthorized},
		{"/metrics", admin, http.StatusOK},
		{"/healthz", "", http.StatusOK},
		{"/readyz", "", http.StatusOK},
	} {
		if got := fetch(tc.path, tc.token); got != tc.want {
			t.Errorf("GET %s (with a token: %v): %d, want %d", tc.path, tc.token != "", got, tc.want)
		}
	}
	if strings.Contains(logs.String(), admin) || !strings.Contains(logs.String(), "refused a wrong bearer token") {
		t.Errorf("log: want the wrong bearer logged, never the admin token:\n%s", logs.String())
	}
}
