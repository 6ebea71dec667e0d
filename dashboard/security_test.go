package dashboard_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

const (
	botToken      = "123456789:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ"
	webhookSecret = "wh-secret-0123456789abcdef"
	adminToken    = "admin-token-that-must-never-show"
)

// secretStore holds an update whose body, error and journaled reply carry
// the bot token and the webhook secret.
func secretStore(t *testing.T) (store, intake.Identity) {
	t.Helper()
	st := memstore.New()
	ctx := t.Context()
	b := fmt.Appendf(nil, `{"update_id":7,"message":{"chat":{"id":42},"text":"my token is %s and the secret %s"}}`, botToken, webhookSecret)
	if _, err := st.Add(ctx, intake.Incoming{UpdateID: 7, Body: b, ReceivedAt: base}); err != nil {
		t.Fatal(err)
	}
	id, ok, err := st.Claim(ctx, 7, intake.ClaimOpts{Now: base, LeaseUntil: time.Now().Add(time.Hour), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	call := intake.Call{Method: "sendMessage", ParamsHash: "abc123", Occurrence: 1}
	if _, _, err := st.RecordIntent(ctx, id, call, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RecordOutcome(ctx, id, call, intake.CallResult{Outcome: intake.CallAnswered, Status: 200,
		Body: []byte(`{"ok":true,"result":{"text":"echo ` + botToken + `"}}`)}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.Exhaust(ctx, id, time.Now(), "app said: bad token "+botToken+" / "+webhookSecret); err != nil || !ok {
		t.Fatal(ok, err)
	}
	return st, id
}

// No page, URL or log line shows the bot token, the webhook secret or the
// admin token, and the update's page shows its journaled reply.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel()
	st, id := secretStore(t)
	var logs testkit.SyncBuffer
	s := serve(t, dashboard.Config{Store: st, Secrets: []string{botToken, webhookSecret}, AdminToken: adminToken,
		StoreName: "memory " + botToken, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// Sign in; a wrong token first, so a refusal is logged too.
	if code, _ := s.post(t, "/login", url.Values{"token": {"wrong"}}); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d, want 401", code)
	}
	if code, _ := s.post(t, "/login", url.Values{"token": {adminToken}}); code != http.StatusSeeOther {
		t.Fatalf("sign in: %d, want 303", code)
	}
	var pages []string
	var urls []string
	for _, p := range []string{"/", "/updates", "/updates/7", "/exhaustions", confirmPath(id, "acknowledge"), "/updates?chat=42", "/login"} {
		code, page := s.get(t, p)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d", p, code)
		}
		pages = append(pages, page)
		urls = append(urls, p)
	}
	_, conf := s.get(t, confirmPath(id, "acknowledge"))
	_, res := s.post(t, actionPath(id, "acknowledge"), identityForm(id, csrf(t, conf)))
	pages = append(pages, res)
	u, _ := url.Parse(s.URL)
	for _, c := range s.client.Jar.Cookies(u) {
		pages = append(pages, c.Value)
	}
	for i, page := range append(pages, logs.String(), strings.Join(urls, " ")) {
		for _, secret := range []string{botToken, "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawQ", webhookSecret, adminToken} {
			if strings.Contains(page, secret) {
				t.Errorf("output %d shows a secret %q", i, secret)
			}
		}
	}
	mustContain(t, "update page", pages[2], "[redacted]", "Journaled replies", "sendMessage", "answered")
	mustContain(t, "log", logs.String(), "sign-in refused", "acknowledge applied")
}

// With an admin token: pages redirect to the sign-in form, a wrong token
// is refused, the session cookie and a bearer header let requests in, and
// a session of another handler (another key) does not.
func TestAdminToken(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	s := serve(t, dashboard.Config{Store: st, AdminToken: adminToken})
	resp, err := s.client.Get(s.URL + "/exhaustions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("unauthenticated GET: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, _ := s.get(t, "/assets/style.css"); code != http.StatusOK {
		t.Errorf("the stylesheet needs no session: %d", code)
	}
	if code, _ := s.post(t, "/updates/1/acknowledge", url.Values{"attempt": {"1"}}); code != http.StatusUnauthorized {
		t.Errorf("unauthenticated POST: %d, want 401", code)
	}
	if code, _ := s.post(t, "/login", url.Values{"token": {adminToken + "x"}}); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code, _ := s.post(t, "/login", url.Values{"token": {adminToken}}); code != http.StatusSeeOther {
		t.Errorf("sign in: %d, want 303", code)
	}
	if code, _ := s.get(t, "/exhaustions"); code != http.StatusOK {
		t.Errorf("signed in: %d", code)
	}

	// Bearer, right and wrong, without cookies.
	bare := &http.Client{CheckRedirect: s.client.CheckRedirect}
	for tok, want := range map[string]int{adminToken: http.StatusOK, "nope": http.StatusSeeOther} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := bare.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("bearer %q: %d, want %d", tok[:4], resp.StatusCode, want)
		}
	}

	// The session is bound to the handler's key: another handler with the
	// same token refuses it.
	other := serve(t, dashboard.Config{Store: st, AdminToken: adminToken})
	u, _ := url.Parse(s.URL)
	req, _ := http.NewRequest(http.MethodGet, other.URL+"/", nil)
	for _, c := range s.client.Jar.Cookies(u) {
		req.AddCookie(c)
	}
	resp, err = bare.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("a session of another handler: %d, want 303 to sign in", resp.StatusCode)
	}

	// Sign out ends the session.
	_, page := s.get(t, "/")
	if code, _ := s.post(t, "/logout", url.Values{"csrf": {csrf(t, page)}}); code != http.StatusSeeOther {
		t.Errorf("sign out: %d", code)
	}
	if code, _ := s.get(t, "/"); code != http.StatusSeeOther {
		t.Errorf("after sign out: %d, want 303", code)
	}
}

// Wrong tokens are rate limited.
func TestLoginRateLimited(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New(), AdminToken: adminToken})
	limited := false
	for range 20 {
		if code, _ := s.post(t, "/login", url.Values{"token": {"guess"}}); code == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Error("20 wrong tokens in a row were never rate limited")
	}
}

// Without an admin token, a request that names a host other than loopback
// (DNS rebinding) or that arrived on a non-loopback address is refused.
func TestLoopbackOnlyWithoutToken(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New()})
	req, _ := http.NewRequest(http.MethodGet, s.URL+"/", nil)
	req.Host = "evil.example:80"
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("foreign Host: %d, want 403", resp.StatusCode)
	}
	for _, host := range []string{"localhost", "127.0.0.1:1234", "[::1]:80"} {
		req, _ := http.NewRequest(http.MethodGet, s.URL+"/", nil)
		req.Host = host
		resp, err := s.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d, want 200", host, resp.StatusCode)
		}
	}

	// A request that arrived on a non-loopback local address.
	h, err := dashboard.New(dashboard.Config{Store: memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 8081}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusForbidden {
		t.Errorf("non-loopback local address: %d, want 403", w.Code)
	}
}

func TestCheckExposure(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8081", "", true},
		{"[::1]:8081", "", true},
		{"localhost:8081", "", true},
		{"127.0.0.2:0", "", true},
		{":8081", "", false},
		{"0.0.0.0:8081", "", false},
		{"[::]:8081", "", false},
		{"192.0.2.7:8081", "", false},
		{"relay.internal:8081", "", false},
		{"0.0.0.0:8081", "tok", true},
	} {
		err := dashboard.CheckExposure(tc.addr, tc.token)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, dashboard.ErrTokenRequired)) {
			t.Errorf("CheckExposure(%q, token %v) = %v", tc.addr, tc.token != "", err)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	for _, tc := range []struct {
		cfg   dashboard.Config
		field string
	}{
		{dashboard.Config{}, "Store"},
		{dashboard.Config{Store: st, Prefix: "dash"}, "Prefix"},
		{dashboard.Config{Store: st, Prefix: "/dash"}, "Prefix"},
		{dashboard.Config{Store: st, PageSize: dashboard.MaxPageSize + 1}, "PageSize"},
		{dashboard.Config{Store: st, PageSize: -1}, "PageSize"},
		{dashboard.Config{Store: st, MaxSSEClients: -1}, "MaxSSEClients"},
		{dashboard.Config{Store: st, RefreshInterval: time.Millisecond}, "RefreshInterval"},
		{dashboard.Config{Store: st, MaxBodyBytes: 10}, "MaxBodyBytes"},
		{dashboard.Config{Store: st, MaxPageBytes: dashboard.MaxMaxPageBytes + 1}, "MaxPageBytes"},
		{dashboard.Config{Store: st, AdminToken: " padded-admin-token-value "}, "AdminToken"},
		{dashboard.Config{Store: st, AdminToken: "short"}, "AdminToken"},
	} {
		_, err := dashboard.New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), "Config."+tc.field) {
			t.Errorf("%s: error %v, want one naming Config.%s", tc.field, err, tc.field)
		}
	}
}

// The prefix is honoured by every link and route.
func TestPrefix(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ident := exhaustOne(t, st, 3)
	s := serve(t, dashboard.Config{Store: st, Prefix: "/dashboard/"})
	code, page := s.get(t, "/dashboard/exhaustions")
	if code != http.StatusOK {
		t.Fatalf("prefixed page: %d", code)
	}
	mustContain(t, "prefixed page", page, `href="/dashboard/assets/style.css"`, `action="/dashboard/updates/3/acknowledge"`)
	_, conf := s.get(t, "/dashboard"+confirmPath(ident, "acknowledge"))
	if code, _ := s.post(t, "/dashboard"+actionPath(ident, "acknowledge"), identityForm(ident, csrf(t, conf))); code != http.StatusOK {
		t.Errorf("prefixed acknowledge: %d", code)
	}
	if code, _ := s.get(t, "/exhaustions"); code != http.StatusNotFound {
		t.Errorf("outside the prefix: %d, want 404", code)
	}
}

// At most MaxSSEClients refresh streams are open; more get 503; Close ends
// the open ones.
func TestEventStreamsBounded(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New(), MaxSSEClients: 2, RefreshInterval: dashboard.MinRefreshInterval})
	open := func() (*http.Response, *bufio.Reader) {
		t.Helper()
		resp, err := s.client.Get(s.URL + "/events")
		if err != nil {
			t.Fatal(err)
		}
		return resp, bufio.NewReader(resp.Body)
	}
	var streams []*http.Response
	for range 2 {
		resp, br := open()
		streams = append(streams, resp)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		// A tick arrives.
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "event: tick\n" {
				break
			}
		}
	}
	resp, _ := open()
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("third stream: %d, want 503", resp.StatusCode)
	}
	// Closing one frees its place.
	streams[0].Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, _ := open()
		if resp.StatusCode == http.StatusOK {
			streams[0] = resp
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("a closed stream's place was never freed")
		}
		time.Sleep(20 * time.Millisecond) // polling for the server to notice the close; no signal exists
	}
	// Close ends every stream: the bodies reach EOF.
	s.h.Close()
	for i, r := range streams {
		done := make(chan error, 1)
		go func() {
			_, err := bufio.NewReader(r.Body).ReadString(0)
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("stream %d: no end", i)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("stream %d still open after Close", i)
		}
		r.Body.Close()
	}
}

// A page larger than MaxPageBytes is refused whole, never cut; an update
// body larger than MaxBodyBytes is shown cut, and the page says so.
func TestBounds(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	ctx := t.Context()
	long := strings.Repeat("x", 300)
	for i := int64(1); i <= 400; i++ {
		b := fmt.Appendf(nil, `{"update_id":%d,"message":{"chat":{"id":1},"text":%q}}`, i, strings.Repeat("é", 2000))
		if _, err := st.Add(ctx, intake.Incoming{UpdateID: i, Body: b, ReceivedAt: base}); err != nil {
			t.Fatal(err)
		}
		id, ok, err := st.Claim(ctx, i, intake.ClaimOpts{Now: base, LeaseUntil: base.Add(time.Hour), MaxAttempts: 3})
		if err != nil || !ok {
			t.Fatal(err)
		}
		if _, err := st.Settle(ctx, id, intake.Settlement{State: intake.StateFailed, At: base, RetryAt: base.Add(time.Hour), Error: long}); err != nil {
			t.Fatal(err)
		}
	}
	s := serve(t, dashboard.Config{Store: st, MaxPageBytes: 64 << 10, MaxBodyBytes: 1 << 10, PageSize: dashboard.MaxPageSize})
	code, page := s.get(t, "/updates")
	if code != http.StatusInternalServerError || strings.Contains(page, "<table") {
		t.Errorf("a page over its bound: %d, %d bytes sent", code, len(page))
	}
	code, _ = s.get(t, "/updates?limit=10")
	if code != http.StatusOK {
		t.Errorf("a page under its bound: %d", code)
	}
	code, page = s.get(t, "/updates/1")
	if code != http.StatusOK {
		t.Fatalf("update page: %d", code)
	}
	mustContain(t, "cut body", page, "Cut at the page", "tgrelay updates show 1")
	if n := strings.Count(page, "é"); n > 1<<10/2 {
		t.Errorf("the body shows %d runes of é, more than MaxBodyBytes allows", n)
	}
}
