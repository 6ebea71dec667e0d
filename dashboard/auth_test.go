package dashboard_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// do sends req through h as if from remote, and returns the response.
func do(h http.Handler, req *http.Request, remote string) *http.Response {
	req.RemoteAddr = remote
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w.Result()
}

// loginRequest is a sign-in form post with token.
func loginRequest(token string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return r
}

// sessionCookie returns the session cookie a response sets.
func sessionCookieOf(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == "tgrelay_session" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("no session cookie in %v", resp.Header["Set-Cookie"])
	return nil
}

// Signing out ends the session on the server: the cookie it had, replayed,
// opens nothing.
func TestLogoutRevokesSession(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New(), AdminToken: adminToken})
	resp := do(s.h, loginRequest(adminToken), "127.0.0.1:5000")
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", resp.StatusCode)
	}
	session := sessionCookieOf(t, resp)
	get := func() int {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/exhaustions", nil)
		r.AddCookie(session)
		return do(s.h, r, "127.0.0.1:5000").StatusCode
	}
	if code := get(); code != http.StatusOK {
		t.Fatalf("with the session: %d, want 200", code)
	}
	// Sign out as the browser does: the layout's form, its CSRF token.
	r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	r.AddCookie(session)
	page := do(s.h, r, "127.0.0.1:5000")
	body, _ := io.ReadAll(page.Body)
	var csrfCookie *http.Cookie
	for _, c := range page.Cookies() {
		if c.Name == "tgrelay_csrf" {
			csrfCookie = c
		}
	}
	out := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/logout", strings.NewReader(url.Values{"csrf": {csrf(t, string(body))}}.Encode()))
	out.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	out.AddCookie(session)
	out.AddCookie(csrfCookie)
	if code := do(s.h, out, "127.0.0.1:5000").StatusCode; code != http.StatusSeeOther {
		t.Fatalf("sign out: %d, want 303", code)
	}
	if code := get(); code != http.StatusSeeOther {
		t.Errorf("the signed-out session's cookie, replayed: %d, want 303 to the sign-in form", code)
	}
}

// The layout offers to sign out only to a visitor signed in: not on the
// sign-in form, not on the page refusing a request that has no session,
// and not to a bearer token, which has no session to end.
func TestSignOutOnlyWhenSignedIn(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New(), AdminToken: adminToken})
	offers := func(r *http.Request) (int, bool) {
		resp := do(s.h, r, "127.0.0.1:5000")
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.Contains(string(body), `action="/logout"`)
	}
	if code, out := offers(httptest.NewRequest(http.MethodGet, "http://127.0.0.1/login", nil)); code != http.StatusOK || out {
		t.Errorf("the sign-in form: %d, offers to sign out %v; want 200 without", code, out)
	}
	if code, out := offers(httptest.NewRequest(http.MethodPost, "http://127.0.0.1/updates/1/requeue", nil)); code != http.StatusUnauthorized || out {
		t.Errorf("a post without a session: %d, offers to sign out %v; want 401 without", code, out)
	}
	bearer := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	bearer.Header.Set("Authorization", "Bearer "+adminToken)
	if code, out := offers(bearer); code != http.StatusOK || out {
		t.Errorf("the overview to a bearer token: %d, offers to sign out %v; want 200 without", code, out)
	}
	signedIn := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	signedIn.AddCookie(sessionCookieOf(t, do(s.h, loginRequest(adminToken), "127.0.0.1:5000")))
	if code, out := offers(signedIn); code != http.StatusOK || !out {
		t.Errorf("the overview in a session: %d, offers to sign out %v; want 200 with", code, out)
	}
}

// Wrong tokens lock out only the address they came from: five wrong
// sign-ins from one client leave the right token working from another,
// and wrong bearer tokens count (and are logged) like wrong sign-ins.
// Behind a trusted proxy the client is the forwarded address; from
// anywhere else X-Forwarded-For is ignored.
func TestLoginLimitPerClient(t *testing.T) {
	t.Parallel()
	var logs testkit.SyncBuffer
	s := serve(t, dashboard.Config{Store: memstore.New(), AdminToken: adminToken,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32")},
		Logger:         slog.New(slog.NewTextHandler(&logs, nil))})
	h := s.h
	viaProxy := func(r *http.Request, client string) *http.Response {
		r.Header.Set("X-Forwarded-For", client)
		return do(h, r, "10.0.0.1:4000")
	}
	bearer := func(token string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/exhaustions", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		return r
	}
	for i := range 5 {
		if code := viaProxy(loginRequest("guess"), "198.51.100.7").StatusCode; code != http.StatusUnauthorized {
			t.Fatalf("wrong sign-in %d: %d, want 401", i, code)
		}
	}
	if code := viaProxy(loginRequest(adminToken), "198.51.100.7").StatusCode; code != http.StatusTooManyRequests {
		t.Errorf("the guessing client's sixth try, with the right token: %d, want 429", code)
	}
	if code := viaProxy(loginRequest(adminToken), "203.0.113.9").StatusCode; code != http.StatusSeeOther {
		t.Errorf("another client's right token after the guesses: %d, want 303", code)
	}
	// Wrong bearer tokens, from a third client, connected directly.
	for i := range 5 {
		if code := do(h, bearer("guess-"+string(rune('a'+i))), "192.0.2.50:1").StatusCode; code != http.StatusSeeOther {
			t.Fatalf("wrong bearer %d: %d, want 303 to the sign-in form", i, code)
		}
	}
	if code := do(h, bearer(adminToken), "192.0.2.50:2").StatusCode; code != http.StatusTooManyRequests {
		t.Errorf("right bearer after five wrong ones from the same address: %d, want 429", code)
	}
	if code := do(h, bearer(adminToken), "192.0.2.51:1").StatusCode; code != http.StatusOK {
		t.Errorf("right bearer from another address: %d, want 200", code)
	}
	// A client not behind the trusted proxy cannot pick its address.
	r := bearer(adminToken)
	r.Header.Set("X-Forwarded-For", "192.0.2.99")
	if code := do(h, r, "192.0.2.50:3").StatusCode; code != http.StatusTooManyRequests {
		t.Errorf("a forged X-Forwarded-For from an untrusted peer escaped its limit: %d, want 429", code)
	}
	for _, want := range []string{"refused a wrong bearer token", "remote=192.0.2.50", "sign-in refused: wrong admin token", "remote=198.51.100.7"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "guess-") {
		t.Errorf("the log quotes a tried token:\n%s", logs.String())
	}
}

// Cookies are Secure on a request a trusted proxy forwarded from HTTPS,
// and not on one whose X-Forwarded-Proto comes from anyone else.
func TestSecureCookiesBehindTrustedProxy(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New(), AdminToken: adminToken,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	for _, tc := range []struct {
		remote, proto string
		secure        bool
	}{
		{"10.1.2.3:4000", "https", true},
		{"10.1.2.3:4000", "http", false},
		{"10.1.2.3:4000", "", false},
		{"192.0.2.1:4000", "https", false},
	} {
		r := loginRequest(adminToken)
		if tc.proto != "" {
			r.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		resp := do(s.h, r, tc.remote)
		if got := sessionCookieOf(t, resp).Secure; got != tc.secure {
			t.Errorf("from %s, X-Forwarded-Proto %q: session cookie Secure=%v, want %v", tc.remote, tc.proto, got, tc.secure)
		}
		page := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/login", nil)
		if tc.proto != "" {
			page.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		for _, c := range do(s.h, page, tc.remote).Cookies() {
			if c.Name == "tgrelay_csrf" && c.Secure != tc.secure {
				t.Errorf("from %s, X-Forwarded-Proto %q: CSRF cookie Secure=%v, want %v", tc.remote, tc.proto, c.Secure, tc.secure)
			}
		}
	}
}

// A post with "Origin: null" and no Sec-Fetch-Site (what Chromium sends
// from a plain-HTTP page at a non-loopback address, and what a sandboxed
// frame anywhere sends) changes nothing without the CSRF cookie and its
// token; TestBrowserPlainHTTPRemote shows the dashboard's own form passes.
func TestOriginNullNeedsCSRF(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New(), AdminToken: adminToken})
	for name, form := range map[string]url.Values{"no csrf": {"token": {adminToken}}, "forged csrf": {"token": {adminToken}, "csrf": {"AAAA"}}} {
		r := loginRequest("")
		r.Body = io.NopCloser(strings.NewReader(form.Encode()))
		r.Header.Set("Origin", "null")
		if code := do(s.h, r, "192.0.2.1:1").StatusCode; code != http.StatusForbidden {
			t.Errorf("%s: sign-in with Origin null: %d, want 403", name, code)
		}
	}
	// With the cookie and token of the sign-in page, it passes.
	page := do(s.h, httptest.NewRequest(http.MethodGet, "http://192.0.2.10/login", nil), "192.0.2.1:1")
	body, _ := io.ReadAll(page.Body)
	r := loginRequest("")
	r.Body = io.NopCloser(strings.NewReader(url.Values{"token": {adminToken}, "csrf": {csrf(t, string(body))}}.Encode()))
	r.Header.Set("Origin", "null")
	for _, c := range page.Cookies() {
		r.AddCookie(c)
	}
	if code := do(s.h, r, "192.0.2.1:1").StatusCode; code != http.StatusSeeOther {
		t.Errorf("sign-in with Origin null and the page's CSRF token: %d, want 303", code)
	}
}

// Protect (a relay puts /metrics behind it) answers 401 without the admin
// token, and passes a bearer token or a dashboard session.
func TestProtect(t *testing.T) {
	t.Parallel()
	s := serve(t, dashboard.Config{Store: memstore.New(), AdminToken: adminToken})
	metrics := s.h.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "figures") }))
	get := func(mod func(*http.Request)) int {
		r := httptest.NewRequest(http.MethodGet, "http://127.0.0.1/metrics", nil)
		mod(r)
		return do(metrics, r, "127.0.0.1:1").StatusCode
	}
	if code := get(func(*http.Request) {}); code != http.StatusUnauthorized {
		t.Errorf("no credential: %d, want 401", code)
	}
	if code := get(func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+adminToken) }); code != http.StatusOK {
		t.Errorf("bearer: %d, want 200", code)
	}
	session := sessionCookieOf(t, do(s.h, loginRequest(adminToken), "127.0.0.1:1"))
	if code := get(func(r *http.Request) { r.AddCookie(session) }); code != http.StatusOK {
		t.Errorf("session: %d, want 200", code)
	}

	// Without an admin token, the loopback rule of the pages.
	open := serve(t, dashboard.Config{Store: memstore.New()})
	m := open.h.Protect(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	r := httptest.NewRequest(http.MethodGet, "http://evil.example/metrics", nil)
	if code := do(m, r, "127.0.0.1:1").StatusCode; code != http.StatusForbidden {
		t.Errorf("no token, foreign Host: %d, want 403", code)
	}
}
