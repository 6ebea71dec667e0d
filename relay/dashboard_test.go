package relay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

func TestDashboardConfigNamesTheField(t *testing.T) {
	t.Parallel()
	base := func() relay.Config {
		return relay.Config{Token: "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", Store: memstore.New(), Secret: "s3cr3t",
			Forward: forward.Config{URL: "http://127.0.0.1:1/update"}, AdminListen: "127.0.0.1:0",
			Dashboard: relay.DashboardConfig{Enabled: true}}
	}
	for _, tc := range []struct {
		field  string
		mutate func(*relay.Config)
	}{
		{"Dashboard.Enabled", func(c *relay.Config) { c.AdminListen = "" }},
		{"Dashboard.AdminToken", func(c *relay.Config) { c.AdminListen = "0.0.0.0:0" }},
		{"Dashboard.AdminToken", func(c *relay.Config) { c.AdminListen = ":8081" }},
		{"Dashboard.AdminToken", func(c *relay.Config) { c.Dashboard.AdminToken = "short" }},
	} {
		cfg := base()
		tc.mutate(&cfg)
		_, err := relay.New(cfg)
		ce, ok := errors.AsType[*relay.ConfigError](err)
		if !ok || ce.Field != tc.field {
			t.Errorf("%s: New = %v, want a *ConfigError for it", tc.field, err)
		}
	}
	cfg := base()
	cfg.AdminListen, cfg.Dashboard.AdminToken = "0.0.0.0:0", "a-long-random-admin-token"
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatalf("non-loopback with a token: %v", err)
	}
	_ = r.Close(context.Background())
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// A relay with its dashboard: the Overview shows the relay's figures, and
// an exhaustion is acknowledged through the dashboard with its exact
// identity.
func TestRelayDashboard(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	var poison atomic.Int64
	poison.Store(-1)
	ep := newBotEndpoint(t, func(id int64, _ int) (int, string) {
		if id == poison.Load() {
			return http.StatusUnprocessableEntity, ""
		}
		return http.StatusOK, ""
	})
	ups := sendChatter(t, srv, 2, 4)
	poison.Store(ups[2].ID)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	cfg.AdminListener = listen(t)
	cfg.Dashboard = relay.DashboardConfig{Enabled: true, BroadcastDir: t.TempDir()}
	r := start(t, cfg)
	base := r.DashboardURL()
	if base == "" || !strings.HasSuffix(base, "/") {
		t.Fatalf("DashboardURL() = %q", base)
	}
	// A poison update claimed on add can be exhausted before the batch's
	// later updates are accepted: wait for both.
	testkit.WaitFor(t, "the poison update kept as an exhaustion, every update accepted", func() bool {
		s, err := r.Stats(t.Context())
		return err == nil && s.Unacknowledged == 1 && rec.count(string(relay.KindAccepted)) >= len(ups)
	})
	if rec.count(string(relay.KindAccepted)) != len(ups) {
		t.Errorf("the relay's own observer saw %d accepted, want %d (the dashboard's must not replace it)", rec.count(string(relay.KindAccepted)), len(ups))
	}

	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	fetch := func(method, path string, form url.Values) (int, string) {
		t.Helper()
		var resp *http.Response
		var err error
		if method == http.MethodPost {
			resp, err = c.PostForm(base+path, form)
		} else {
			resp, err = c.Get(base + path)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		assertNoSecrets(t, "dashboard page "+path, string(b), srv.Token)
		return resp.StatusCode, string(b)
	}
	code, page := fetch(http.MethodGet, "", nil)
	if code != http.StatusOK {
		t.Fatalf("overview: %d", code)
	}
	for _, want := range []string{"Accepted/s", "long polling", "sqlite", fmt.Sprintf(`total <b class="num">%d</b>`, len(ups))} {
		if !strings.Contains(page, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	row, _, err := cfg.Store.(intake.AdminStore).Get(t.Context(), ups[2].ID)
	if err != nil {
		t.Fatal(err)
	}
	_, exh := fetch(http.MethodGet, "exhaustions", nil)
	if !strings.Contains(exh, fmt.Sprintf(`id="exhaustion-%d"`, row.UpdateID)) {
		t.Fatalf("exhaustions page lacks update %d", row.UpdateID)
	}
	q := url.Values{"attempt": {fmt.Sprint(row.Attempts)}, "claim_id": {row.ClaimID}}
	_, conf := fetch(http.MethodGet, fmt.Sprintf("updates/%d/acknowledge?%s", row.UpdateID, q.Encode()), nil)
	m := csrfField.FindStringSubmatch(conf)
	if m == nil {
		t.Fatal("no CSRF token on the confirmation page")
	}
	q.Set("csrf", m[1])
	if code, page := fetch(http.MethodPost, fmt.Sprintf("updates/%d/acknowledge", row.UpdateID), q); code != http.StatusOK {
		t.Fatalf("acknowledge: %d\n%s", code, page)
	}
	testkit.WaitFor(t, "the acknowledgement in the store", func() bool {
		s, err := r.Stats(t.Context())
		return err == nil && s.Unacknowledged == 0
	})
	if code, _ := get(t, r.AdminURL()+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz beside the dashboard: %d", code)
	}
}
