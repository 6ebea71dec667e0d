package gateway_test

import (
	"context"
	"fmt"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
)

// echoingProxy is a loopback forward proxy that refuses every request with
// status and an HTML page quoting the URL it was asked for, as Squid's
// error pages do, after padding. A plain-http request through a forward proxy carries its
// absolute URL (no CONNECT), so the page quotes /bot<token>/<method>.
func echoingProxy(t *testing.T, status int, padding string) *url.URL {
	t.Helper()
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		// A careless one quotes it in a header too.
		w.Header().Set("Content-Disposition", fmt.Sprintf("inline; filename=%q", r.URL.Path))
		w.WriteHeader(status)
		fmt.Fprintf(w, "%s", padding)
		fmt.Fprintf(w, "<html><body><h1>ERROR</h1><p>The requested URL could not be retrieved: <a href=%q>%s</a> (%s)</p></body></html>",
			r.URL.String(), html.EscapeString(r.URL.String()), r.URL.EscapedPath())
	}))
	t.Cleanup(proxy.Close)
	u, err := url.Parse(proxy.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestForwardProxyPageKeepsNoToken: the Bot API root is plain http and
// calls go through a forward proxy, which refuses them with a page that
// quotes the URL, and so the token. Neither the answer the app gets (a
// fenced call, an unfenced one, a file download), nor the journal row,
// nor the gateway's log lines carry the token or its secret half.
func TestForwardProxyPageKeepsNoToken(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusProxyAuthRequired, http.StatusForbidden, http.StatusNotFound, http.StatusBadGateway} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			proxy := echoingProxy(t, status, "")
			logs := &testkit.SyncBuffer{}
			f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
				c.APIRoot = "http://api.telegram.invalid"
				// The streaming transport sends a plain-http call to the
				// proxy in absolute form, as any net/http transport does.
				rt := gateway.NewStreamTransportConfig(gateway.StreamConfig{Proxy: http.ProxyURL(proxy)})
				c.Transport, c.StreamTransport = rt, rt
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}})
			token := f.tg.Token
			secret := token[strings.IndexByte(token, ':')+1:]
			leaks := func(what, s string) {
				t.Helper()
				for _, form := range []string{token, url.PathEscape(token), secret} {
					if strings.Contains(s, form) {
						t.Errorf("%s carries the token: %s", what, s)
						return
					}
				}
			}

			id := f.claim(t, 7)
			fenced := f.send(t, &id, "hello")
			leaks("the fenced call's answer", string(fenced.body)+fmt.Sprint(fenced.header))
			if status < 500 {
				// The page is passed on, as the proxy's answer it is, with
				// the token masked.
				if fenced.status != status || !strings.Contains(string(fenced.body), "bot"+token[:strings.IndexByte(token, ':')+1]+botapi.Redacted) {
					t.Errorf("the fenced call was answered %d %s; want the proxy's %d page with the token masked", fenced.status, fenced.body, status)
				}
			} else if fenced.status != gateway.StatusUnknown {
				t.Errorf("the fenced call was answered %d; want unknown (%d), as for any 5xx page", fenced.status, gateway.StatusUnknown)
			}
			unfenced := f.send(t, nil, "hello")
			leaks("the unfenced call's answer", string(unfenced.body)+fmt.Sprint(unfenced.header))
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+"/file/bot"+token+"/photos/file_1.jpg", nil)
			if err != nil {
				t.Fatal(err)
			}
			file := do(t, req)
			leaks("the file download's answer", string(file.body)+fmt.Sprint(file.header))

			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := f.gw.Close(ctx); err != nil {
				t.Fatal(err)
			}
			entries, err := f.store.Journal(t.Context(), 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Fatalf("journal has %d entries for update 7; want 1", len(entries))
			}
			leaks("the journal row", string(entries[0].Body))
			leaks("the log", logs.String())
		})
	}
}

// TestForwardProxyPageTooLargeIsUnknown: a proxy's error page too large
// to read whole (and so to mask) is not passed on, streamed or cut: the
// app is answered unknown, with the status alone, as for a 5xx page, for a
// call and for a file download alike.
func TestForwardProxyPageTooLargeIsUnknown(t *testing.T) {
	t.Parallel()
	proxy := echoingProxy(t, http.StatusForbidden, strings.Repeat("x", intake.MaxJournalBody))
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) {
		c.APIRoot = "http://api.telegram.invalid"
		rt := gateway.NewStreamTransportConfig(gateway.StreamConfig{Proxy: http.ProxyURL(proxy)})
		c.Transport, c.StreamTransport = rt, rt
	}})
	token := f.tg.Token
	secret := token[strings.IndexByte(token, ':')+1:]
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+"/file/bot"+token+"/photos/file_1.jpg", nil)
	if err != nil {
		t.Fatal(err)
	}
	for what, r := range map[string]reply{"call": f.send(t, nil, "hello"), "file download": do(t, req)} {
		if r.status != gateway.StatusUnknown || !strings.Contains(r.env.Description, "HTTP 403") {
			t.Errorf("the %s was answered %d %.200s; want unknown (%d) naming HTTP 403", what, r.status, r.body, gateway.StatusUnknown)
		}
		if strings.Contains(string(r.body), secret) {
			t.Errorf("the %s's answer carries the token", what)
		}
	}
}
