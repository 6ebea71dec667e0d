package dashboard_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tgrelay/tgrelay/dashboard"
)

// remoteHost is the name the browser test opens the dashboard under. The
// browser resolves it to the loopback listener (--host-resolver-rules),
// but judges the page by its name: http://dashboard.test is not a
// potentially trustworthy origin, as a plain-HTTP dashboard on a LAN
// address is not. So Chromium sends what it sends there: no Sec-Fetch-Site,
// and (under Referrer-Policy: no-referrer) "Origin: null" on a form post.
const remoteHost = "dashboard.test"

// requireChromium returns the Chromium binary, skipping loudly without one
// (failing under TGRELAY_REQUIRE_BROWSER=1).
func requireChromium(t *testing.T) string {
	t.Helper()
	chromium := findChromium()
	if chromium == "" {
		if os.Getenv("TGRELAY_REQUIRE_BROWSER") == "1" {
			t.Fatal("TGRELAY_REQUIRE_BROWSER=1 but no chromium binary was found (apt-get install chromium)")
		}
		t.Skip("SKIPPED LOUDLY: no chromium binary found, so the dashboard's browser test did not run " +
			"(apt-get install chromium; CI sets TGRELAY_REQUIRE_BROWSER=1 so it cannot skip there)")
	}
	return chromium
}

// originLog records the Origin and Sec-Fetch-Site of every POST.
type originLog struct {
	mu    sync.Mutex
	posts []string
}

func (o *originLog) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			o.mu.Lock()
			o.posts = append(o.posts, fmt.Sprintf("%s Origin=%q Sec-Fetch-Site=%q", r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")))
			o.mu.Unlock()
		}
		next.ServeHTTP(w, r)
	})
}

func (o *originLog) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.posts, "; ")
}

// A real browser signs in and acknowledges an exhaustion on a dashboard
// served over plain HTTP under a non-loopback name, where Chromium sends
// "Origin: null" and no Sec-Fetch-Site; then it signs out, and the pages
// ask for the token again (TestLogoutRevokesSession replays the old
// cookie).
func TestBrowserPlainHTTPRemote(t *testing.T) {
	chromium := requireChromium(t)
	st := storeKinds[1].open(t)
	ident := exhaustOne(t, st, 15)
	h, err := dashboard.New(dashboard.Config{Store: st, AdminToken: adminToken})
	if err != nil {
		t.Fatal(err)
	}
	var origins originLog
	srv := httptest.NewServer(origins.wrap(h))
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	base := "http://" + remoteHost + ":" + port

	ctx := newBrowser(t, chromium,
		chromedp.Flag("host-resolver-rules", "MAP "+remoteHost+" 127.0.0.1"),
		chromedp.Flag("no-proxy-server", true),
	).ctx

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	exhRow := fmt.Sprintf("#exhaustion-%d", ident.UpdateID)
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/exhaustions"),
		chromedp.WaitVisible(css(`input[name="token"]`)),
		chromedp.SendKeys(css(`input[name="token"]`), adminToken),
		chromedp.Submit(css(`form.login`)),
		// Signed in once the overview offers to sign out: every page,
		// the sign-in page too, has the nav, and a navigation sent
		// while the form's post is still on its way replaces it, which
		// Chromium reports as net::ERR_ABORTED (this test failed so in
		// CI).
		chromedp.WaitVisible(css(`form[action="/logout"] button`)),
		chromedp.Navigate(base+"/exhaustions"),
		chromedp.WaitVisible(css(exhRow)),
		click(exhRow+` button[data-action="acknowledge"]`),
		chromedp.WaitVisible(css(`#confirm`)),
		click(`#confirm`),
		chromedp.WaitVisible(css(`#result`)),
	)
	if err != nil {
		t.Fatalf("browser: %v (POSTs seen: %s)", err, origins.String())
	}
	t.Logf("POSTs seen: %s", origins.String())
	if !strings.Contains(origins.String(), `/login Origin="null" Sec-Fetch-Site=""`) {
		t.Errorf("the browser did not post as it does on a plain-HTTP LAN address (Origin null, no Sec-Fetch-Site): %s", origins.String())
	}
	result, err := chromedp.Run(ctx, chromedp.Text(css(`#result`)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(result, "Done.") {
		t.Errorf("result banner: %q", result)
	}
	row, _, err := st.Get(t.Context(), ident.UpdateID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Unacknowledged() {
		t.Fatalf("after the browser acknowledged it, the row is %+v", row)
	}

	// Sign out (another post from the plain-HTTP origin); the pages then
	// ask for the token again.
	err = chromedp.Do(ctx,
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(css(`form[action="/logout"] button`)),
		click(`form[action="/logout"] button`),
		chromedp.WaitVisible(css(`input[name="token"]`)),
		chromedp.Navigate(base+"/exhaustions"),
		chromedp.WaitVisible(css(`input[name="token"]`)),
	)
	if err != nil {
		t.Fatalf("browser, signing out: %v (POSTs seen: %s)", err, origins.String())
	}
	if !strings.Contains(origins.String(), `/logout Origin="null"`) {
		t.Errorf("sign-out did not post from the plain-HTTP origin: %s", origins.String())
	}
}
