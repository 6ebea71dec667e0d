package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
)

// A real browser answers the operator's questions: the Overview's verdict
// and its reason, the unknown replies, the processes, a search; and a bulk
// acknowledge through its confirmation acts on exactly the set it named,
// not on an exhaustion that arrived while the confirmation was open. No
// script error or Content-Security-Policy violation is logged, and the
// new pages do not scroll sideways on a phone.
func TestBrowserOperatorPages(t *testing.T) {
	chromium := findChromium()
	if chromium == "" {
		if os.Getenv("TGRELAY_REQUIRE_BROWSER") == "1" {
			t.Fatal("TGRELAY_REQUIRE_BROWSER=1 but no chromium binary was found (apt-get install chromium)")
		}
		t.Skip("SKIPPED LOUDLY: no chromium binary found, so the dashboard's operator-pages browser test did not run")
	}
	st := storeKinds[1].open(t)
	ctx0 := t.Context()
	journalFixture(t, st)
	for id := int64(10); id <= 12; id++ {
		exhaustOne(t, st, id)
	}
	ps := st.(intake.ProcessStore)
	if ok, err := ps.Register(ctx0, "proc-browser", time.Now().Add(time.Hour)); err != nil || !ok {
		t.Fatal(ok, err)
	}
	rec := dashboard.NewRecorder()
	rec.Add(dashboard.SeriesRetried, 5) // the app fails every forward
	rec.SetWebhook(hookowner.Status{Mode: "webhook", Owned: true, OwnerHost: "bot.example.com", CheckedAt: time.Now()})
	s := serve(t, dashboard.Config{Store: st, StoreName: "sqlite (updates.db)", Recorder: rec, RefreshInterval: time.Minute})
	dir := screenshotDir(t)

	b := newBrowser(t, chromium, chromedp.WindowSize(1280, 900))
	ctx := b.ctx

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			png, err := chromedp.FullScreenshot(100)(ctx, tg)
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		})
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(css(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return v
	}
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

	// The verdict, with its reason.
	if err := chromedp.Do(ctx, chromedp.Navigate(s.URL+"/"), chromedp.WaitVisible(css(`#health`)), shot("ops-overview")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if v := text(`#health`); !strings.Contains(v, "Unhealthy") || !strings.Contains(v, "the app looks down or unreachable") {
		t.Errorf("health verdict: %q", v)
	}
	if v := text(`#charts-scope`); !strings.Contains(v, "this process") {
		t.Errorf("charts scope: %q", v)
	}

	// Unknown replies, explained; the processes; a search.
	err := chromedp.Do(ctx,
		click(`nav a[href="/replies"]`),
		chromedp.WaitVisible(css(`tr.reply-unknown`)),
		shot("ops-replies"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if v := text(`table.replies`); !strings.Contains(v, "unknown · interrupted") || !strings.Contains(v, "never resent automatically") {
		t.Errorf("replies page: %q", v)
	}
	err = chromedp.Do(ctx,
		click(`nav a[href="/processes"]`),
		chromedp.WaitVisible(css(`#process-proc-browser`)),
		shot("ops-processes"),
		chromedp.Navigate(s.URL+"/updates?q=hello+2"),
		chromedp.WaitVisible(css(`table.rows`)),
		shot("ops-search"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}

	// Bulk acknowledge: the confirmation names three; a fourth exhaustion
	// arrives while it is open and is left alone.
	err = chromedp.Do(ctx,
		chromedp.Navigate(s.URL+"/exhaustions"),
		chromedp.WaitVisible(css(`#bulk-acknowledge`)),
		click(`#bulk-acknowledge`),
		chromedp.WaitVisible(css(`#confirm`)),
		shot("ops-bulk-confirm"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if v := text(`#bulk-count`); !strings.Contains(v, "exactly these 3 updates") {
		t.Errorf("bulk confirmation: %q", v)
	}
	exhaustOne(t, st, 13)
	if err := chromedp.Do(ctx, click(`#confirm`), chromedp.WaitVisible(css(`#result`)), shot("ops-bulk-result")); err != nil {
		t.Fatalf("browser: %v", err)
	}
	if v := text(`#result`); !strings.Contains(v, "Acknowledged 3 updates") {
		t.Errorf("bulk result: %q", v)
	}
	for id := int64(10); id <= 13; id++ {
		row, _, err := st.Get(ctx0, id)
		if err != nil {
			t.Fatal(err)
		}
		if want := id == 13; row.Unacknowledged() != want {
			t.Errorf("update %d: unacknowledged %v, want %v", id, row.Unacknowledged(), want)
		}
	}

	// A phone.
	err = chromedp.Do(ctx,
		chromedp.EmulateViewport(375, 812),
		chromedp.Navigate(s.URL+"/replies?outcome=any"),
		chromedp.WaitVisible(css(`table.replies`)),
		noSideways("replies"),
		shot("ops-replies-375"),
		chromedp.Navigate(s.URL+"/processes"),
		chromedp.WaitVisible(css(`#process-proc-browser`)),
		noSideways("processes"),
		chromedp.Navigate(s.URL+"/"),
		chromedp.WaitVisible(css(`#health`)),
		noSideways("overview"),
		shot("ops-overview-375"),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	b.check(t)
}
