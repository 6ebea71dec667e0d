package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/hookowner"
)

// browserTimeout bounds the whole browser test: Chromium under -race on two
// shared cores starts slowly, but never takes this long.
const browserTimeout = 3 * time.Minute

// findChromium returns the path of a Chromium (or Chrome) binary, or "".
func findChromium() string {
	if p := os.Getenv("TGRELAY_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// screenshotDir is where the browser test saves its screenshots:
// $TGRELAY_SCREENSHOTS when set, else a temporary directory.
func screenshotDir(t *testing.T) string {
	t.Helper()
	if d := os.Getenv("TGRELAY_SCREENSHOTS"); d != "" {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	return t.TempDir()
}

// A real browser opens the overview, goes to Exhaustions, acknowledges the
// exhaustion through the confirmation step, and the store changes; then a
// new exhaustion appears on the open page by itself (the live refresh).
// No script error and no Content-Security-Policy violation is logged. It
// saves a screenshot of every page.
func TestBrowser(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		if os.Getenv("TGRELAY_REQUIRE_BROWSER") == "1" {
			t.Fatal("TGRELAY_REQUIRE_BROWSER=1 but no chromium binary was found (apt-get install chromium)")
		}
		t.Skip("SKIPPED LOUDLY: no chromium binary found, so the dashboard's browser test did not run " +
			"(apt-get install chromium; CI sets TGRELAY_REQUIRE_BROWSER=1 so it cannot skip there)")
	}
	st := storeKinds[1].open(t) // SQLite, as serve uses by default
	fill(t, st, 14, false)
	ident := exhaustOne(t, st, 15)
	rec := dashboard.NewRecorder()
	for i := range 40 {
		rec.Add(dashboard.SeriesAccepted, 1+i%3)
		rec.Add(dashboard.SeriesForwarded, 1+i%2)
		rec.Add(dashboard.SeriesCompleted, 1)
	}
	rec.Add(dashboard.SeriesRetried, 3)
	rec.Add(dashboard.SeriesExhausted, 1)
	rec.SetWebhook(hookowner.Status{Mode: hookowner.ModeWebhook, Owned: true, OwnerHost: "bot.example.com", CheckedAt: time.Now().Add(-40 * time.Second)})
	s := serve(t, dashboard.Config{Store: st, StoreName: "sqlite (updates.db)", Recorder: rec,
		BroadcastDir: broadcastDir(t), RefreshInterval: 300 * time.Millisecond})
	dir := screenshotDir(t)
	t.Logf("screenshots in %s", dir)

	b := newBrowser(t, chromium, chromedp.WindowSize(1280, 900))
	ctx := b.ctx

	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}
	scheme := func(v string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
				Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: v}}})
			return err
		})
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	// noSideways fails the test when the page is wider than the window.
	noSideways := func(page string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			wide, err := chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth`)(ctx, tg)
			if err != nil {
				return err
			}
			if wide {
				t.Errorf("%s scrolls sideways at 375 px", page)
			}
			return nil
		})
	}
	exhRow := fmt.Sprintf("#exhaustion-%d", ident.UpdateID)
	err := chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(css(`svg`)),
		chromedp.WaitVisible(css(`#live-status[data-state="live"]`)),
		shot("overview"),
		click(`nav a[href="/exhaustions"]`),
		chromedp.WaitVisible(css(exhRow)),
		shot("exhaustions"),
		click(exhRow+` button[data-action="acknowledge"]`),
		chromedp.WaitVisible(css(`#confirm`)),
		shot("confirm"),
		click(`#confirm`),
		chromedp.WaitVisible(css(`#result`)),
		shot("result"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
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
	if row.Unacknowledged() || row.SettledAt.IsZero() {
		t.Fatalf("after the browser acknowledged it, the row is %+v", row)
	}

	// The open Exhaustions page shows a new exhaustion without a reload.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/exhaustions"),
		chromedp.WaitVisible(css(`#live-status[data-state="live"]`)),
		chromedp.Func(func(context.Context, *chromedp.Target) error { exhaustOne(t, st, 16); return nil }),
		chromedp.WaitVisible(css(`#exhaustion-16`)),
		chromedp.Navigate(s.URL+"/updates"),
		chromedp.WaitVisible(css(`table.rows`)),
		shot("updates"),
		chromedp.Navigate(s.URL+"/updates/16"),
		chromedp.WaitVisible(css(`pre.json`)),
		shot("update"),
		chromedp.Navigate(s.URL+"/broadcasts"),
		chromedp.WaitVisible(css(`svg.progress`)),
		shot("broadcasts"),
		chromedp.Navigate(s.URL+"/broadcasts/promo"),
		chromedp.WaitVisible(css(`#uncertain`)),
		shot("broadcast"),
		// Dark, and a 375 px wide phone.
		scheme("dark"),
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(css(`svg`)),
		shot("overview-dark"),
		chromedp.EmulateViewport(375, 812),
		chromedp.Navigate(s.URL+"/exhaustions"),
		chromedp.WaitVisible(css(`#exhaustion-16`)),
		noSideways("exhaustions"),
		shot("exhaustions-375-dark"),
		scheme("light"),
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(css(`svg`)),
		noSideways("overview"),
		shot("overview-375"),
		chromedp.Navigate(s.URL+"/updates"),
		chromedp.WaitVisible(css(`table.rows`)),
		noSideways("updates"),
		shot("updates-375"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	b.check(t)
}

// browserSession is a headless Chromium tab of one test: its context,
// bounded by browserTimeout, and every console error, uncaught exception
// and browser log error (a Content-Security-Policy violation is one) the
// page reported.
type browserSession struct {
	ctx      context.Context
	stop     func() // stops listening to the console
	mu       sync.Mutex
	problems []string
}

// newBrowser starts Chromium at path with the options every test needs
// and extra, and listens to its console until the test ends.
func newBrowser(t *testing.T, path string, extra ...chromedp.ExecAllocatorOption) *browserSession {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	actx, acancel := chromedp.NewExecAllocator(t.Context(), append(opts, extra...)...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, tcancel := context.WithTimeout(ctx, browserTimeout)
	b := &browserSession{ctx: ctx}
	cctx, ccancel := context.WithCancel(ctx)
	messages := chromedp.Console(cctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.problems = append(b.problems, fmt.Sprintf("%s %s (%s:%d)", m.Source, m, m.URL, m.Line+1))
				b.mu.Unlock()
			}
		}
	})
	b.stop = sync.OnceFunc(func() { ccancel(); wg.Wait() })
	t.Cleanup(func() { b.stop(); tcancel(); cancel(); acancel() })
	return b
}

// check fails t for every problem the page reported.
func (b *browserSession) check(t *testing.T) {
	t.Helper()
	b.stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		t.Errorf("browser reported %s", p)
	}
}

// click clicks the first element sel matches, found and clicked in one
// step in the page. chromedp.Click looks the node up, then clicks it by id
// in a second call: a live refresh that swaps the #live region between
// the two (every 300 ms in these tests) fails it with "Could not find node
// with given id", which no user's click can meet.
func click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		js := fmt.Sprintf(`(function(){var e=document.querySelector(%q); if(!e) return false; e.click(); return true})()`, sel)
		ok, err := chromedp.Evaluate[bool](js)(ctx, tg)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("click %s: no such element", sel)
		}
		return nil
	})
}
