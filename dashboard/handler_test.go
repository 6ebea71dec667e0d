package dashboard_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/leakcheck"
)

func TestMain(m *testing.M) { leakcheck.Main(m) }

var rowLink = regexp.MustCompile(`<td class="num" data-label="Update"><a href="/updates/\d+">`)

// Every page renders with an empty, a small and a large store, with the
// security headers, and lists at most a page of rows with a way on.
func TestPagesRender(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		for _, size := range []struct {
			name string
			n    int
		}{{"empty", 0}, {"small", 12}, {"large", 600}} {
			t.Run(kind.name+"/"+size.name, func(t *testing.T) {
				t.Parallel()
				st := kind.open(t)
				var ident intake.Identity
				if size.n > 0 {
					ident = fill(t, st, size.n, true)
				}
				rec := dashboard.NewRecorder()
				rec.Add(dashboard.SeriesAccepted, 3)
				s := serve(t, dashboard.Config{Store: st, StoreName: kind.name, Recorder: rec, BroadcastDir: broadcastDir(t), PageSize: 20})

				pages := []string{"/", "/updates", "/updates?state=pending", "/updates?state=failed", "/updates?chat=101",
					"/updates?after=5", "/updates?order=oldest", "/updates?q=hello", "/updates?q=7", "/updates?state=expired",
					"/replies", "/replies?outcome=any", "/processes", "/bulk/requeue?state=failed", "/bulk/acknowledge?state=unacknowledged",
					"/exhaustions", "/broadcasts", "/broadcasts/promo", "/login", "/assets/style.css", "/assets/app.js"}
				if size.n > 0 {
					pages = append(pages, "/updates/1", "/updates/2", fmt.Sprintf("/updates/%d", ident.UpdateID),
						confirmPath(ident, "acknowledge"), confirmPath(ident, "requeue"))
				}
				for _, p := range pages {
					resp, err := s.client.Get(s.URL + p)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("GET %s: %d", p, resp.StatusCode)
					}
					if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "unsafe-inline") {
						t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
					}
					if resp.Header.Get("X-Frame-Options") != "DENY" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
						t.Errorf("GET %s: missing framing or sniffing headers", p)
					}
				}

				_, overview := s.get(t, "/")
				mustContain(t, "overview", overview, "Accepted/s", "Forwarded/s", "Completed", "Retried", "Exhausted", "<svg", kind.name, "Oldest pending")
				_, updates := s.get(t, "/updates")
				got := len(rowLink.FindAllString(updates, -1))
				_, exh := s.get(t, "/exhaustions")
				switch size.n {
				case 0:
					mustContain(t, "empty updates", updates, "No updates")
					mustContain(t, "empty exhaustions", exh, "No unacknowledged exhaustions")
				case 12:
					if got != 13 {
						t.Errorf("updates page lists %d rows, want 13", got)
					}
					mustContain(t, "exhaustions", exh, fmt.Sprintf(`id="exhaustion-%d"`, ident.UpdateID), ident.ClaimID[:8], "Acknowledge…", "Requeue…")
				default:
					if got != 20 {
						t.Errorf("updates page lists %d rows, want a page of 20", got)
					}
					// Newest first: the exhaustion (update 601), then 600 down to 582.
					mustContain(t, "large updates", updates, `href="/updates/601"`, `href="/updates?before=582" rel="next"`)
					_, older := s.get(t, "/updates?before=582")
					mustContain(t, "older page", older, `href="/updates/581"`, `href="/updates?before=562" rel="next"`)
					_, oldest := s.get(t, "/updates?order=oldest")
					mustContain(t, "oldest first", oldest, `href="/updates?after=20" rel="next"`)
					_, next := s.get(t, "/updates?after=20")
					mustContain(t, "second page", next, `href="/updates/21"`, `href="/updates?after=40" rel="next"`)
					_, pending := s.get(t, "/updates?state=pending&limit=100000")
					if n := len(rowLink.FindAllString(pending, -1)); n != 2*size.n/5 {
						t.Errorf("limit above the maximum: %d pending rows listed, want all %d (under MaxPageSize)", n, 2*size.n/5)
					}
				}
				_, bc := s.get(t, "/broadcasts/promo")
				mustContain(t, "broadcast", bc, "promo", "not running", `id="uncertain"`, `<li class="mono">7</li>`)
			})
		}
	}
}

// The chat filter scans, keeps the chat's rows only, and pages on.
func TestUpdatesByChat(t *testing.T) {
	t.Parallel()
	st := storeKinds[0].open(t)
	fill(t, st, 30, false)
	s := serve(t, dashboard.Config{Store: st, PageSize: 4})
	_, p := s.get(t, "/updates?chat=101")
	ids := regexp.MustCompile(`data-label="Update"><a href="/updates/(\d+)"`).FindAllStringSubmatch(p, -1)
	var got []string
	for _, m := range ids {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != "28,25,22,19" {
		t.Errorf("chat 101 first page: %v, want 28,25,22,19 (newest first)", got)
	}
	mustContain(t, "chat page", p, `href="/updates?before=19&amp;chat=101" rel="next"`)
	_, p = s.get(t, "/updates?chat=101&order=oldest")
	got = got[:0]
	for _, m := range regexp.MustCompile(`data-label="Update"><a href="/updates/(\d+)"`).FindAllStringSubmatch(p, -1) {
		got = append(got, m[1])
	}
	if strings.Join(got, ",") != "1,4,7,10" {
		t.Errorf("chat 101 oldest first: %v, want 1,4,7,10", got)
	}
	mustContain(t, "chat page", p, `href="/updates?after=10&amp;chat=101" rel="next"`)
	if _, p := s.get(t, "/updates?before=4&chat=101"); strings.Contains(p, `rel="next"`) || !strings.Contains(p, `href="/updates/1"`) {
		t.Error("last chat page, newest first: wrong rows or a next page")
	}
	_, p2 := s.get(t, "/updates?after=28&chat=101")
	if strings.Contains(p2, `rel="next"`) {
		t.Error("last chat page offers a next page")
	}
	if code, _ := s.get(t, "/updates?chat="+strings.Repeat("9", 65)); code != http.StatusBadRequest {
		t.Errorf("over-long chat: %d, want 400", code)
	}
	if code, _ := s.get(t, "/updates?state=bogus"); code != http.StatusBadRequest {
		t.Errorf("unknown state: %d, want 400", code)
	}
}

// Acknowledge acts with the exact identity: the right one applies once, a
// stale one and a repeat are refused with an explanation, and a request
// without the CSRF token, with another browser's token or from another
// origin changes nothing.
func TestAcknowledge(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			ident := fill(t, st, 5, true)
			s := serve(t, dashboard.Config{Store: st})
			unacked := func() bool {
				row, _, err := st.Get(t.Context(), ident.UpdateID)
				if err != nil {
					t.Fatal(err)
				}
				return row.Unacknowledged()
			}

			code, page := s.get(t, confirmPath(ident, "acknowledge"))
			if code != http.StatusOK {
				t.Fatalf("confirm page: %d", code)
			}
			token := csrf(t, page)
			mustContain(t, "confirm page", page, ident.ClaimID, "Yes, acknowledge update")

			// Forged: no token, a token of another browser, another origin.
			if code, _ := s.post(t, actionPath(ident, "acknowledge"), identityForm(ident, "")); code != http.StatusForbidden {
				t.Errorf("no CSRF token: %d, want 403", code)
			}
			other := serve(t, dashboard.Config{Store: st})
			_, otherPage := other.get(t, confirmPath(ident, "acknowledge"))
			if code, _ := s.post(t, actionPath(ident, "acknowledge"), identityForm(ident, csrf(t, otherPage))); code != http.StatusForbidden {
				t.Errorf("another handler's CSRF token: %d, want 403", code)
			}
			req, _ := http.NewRequest(http.MethodPost, s.URL+actionPath(ident, "acknowledge"), strings.NewReader(identityForm(ident, token).Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Sec-Fetch-Site", "cross-site")
			if resp, err := s.client.Do(req); err != nil {
				t.Fatal(err)
			} else if resp.Body.Close(); resp.StatusCode != http.StatusForbidden {
				t.Errorf("cross-site POST: %d, want 403", resp.StatusCode)
			}
			if !unacked() {
				t.Fatal("a forged request acknowledged the exhaustion")
			}

			// Stale: a wrong claim id and a wrong attempt.
			for _, bad := range []intake.Identity{
				{UpdateID: ident.UpdateID, Attempt: ident.Attempt, ClaimID: "not-the-claim"},
				{UpdateID: ident.UpdateID, Attempt: ident.Attempt + 1, ClaimID: ident.ClaimID},
			} {
				code, page := s.post(t, actionPath(bad, "acknowledge"), identityForm(bad, token))
				if code != http.StatusConflict {
					t.Errorf("stale identity %+v: %d, want 409", bad, code)
				}
				mustContain(t, "stale result", page, "Nothing changed", "Someone else acted first")
			}
			if code, page := s.get(t, confirmPath(intake.Identity{UpdateID: ident.UpdateID, Attempt: 9, ClaimID: "x"}, "acknowledge")); code != http.StatusConflict || strings.Contains(page, "Yes, acknowledge") {
				t.Errorf("confirm page of a stale identity: %d, offers the button: %v", code, strings.Contains(page, "Yes, acknowledge"))
			}
			if !unacked() {
				t.Fatal("a stale identity acknowledged the exhaustion")
			}

			// Right.
			code, page = s.post(t, actionPath(ident, "acknowledge"), identityForm(ident, token))
			if code != http.StatusOK {
				t.Fatalf("acknowledge: %d\n%s", code, page)
			}
			mustContain(t, "result", page, "Done.", "is acknowledged")
			if unacked() {
				t.Fatal("the exhaustion is still unacknowledged")
			}
			// Again: someone (this operator) acted first.
			code, page = s.post(t, actionPath(ident, "acknowledge"), identityForm(ident, token))
			if code != http.StatusConflict {
				t.Errorf("second acknowledge: %d, want 409", code)
			}
			mustContain(t, "second result", page, "already acknowledged")
		})
	}
}

// Requeue checks the exact identity, then puts the row back to pending.
func TestRequeue(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			ident := fill(t, st, 5, true)
			s := serve(t, dashboard.Config{Store: st})
			_, page := s.get(t, confirmPath(ident, "requeue"))
			token := csrf(t, page)

			if code, _ := s.post(t, actionPath(ident, "requeue"), identityForm(ident, "")); code != http.StatusForbidden {
				t.Errorf("no CSRF token: %d, want 403", code)
			}
			bad := ident
			bad.ClaimID = "someone-else"
			if code, page := s.post(t, actionPath(bad, "requeue"), identityForm(bad, token)); code != http.StatusConflict {
				t.Errorf("stale requeue: %d, want 409\n%s", code, page)
			}
			if row, _, _ := st.Get(t.Context(), ident.UpdateID); !row.Unacknowledged() {
				t.Fatalf("a refused requeue changed the row: %+v", row)
			}
			code, page := s.post(t, actionPath(ident, "requeue"), identityForm(ident, token))
			if code != http.StatusOK {
				t.Fatalf("requeue: %d\n%s", code, page)
			}
			mustContain(t, "requeue result", page, "pending again")
			row, _, _ := st.Get(t.Context(), ident.UpdateID)
			if row.State != intake.StatePending || row.Attempts != 0 {
				t.Errorf("after requeue: %s attempt %d, want pending attempt 0", row.State, row.Attempts)
			}
			if code, _ := s.post(t, actionPath(ident, "requeue"), identityForm(ident, token)); code != http.StatusConflict {
				t.Errorf("second requeue: %d, want 409", code)
			}
		})
	}
}

// Read-only mode hides the buttons and refuses every action.
func TestReadOnly(t *testing.T) {
	t.Parallel()
	st := storeKinds[0].open(t)
	ident := fill(t, st, 5, true)
	s := serve(t, dashboard.Config{Store: st, ReadOnly: true})
	_, exh := s.get(t, "/exhaustions")
	mustContain(t, "read-only exhaustions", exh, fmt.Sprintf(`id="exhaustion-%d"`, ident.UpdateID), "read-only")
	if strings.Contains(exh, "Acknowledge…") || strings.Contains(exh, "Requeue…") {
		t.Error("read-only page shows the buttons")
	}
	if code, _ := s.get(t, confirmPath(ident, "acknowledge")); code != http.StatusForbidden {
		t.Errorf("read-only confirm: %d, want 403", code)
	}
	if code, _ := s.post(t, actionPath(ident, "acknowledge"), identityForm(ident, "x")); code != http.StatusForbidden {
		t.Errorf("read-only POST: %d, want 403", code)
	}
	if row, _, _ := st.Get(t.Context(), ident.UpdateID); !row.Unacknowledged() {
		t.Error("read-only mode acknowledged")
	}
}
