package forward_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/wire"
)

// endpoint is a real HTTP app endpoint that answers with a scripted status
// and records what it received.
type endpoint struct {
	mu       sync.Mutex
	status   int
	header   http.Header
	body     []byte // the answer's body
	ack      bool   // acknowledge exhaustions: echo the claim id in Tgrelay-Ack
	requests []*received
}

type received struct {
	header http.Header
	body   []byte
}

func newEndpoint(t *testing.T, status int, header http.Header) (*endpoint, *httptest.Server) {
	t.Helper()
	e := &endpoint{status: status, header: header}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.requests = append(e.requests, &received{header: r.Header.Clone(), body: body})
		status, header, answer, ack := e.status, e.header, e.body, e.ack
		e.mu.Unlock()
		for k, v := range header {
			w.Header()[k] = v
		}
		if ack {
			w.Header().Set(forward.HeaderAck, r.Header.Get(wire.HeaderClaimID))
		}
		w.WriteHeader(status)
		w.Write(answer)
	}))
	t.Cleanup(srv.Close)
	return e, srv
}

func (e *endpoint) got() []*received {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*received(nil), e.requests...)
}

var attempt = intake.Attempt{Identity: intake.Identity{UpdateID: 42, Attempt: 2, ClaimID: "c-1"}}

func newForwarder(t *testing.T, cfg forward.Config) *forward.Forwarder {
	t.Helper()
	f, err := forward.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// On the direct path and on a client of the caller's own, the forward
// sends the body with the attempt's identity, Config.Header as New saw it,
// and the span's trace context. A configured header named in any case
// never replaces the forward's own: Host, Content-Length,
// Transfer-Encoding, the identity headers, or a second User-Agent.
func TestHandleSendsBodyAndIdentity(t *testing.T) {
	t.Parallel()
	for _, client := range []*http.Client{nil, {}} {
		e, srv := newEndpoint(t, http.StatusNoContent, nil)
		extra := http.Header{"Authorization": {"Bearer app"}, "host": {"evil.example"}, "content-length": {"5"},
			"transfer-encoding": {"chunked"}, "tgrelay-claim-id": {"forged"}, "user-agent": {"mine/1"}}
		f := newForwarder(t, forward.Config{URL: srv.URL, Header: extra, Client: client})
		extra.Set("Authorization", "changed after New") // New copied it
		body := []byte(`{"update_id":42,"message":{"text":"hi"}}`)
		sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled})
		ctx := trace.ContextWithSpanContext(t.Context(), sc)
		if err := f.Handle(ctx, intake.Update{ID: 42, Body: body}, attempt); err != nil {
			t.Fatalf("client %v: %v", client, err)
		}
		got := e.got()
		if len(got) != 1 {
			t.Fatalf("%d requests, want 1", len(got))
		}
		h := got[0].header
		if string(got[0].body) != string(body) ||
			h.Get(wire.HeaderUpdateID) != "42" || h.Get(wire.HeaderAttempt) != "2" ||
			len(h.Values(wire.HeaderClaimID)) != 1 || h.Get(wire.HeaderClaimID) != "c-1" || h.Get(forward.HeaderKind) != "update" ||
			h.Get("Authorization") != "Bearer app" || h.Get("Content-Type") != "application/json" ||
			len(h.Values("User-Agent")) != 1 || h.Get("User-Agent") != "mine/1" ||
			h.Get("Traceparent") != "00-"+sc.TraceID().String()+"-"+sc.SpanID().String()+"-01" {
			t.Fatalf("client %v: request = %q %v", client, got[0].body, h)
		}
	}
}

func TestHandleStatusMapping(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
		want       string // "ok", "abandon", "retry-after", "retry"
		wantDelay  time.Duration
	}{
		{"200", 200, "", "ok", 0},
		{"202", 202, "", "ok", 0},
		{"400 refuses for good", 400, "", "abandon", 0},
		{"404 refuses for good", 404, "", "abandon", 0},
		{"422 refuses for good", 422, "", "abandon", 0},
		{"401 is a configuration problem, retried", 401, "", "retry-after", forward.AuthRetryDelay},
		{"403 is a configuration problem, retried", 403, "", "retry-after", forward.AuthRetryDelay},
		{"429 with Retry-After", 429, "7", "retry-after", 7 * time.Second},
		{"503 with Retry-After", 503, "2", "retry-after", 2 * time.Second},
		{"429 without Retry-After", 429, "", "retry", 0},
		{"503 without Retry-After", 503, "", "retry", 0},
		{"500", 500, "", "retry", 0},
		{"502 with Retry-After is plain retry", 502, "5", "retry", 0},
		{"408 is retried", 408, "", "retry", 0},
		{"300 is retried, never a success", 300, "", "retry", 0},
		{"299 is a success", 299, "", "ok", 0},
		{"huge Retry-After is capped", 429, "999999999", "retry-after", forward.MaxRetryAfter},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var h http.Header
			if tc.retryAfter != "" {
				h = http.Header{"Retry-After": {tc.retryAfter}}
			}
			_, srv := newEndpoint(t, tc.status, h)
			err := newForwarder(t, forward.Config{URL: srv.URL}).Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
			var ab *intake.AbandonError
			var ra *intake.RetryLaterError
			var se *forward.StatusError
			switch tc.want {
			case "ok":
				if err != nil {
					t.Fatalf("err = %v, want nil", err)
				}
				return
			case "abandon":
				if !errors.As(err, &ab) {
					t.Fatalf("err = %v, want an AbandonError", err)
				}
			case "retry-after":
				if !errors.As(err, &ra) || ra.Delay != tc.wantDelay {
					t.Fatalf("err = %v, want RetryAfter %v", err, tc.wantDelay)
				}
			case "retry":
				if err == nil || errors.As(err, &ab) || errors.As(err, &ra) {
					t.Fatalf("err = %v, want a plain retryable error", err)
				}
			}
			if !errors.As(err, &se) || se.Code != tc.status {
				t.Fatalf("err = %v, want a StatusError %d", err, tc.status)
			}
			// Only a 3xx is said to be a redirect not followed.
			if redirect := strings.Contains(err.Error(), "redirects are not followed"); redirect != (tc.status/100 == 3) {
				t.Errorf("err = %q: says redirects are not followed %v, want %v", err, redirect, tc.status/100 == 3)
			}
		})
	}
}

func TestHandleConnectionErrorIsRetriedAndHidesAddress(t *testing.T) {
	t.Parallel()
	addr := closedport.Addr(t)                       // connections are refused
	for _, client := range []*http.Client{nil, {}} { // the direct path and net/http's
		f := newForwarder(t, forward.Config{URL: "http://" + addr + "/hook?key=app-credential", Client: client})
		err := f.Handle(t.Context(), intake.Update{ID: 1, Body: []byte(`{"update_id":1}`)}, attempt)
		var ab *intake.AbandonError
		if err == nil || errors.As(err, &ab) {
			t.Fatalf("err = %v, want a retryable error", err)
		}
		if strings.Contains(err.Error(), "app-credential") {
			t.Fatalf("error %q contains the endpoint's query", err)
		}
	}
}

func TestHandleTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	// On the direct path and on a client of the caller's own, in a context
	// without a deadline and in one whose deadline is later than the
	// timeout: the timeout bounds the forward.
	ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
	defer cancel()
	for _, client := range []*http.Client{nil, {}} {
		f := newForwarder(t, forward.Config{URL: srv.URL, Timeout: 50 * time.Millisecond, Client: client})
		for _, ctx := range []context.Context{t.Context(), ctx} {
			err := f.Handle(ctx, intake.Update{ID: 1, Body: []byte(`{"update_id":1}`)}, attempt)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("client %v: err = %v, want a deadline error", client, err)
			}
		}
	}
}

func TestRedirectsAreNotFollowed(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(code), func(t *testing.T) {
			t.Parallel()
			var moved atomic.Int32
			mux := http.NewServeMux()
			mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, "/moved", code)
			})
			mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
				moved.Add(1) // a followed 301 would arrive as a GET without the update, and complete it
			})
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			f := newForwarder(t, forward.Config{URL: srv.URL + "/hook", AppSecretToken: "app-secret"})
			err := f.Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
			var se *forward.StatusError
			var ab *intake.AbandonError
			if !errors.As(err, &se) || se.Code != code || errors.As(err, &ab) {
				t.Fatalf("err = %v, want a retryable StatusError %d", err, code)
			}
			if !strings.Contains(err.Error(), "redirects are not followed") {
				t.Errorf("err = %q, want it to say redirects are not followed", err)
			}
			if n := moved.Load(); n != 0 {
				t.Fatalf("the redirect was followed %d times", n)
			}
		})
	}
}

// cutShortEndpoint answers every request with status and a Content-Length
// longer than the body it then writes, and closes the connection: an
// answer cut short.
func cutShortEndpoint(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"method\":\"sendMessage\",\"chat_id\":1,", status, http.StatusText(status))
		buf.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestAnswerCutShortIsRetried(t *testing.T) {
	t.Parallel()
	f := newForwarder(t, forward.Config{URL: cutShortEndpoint(t, http.StatusOK).URL})
	err := f.Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
	var ab *intake.AbandonError
	if err == nil || errors.As(err, &ab) {
		t.Fatalf("err = %v, want a retryable error: the webhook reply in the answer was lost", err)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("err = %v, want it to say the answer was cut short", err)
	}

	// A failure status cut short is that status: the body only adds words.
	f = newForwarder(t, forward.Config{URL: cutShortEndpoint(t, http.StatusInternalServerError).URL})
	err = f.Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
	var se *forward.StatusError
	if !errors.As(err, &se) || se.Code != http.StatusInternalServerError {
		t.Fatalf("err = %v, want the StatusError 500", err)
	}
}

func TestAnswerBodyStalledPastTheTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "64")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"method":`))
		http.NewResponseController(w).Flush()
		select { // the rest never comes
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	f := newForwarder(t, forward.Config{URL: srv.URL, Timeout: 100 * time.Millisecond})
	err := f.Handle(t.Context(), intake.Update{ID: 1, Body: []byte(`{"update_id":1}`)}, attempt)
	if err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Fatalf("err = %v, want the stalled answer retried", err)
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   forward.Config
		field string // of the *forward.ConfigError
	}{
		{forward.Config{}, "URL"},
		{forward.Config{URL: "not a url"}, "URL"},
		{forward.Config{URL: "ftp://x/y"}, "URL"},
		{forward.Config{URL: "http://x", Timeout: -time.Second}, "Timeout"},
		{forward.Config{URL: "http://x", Timeout: 2 * forward.MaxTimeout}, "Timeout"},
		{forward.Config{ExhaustionURL: "/relative"}, "ExhaustionURL"},
		// Addresses no forward can ever reach: every update would be
		// retried to its last attempt and exhausted.
		{forward.Config{URL: "http://127.0.0.1:99999/hook"}, "URL"},
		{forward.Config{URL: "http://127.0.0.1:65536/hook"}, "URL"},
		{forward.Config{URL: "http://127.0.0.1:0/hook"}, "URL"},
		{forward.Config{URL: "http://:8080/hook"}, "URL"},
		{forward.Config{URL: "http://x", ExhaustionURL: "http://x:70000/e"}, "ExhaustionURL"},
		{forward.Config{URL: "http://x", APIRoot: "http://g/?q=1"}, "APIRoot"},
		// A credential in the URL would reach logs and errors; an
		// unspecified address is where a server listens, not an endpoint.
		{forward.Config{URL: "http://user:hunter2@127.0.0.1:1/hook"}, "URL"},
		{forward.Config{URL: "http://user@127.0.0.1:1/hook"}, "URL"},
		{forward.Config{URL: "https://:hunter2@bot.example/hook"}, "URL"},
		{forward.Config{URL: "http://x", ExhaustionURL: "http://user:hunter2@127.0.0.1:1/e"}, "ExhaustionURL"},
		{forward.Config{URL: "http://0.0.0.0:8080/hook"}, "URL"},
		{forward.Config{URL: "http://0.0.0.0/hook"}, "URL"},
		{forward.Config{URL: "http://[::]:8080/hook"}, "URL"},
		{forward.Config{URL: "http://[::ffff:0.0.0.0]:8080/hook"}, "URL"},
		{forward.Config{URL: "http://x", ExhaustionURL: "http://[::]:9/e"}, "ExhaustionURL"},
		{forward.Config{URL: "http://x", AppSecretToken: "has space"}, "AppSecretToken"},
	} {
		_, err := forward.New(tc.cfg)
		ce, ok := errors.AsType[*forward.ConfigError](err)
		if !ok || ce.Field != tc.field {
			t.Errorf("New(%+v) = %v, want a *ConfigError naming %s", tc.cfg, err, tc.field)
		}
		if verr := tc.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
			t.Errorf("Validate(%+v) = %v, want New's %v", tc.cfg, verr, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("New(%+v) = %v: the error quotes the password", tc.cfg, err)
		}
	}
	for _, u := range []string{"http://x", "http://x:/y", "http://127.0.0.1:1/", "https://[::1]:65535/", "http://0.0.0.1:1/", "http://bot.example/x?user=a@b"} {
		if err := (forward.Config{URL: u}).Validate(); err != nil {
			t.Errorf("Validate of a valid URL %q: %v", u, err)
		}
	}
}

// TestThroughRunner wires a Forwarder into a real intake Runner: a refused
// update ends as an exhaustion, which is forwarded and acknowledged.
func TestThroughRunner(t *testing.T) {
	t.Parallel()
	app, appSrv := newEndpoint(t, http.StatusOK, nil)
	exh, exhSrv := newEndpoint(t, http.StatusOK, nil)
	exh.ack = true
	f := newForwarder(t, forward.Config{URL: appSrv.URL, ExhaustionURL: exhSrv.URL})
	st := memstore.New()
	r, err := intake.New(intake.Config{Store: st, AttemptHandler: f.Handle, ExhaustionHandler: f.HandleExhaustion})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })

	if _, err := r.Accept(t.Context(), []byte(`{"update_id":1,"message":{"chat":{"id":5},"text":"ok"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Idle(t.Context()); err != nil {
		t.Fatal(err)
	}
	app.mu.Lock()
	app.status = http.StatusBadRequest
	app.mu.Unlock()
	if _, err := r.Accept(t.Context(), []byte(`{"update_id":2,"message":{"chat":{"id":5},"text":"poison"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Idle(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(app.got()); n != 2 {
		t.Fatalf("app got %d requests, want 2 (no retry of a 400)", n)
	}
	got := exh.got()
	if len(got) != 1 {
		t.Fatalf("exhaustion endpoint got %d requests, want 1", len(got))
	}
	p, err := forward.DecodeExhaustion(bytes.NewReader(got[0].body))
	if err != nil {
		t.Fatal(err)
	}
	if p.UpdateID != 2 || p.Attempt != 1 || p.ClaimID == "" || !strings.Contains(p.Error, "400") || !strings.Contains(string(p.Update), "poison") {
		t.Fatalf("payload = %+v", p)
	}
	if got[0].header.Get(forward.HeaderKind) != "exhaustion" || got[0].header.Get(wire.HeaderClaimID) != p.ClaimID {
		t.Fatalf("headers = %v", got[0].header)
	}
	left, err := st.DueExhaustions(t.Context(), intake.ExhaustionQuery{Limit: 10})
	if err != nil || len(left) != 0 {
		t.Fatalf("exhaustions left after a 2xx: %v, %v", left, err)
	}
}

// TestHandleAnnouncesAPIRoot: an update forward carries the per-attempt
// API root under APIRoot, or under what APIRootFunc says at that moment (a
// gateway on port 0 is known only once it listens); nothing when there is
// none.
func TestHandleAnnouncesAPIRoot(t *testing.T) {
	t.Parallel()
	e, srv := newEndpoint(t, http.StatusOK, nil)
	const want = "http://127.0.0.1:8081/a/42/2/c-1/bot"
	static := newForwarder(t, forward.Config{URL: srv.URL, APIRoot: "http://127.0.0.1:8081/"})
	var base atomic.Value
	base.Store("")
	dynamic := newForwarder(t, forward.Config{URL: srv.URL, APIRootFunc: func() string { return base.Load().(string) }})
	none := newForwarder(t, forward.Config{URL: srv.URL})
	upd := intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}
	for _, f := range []*forward.Forwarder{static, dynamic, none} {
		if err := f.Handle(t.Context(), upd, attempt); err != nil {
			t.Fatal(err)
		}
	}
	base.Store("http://127.0.0.1:8081")
	if err := dynamic.Handle(t.Context(), upd, attempt); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range e.got() {
		got = append(got, r.header.Get(wire.HeaderAPIRoot))
	}
	if w := []string{want, "", "", want}; strings.Join(got, " | ") != strings.Join(w, " | ") {
		t.Errorf("announced roots %q; want %q", got, w)
	}
}

// TestHandleAuthRefusalNamesTheSetting: a 401 or 403 is an *AuthError, not
// an abandonment, whose message names the setting to check, says whether
// the app's secret was sent, and never quotes it.
func TestHandleAuthRefusalNamesTheSetting(t *testing.T) {
	t.Parallel()
	const secret = "app-only_s3cret"
	for _, tc := range []struct {
		name     string
		status   int
		secret   string
		wantSent bool
		wantText string
	}{
		{"401 without a secret", http.StatusUnauthorized, "", false, "AppSecretToken is empty"},
		{"403 with a wrong secret", http.StatusForbidden, secret, true, "make Config.AppSecretToken and the app's secret check agree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, srv := newEndpoint(t, tc.status, nil)
			f := newForwarder(t, forward.Config{URL: srv.URL, AppSecretToken: tc.secret})
			err := f.Handle(t.Context(), intake.Update{ID: 42, Body: []byte(`{"update_id":42}`)}, attempt)
			var ae *forward.AuthError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want an AuthError", err)
			}
			if ab := (*intake.AbandonError)(nil); errors.As(err, &ab) {
				t.Fatalf("err = %v is an abandonment", err)
			}
			if ae.Code != tc.status || ae.SecretSent != tc.wantSent {
				t.Errorf("AuthError = {Code %d, SecretSent %v}, want {%d, %v}", ae.Code, ae.SecretSent, tc.status, tc.wantSent)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.wantText) || strings.Contains(msg, secret) {
				t.Errorf("message = %q, want it to contain %q and not the secret", msg, tc.wantText)
			}
			if got := e.got(); len(got) != 1 || got[0].header.Get(forward.HeaderTelegramSecret) != tc.secret {
				t.Errorf("the forward's secret header = %v", got)
			}
		})
	}
}
