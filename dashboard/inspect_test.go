package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
)

var (
	replyRow  = regexp.MustCompile(`<tr class="reply reply-([a-z_]+)">`)
	updateRow = regexp.MustCompile(`data-label="Update"><a href="/updates/(\d+)"`)
	idField   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	nextLink  = regexp.MustCompile(`href="([^"]+)" rel="next"`)
)

// matches returns the first group of every match of re in page.
func matches(re *regexp.Regexp, page string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	return out
}

// journalFixture journals four calls: on update 1 (chat 101, completed)
// one answered, one unknown and one left pending by its attempt (an
// interrupted call); on update 2 (chat 102) one pending under a live
// lease (in flight).
func journalFixture(t *testing.T, st store) {
	t.Helper()
	ctx := t.Context()
	js := st.(intake.JournalStore)
	for _, id := range []int64{1, 2} {
		if _, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: body(id), Chat: intake.ChatKey(body(id)), ReceivedAt: base}); err != nil {
			t.Fatal(err)
		}
	}
	one, ok, err := st.Claim(ctx, 1, intake.ClaimOpts{Now: base.Add(time.Second), LeaseUntil: base.Add(time.Hour), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	record := func(id intake.Identity, method, hash string, at time.Time, res *intake.CallResult) {
		t.Helper()
		call := intake.Call{Method: method, ParamsHash: hash, Occurrence: 1}
		if _, in, err := js.RecordIntent(ctx, id, call, at); err != nil || in != intake.IntentRecorded {
			t.Fatalf("intent %s: %v %v", method, in, err)
		}
		if res != nil {
			if ok, err := js.RecordOutcome(ctx, id, call, *res, at.Add(time.Millisecond)); err != nil || !ok {
				t.Fatalf("outcome %s: %v %v", method, ok, err)
			}
		}
	}
	record(one, "sendMessage", "aa", base.Add(2*time.Second), &intake.CallResult{Outcome: intake.CallAnswered, Status: 200, Body: []byte(`{"ok":true,"result":{}}`)})
	record(one, "sendPhoto", "bb", base.Add(3*time.Second), &intake.CallResult{Outcome: intake.CallUnknown, Body: []byte("connection reset after the request was sent")})
	record(one, "sendMessage", "cc", base.Add(4*time.Second), nil)
	if ok, err := st.Settle(ctx, one, intake.Settlement{State: intake.StateCompleted, At: base.Add(5 * time.Second)}); err != nil || !ok {
		t.Fatal(ok, err)
	}
	now := time.Now()
	two, ok, err := st.Claim(ctx, 2, intake.ClaimOpts{Now: now, LeaseUntil: now.Add(time.Hour), MaxAttempts: 3})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	record(two, "sendMessage", "dd", now, nil)
}

// The Replies page lists the journal across updates, unknown ones (and
// interrupted ones) by default, each explained, and filters and pages.
func TestRepliesPage(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			journalFixture(t, st)
			s := serve(t, dashboard.Config{Store: st})

			_, p := s.get(t, "/replies")
			if got := strings.Join(matches(replyRow, p), ","); got != "pending,unknown,unknown" {
				t.Errorf("default (unknown) filter, newest first: %s, want pending,unknown,unknown", got)
			}
			mustContain(t, "unknown replies", p, "unknown · interrupted", "In flight", "never resent automatically",
				"connection reset after the request was sent", "Look in the chat")
			if strings.Contains(p, `{&#34;ok&#34;:true`) {
				t.Error("the unknown filter lists an answered reply")
			}

			_, p = s.get(t, "/replies?outcome=answered")
			if got := strings.Join(matches(replyRow, p), ","); got != "answered" {
				t.Errorf("answered filter: %s", got)
			}
			_, p = s.get(t, "/replies?outcome=any&method=sendPhoto")
			if got := strings.Join(matches(replyRow, p), ","); got != "unknown" {
				t.Errorf("method filter: %s", got)
			}
			_, p = s.get(t, "/replies?outcome=any&chat=102")
			if got := strings.Join(matches(updateRow, p), ","); got != "2" {
				t.Errorf("chat filter: updates %s, want 2", got)
			}
			since := base.Add(3 * time.Second).UTC().Format("2006-01-02T15:04")
			_, p = s.get(t, "/replies?outcome=any&since="+url.QueryEscape(since)+"&until="+url.QueryEscape(time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04")))
			if n := len(matches(replyRow, p)); n < 1 {
				t.Errorf("time filter lists %d replies", n)
			}

			// Page by one: all four, newest first, each once.
			var seen []string
			path := "/replies?outcome=any&limit=1"
			for range 6 {
				_, p := s.get(t, path)
				seen = append(seen, matches(replyRow, p)...)
				m := nextLink.FindStringSubmatch(p)
				if m == nil {
					break
				}
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
			if got := strings.Join(seen, ","); got != "pending,unknown,unknown,answered" {
				t.Errorf("paged by one: %s, want pending,unknown,unknown,answered", got)
			}

			// The update's page shows the interrupted call as unknown, not
			// pending forever.
			_, p = s.get(t, "/updates/1")
			mustContain(t, "update 1", p, "call-unknown")
			if strings.Contains(p, "call-pending") {
				t.Error("a call interrupted on a completed update shows as pending")
			}
			_, p = s.get(t, "/updates/2")
			mustContain(t, "update 2, in flight", p, "call-pending")

			for _, bad := range []string{"/replies?outcome=bogus", "/replies?since=yesterday", "/replies?before=1:2", "/replies?method=" + strings.Repeat("m", 65)} {
				if code, _ := s.get(t, bad); code != http.StatusBadRequest {
					t.Errorf("GET %s: %d, want 400", bad, code)
				}
			}
		})
	}
}

// The Processes page shows each process's heartbeat and the rows it
// holds, the rows whose process is gone, and the updates that crashed
// their process.
func TestProcessesPage(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			ctx := t.Context()
			ps := st.(intake.ProcessStore)
			now := time.Now()
			if ok, err := ps.Register(ctx, "proc-live", now.Add(time.Hour)); err != nil || !ok {
				t.Fatal(ok, err)
			}
			if ok, err := ps.Register(ctx, "proc-dead", base.Add(10*time.Second)); err != nil || !ok {
				t.Fatal(ok, err)
			}
			for id := int64(1); id <= 3; id++ {
				if _, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: body(id), ReceivedAt: base}); err != nil {
					t.Fatal(err)
				}
			}
			claim := func(id int64, owner string, at, until time.Time) {
				t.Helper()
				if _, ok, err := st.(intake.ProcessStore).ClaimAs(ctx, id, intake.ClaimOpts{Now: at, LeaseUntil: until, MaxAttempts: 5}, intake.ProcessClaim{Process: owner, MaxCrashes: 3}); err != nil || !ok {
					t.Fatalf("claim %d by %s: %v %v", id, owner, ok, err)
				}
			}
			claim(1, "proc-live", now, now.Add(time.Hour))
			claim(2, "proc-dead", base.Add(time.Second), now.Add(time.Hour))
			claim(3, "proc-dead", base.Add(time.Second), now.Add(time.Hour))
			claim(3, "proc-live", now, now.Add(time.Hour)) // a takeover: a crash

			s := serve(t, dashboard.Config{Store: st})
			_, p := s.get(t, "/processes")
			live := p[strings.Index(p, `id="process-proc-live"`):]
			live = live[:strings.Index(live, "</tr>")]
			mustContain(t, "live process", live, "✓ live", `href="/updates/3"`, `href="/updates/1"`)
			dead := p[strings.Index(p, `id="process-proc-dead"`):]
			dead = dead[:strings.Index(dead, "</tr>")]
			mustContain(t, "dead process", dead, "✗ lapsed")
			orphans := p[strings.Index(p, `id="h-orphans"`):strings.Index(p, `id="h-crashes"`)]
			if got := strings.Join(matches(updateRow, orphans), ","); got != "2" {
				t.Errorf("rows without a live process: %s, want 2", got)
			}
			mustContain(t, "orphan", orphans, "heartbeat lapsed")
			crashes := p[strings.Index(p, `id="h-crashes"`):]
			if got := strings.Join(matches(updateRow, crashes), ","); got != "3" {
				t.Errorf("crashed updates: %s, want 3", got)
			}

			// The overview's verdict counts the heartbeats.
			_, o := s.get(t, "/")
			mustContain(t, "overview heartbeat", o, "1 of 2 processes have a lapsed heartbeat")
		})
	}
}

// Updates are listed newest first and searched by update id, chat or
// text; a pending update says which earlier update of its chat holds it.
func TestUpdatesSearch(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			fill(t, st, 30, false)
			s := serve(t, dashboard.Config{Store: st, Secrets: []string{botToken}})

			_, p := s.get(t, "/updates?q="+url.QueryEscape("hello 7"))
			if got := strings.Join(matches(updateRow, p), ","); got != "7" {
				t.Errorf("text search: %s, want 7", got)
			}
			_, p = s.get(t, "/updates?q=7")
			mustContain(t, "id search", p, `id="h-exact"`, `href="/updates/7"`)
			_, p = s.get(t, "/updates?q=102&state=completed")
			if got := strings.Join(matches(updateRow, p), ","); got != "20,5" {
				t.Errorf("chat search, completed: %s, want 20,5", got)
			}
			if code, p := s.get(t, "/updates?q="+url.QueryEscape(botToken)); code != http.StatusBadRequest || strings.Contains(p, botToken) {
				t.Errorf("a search for the bot token: %d, want 400 without the token", code)
			}

			// Update 4 (pending, chat 101) waits for update 1 (failed).
			_, p = s.get(t, "/updates?state=pending&chat=101")
			mustContain(t, "held", p, `held behind update <a href="/updates/1">1</a>`)
			_, p = s.get(t, "/updates/4")
			mustContain(t, "held on the update page", p, `held behind update <a href="/updates/1">1</a>`)
			_, p = s.get(t, "/updates/3")
			if strings.Contains(p, "held behind") {
				t.Error("update 3 (the first of chat 100 that is live) says it is held")
			}
		})
	}
}

// TestUpdatesSearchNeverMatchesInsideASecret: a body search for a piece of
// the bot token's secret half or of the webhook secret, of any length (one
// that starts in the token's public bot id included), finds nothing, as if
// the secret were not in the body, so no piece can be probed; and it is
// not refused either, since a refusal would say the piece is part of a
// secret. The visible text of the same body, the bot id with it, is found.
func TestUpdatesSearchNeverMatchesInsideASecret(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			fill(t, st, 3, false)
			b := fmt.Appendf(nil, `{"update_id":9,"message":{"chat":{"id":42},"text":"my token is %s and the secret %s."}}`, botToken, webhookSecret)
			if _, err := st.Add(t.Context(), intake.Incoming{UpdateID: 9, Body: b, Chat: intake.ChatKey(b), ReceivedAt: base}); err != nil {
				t.Fatal(err)
			}
			s := serve(t, dashboard.Config{Store: st, Secrets: []string{botToken, webhookSecret}})
			half := botToken[strings.IndexByte(botToken, ':')+1:]
			for q, want := range map[string]string{
				"my token is":      "9",
				"123456789:":       "9", // the bot id is public
				"and the secret":   "9",
				half[:3]:           "",
				half[:6]:           "",
				half[:len(half)-1]: "",
				half[10:20]:        "",
				"6789:" + half[:4]: "",
				webhookSecret[:6]:  "",
				webhookSecret[len(webhookSecret)-8:] + ".": "",
				"is " + botToken[:12]:                      "",
			} {
				code, p := s.get(t, "/updates?q="+url.QueryEscape(q))
				if code != http.StatusOK {
					t.Errorf("search %q: %d, want 200", q, code)
					continue
				}
				if got := strings.Join(matches(updateRow, p), ","); got != want {
					t.Errorf("search %q: rows %q, want %q", q, got, want)
				}
				if strings.Contains(p, half) || strings.Contains(p, webhookSecret) {
					t.Errorf("search %q: the page shows a secret", q)
				}
			}
		})
	}
}

// A bulk action names its count and acts on exactly the confirmed set:
// rows added after the confirmation are untouched, rows changed since are
// refused and reported, and the POST needs the CSRF token.
func TestBulkAcknowledge(t *testing.T) {
	t.Parallel()
	for _, kind := range storeKinds {
		t.Run(kind.name, func(t *testing.T) {
			t.Parallel()
			st := kind.open(t)
			ctx := t.Context()
			for id := int64(1); id <= 3; id++ {
				exhaustOne(t, st, id)
			}
			s := serve(t, dashboard.Config{Store: st})
			_, ex := s.get(t, "/exhaustions")
			mustContain(t, "exhaustions", ex, `id="bulk-acknowledge"`, `id="bulk-requeue"`)
			code, p := s.get(t, "/bulk/acknowledge?state=unacknowledged")
			if code != http.StatusOK {
				t.Fatalf("confirm: %d\n%s", code, p)
			}
			mustContain(t, "confirmation", p, "Acknowledge 3 updates?", "exactly these", "Yes, acknowledge these 3")
			keys := matches(idField, p)
			if len(keys) != 3 {
				t.Fatalf("confirmation names %d rows, want 3", len(keys))
			}
			token := csrf(t, p)

			exhaustOne(t, st, 4) // arrives after the confirmation
			if ok, err := st.Requeue(ctx, 2, time.Now()); err != nil || !ok {
				t.Fatal(ok, err) // changes before the POST
			}
			if code, _ := s.post(t, "/bulk/acknowledge", url.Values{"id": keys}); code != http.StatusForbidden {
				t.Errorf("bulk POST without CSRF: %d, want 403", code)
			}
			code, p = s.post(t, "/bulk/acknowledge", url.Values{"id": keys, "csrf": {token}})
			if code != http.StatusOK {
				t.Fatalf("bulk acknowledge: %d\n%s", code, p)
			}
			mustContain(t, "result", p, "Acknowledged 2 updates", `href="/updates/2"`, "has moved on")
			for id, want := range map[int64]string{1: "acked", 2: "pending", 3: "acked", 4: "unacked"} {
				row, _, err := st.Get(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				got := string(row.State)
				switch {
				case row.Unacknowledged():
					got = "unacked"
				case row.State == intake.StateAbandoned:
					got = "acked"
				}
				if got != want {
					t.Errorf("update %d after the bulk acknowledge: %s, want %s", id, got, want)
				}
			}
			// A second POST of the same set changes nothing.
			if code, p := s.post(t, "/bulk/acknowledge", url.Values{"id": keys, "csrf": {token}}); code != http.StatusConflict || !strings.Contains(p, "Nothing changed") {
				t.Errorf("repeated bulk acknowledge: %d", code)
			}
			many := make([]string, dashboard.MaxBulk+1)
			for i := range many {
				many[i] = fmt.Sprintf("%d/1/x", i+10)
			}
			if code, _ := s.post(t, "/bulk/acknowledge", url.Values{"id": many, "csrf": {token}}); code != http.StatusBadRequest {
				t.Errorf("a set over MaxBulk: %d, want 400", code)
			}
			if code, _ := s.post(t, "/bulk/acknowledge", url.Values{"id": {"1/x/y"}, "csrf": {token}}); code != http.StatusBadRequest {
				t.Errorf("a malformed identity: %d, want 400", code)
			}
			if code, _ := s.get(t, "/bulk/acknowledge?state=failed"); code != http.StatusBadRequest {
				t.Errorf("acknowledge failed rows: %d, want 400", code)
			}
		})
	}
}

// Bulk requeue by state and chat takes exactly that chat's rows.
func TestBulkRequeueByChat(t *testing.T) {
	t.Parallel()
	st := storeKinds[1].open(t)
	fill(t, st, 30, false)
	s := serve(t, dashboard.Config{Store: st})
	_, u := s.get(t, "/updates?state=failed&chat=101")
	mustContain(t, "updates", u, `id="bulk-requeue"`)
	_, p := s.get(t, "/bulk/requeue?state=failed&chat=101")
	keys := matches(idField, p)
	var ids []string
	for _, k := range keys {
		ids = append(ids, strings.SplitN(k, "/", 2)[0])
	}
	if got := strings.Join(ids, ","); got != "1,16" {
		t.Fatalf("failed rows of chat 101: %s, want 1,16", got)
	}
	code, p := s.post(t, "/bulk/requeue", url.Values{"id": keys, "csrf": {csrf(t, p)}})
	if code != http.StatusOK {
		t.Fatalf("bulk requeue: %d\n%s", code, p)
	}
	for id, want := range map[int64]intake.State{1: intake.StatePending, 16: intake.StatePending, 6: intake.StateFailed} {
		row, _, _ := st.Get(t.Context(), id)
		if row.State != want {
			t.Errorf("update %d: %s, want %s", id, row.State, want)
		}
	}
	ro := serve(t, dashboard.Config{Store: st, ReadOnly: true})
	if code, _ := ro.get(t, "/bulk/requeue?state=failed"); code != http.StatusForbidden {
		t.Errorf("bulk confirmation in read-only mode: %d, want 403", code)
	}
}

// A filter that selects more than MaxBulk rows confirms the first MaxBulk,
// says so, and the POST of that whole set fits the form's bound.
func TestBulkBounded(t *testing.T) {
	t.Parallel()
	st := storeKinds[0].open(t)
	for id := int64(1); id <= dashboard.MaxBulk+1; id++ {
		exhaustOne(t, st, id)
	}
	s := serve(t, dashboard.Config{Store: st})
	_, p := s.get(t, "/bulk/acknowledge?state=unacknowledged")
	mustContain(t, "confirmation", p, fmt.Sprintf("Acknowledge %d updates?", dashboard.MaxBulk), "these are the oldest 500 found")
	keys := matches(idField, p)
	if len(keys) != dashboard.MaxBulk {
		t.Fatalf("confirmation names %d rows, want %d", len(keys), dashboard.MaxBulk)
	}
	code, p := s.post(t, "/bulk/acknowledge", url.Values{"id": keys, "csrf": {csrf(t, p)}})
	if code != http.StatusOK {
		t.Fatalf("bulk acknowledge of %d: %d", len(keys), code)
	}
	mustContain(t, "result", p, fmt.Sprintf("Acknowledged %d updates", dashboard.MaxBulk))
	stats, err := st.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Unacknowledged != 1 {
		t.Errorf("%d unacknowledged after the bulk acknowledge, want 1 (the one past MaxBulk)", stats.Unacknowledged)
	}
}

// With the store down, the Overview still answers, with the verdict
// saying why, and leaves out the figures it could not read.
func TestOverviewStoreDown(t *testing.T) {
	t.Parallel()
	st := storeKinds[1].open(t)
	s := serve(t, dashboard.Config{Store: st})
	_, p := s.get(t, "/")
	mustContain(t, "healthy overview", p, `id="health"`, "Healthy", "Every check passes")
	if err := st.(interface{ Close() error }).Close(); err != nil {
		t.Fatal(err)
	}
	code, p := s.get(t, "/")
	if code != http.StatusOK {
		t.Fatalf("overview with the store down: %d", code)
	}
	mustContain(t, "store down", p, "Unhealthy", "The store did not answer", "figures are missing")
}

// The rows a bulk action reads to find its set are bounded too.
func TestBulkScanBounded(t *testing.T) {
	t.Parallel()
	st := storeKinds[0].open(t)
	ctx := t.Context()
	n := int64(dashboard.MaxChatScan + 10)
	for id := int64(1); id <= n; id++ {
		b := fmt.Appendf(nil, `{"update_id":%d,"message":{"chat":{"id":%d}}}`, id, map[bool]int{true: 101, false: 100}[id == n])
		if _, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: b, ReceivedAt: base}); err != nil {
			t.Fatal(err)
		}
		ident, ok, err := st.Claim(ctx, id, intake.ClaimOpts{Now: base, LeaseUntil: time.Now().Add(time.Hour), MaxAttempts: 3})
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if ok, err := st.Settle(ctx, ident, intake.Settlement{State: intake.StateFailed, At: base, RetryAt: time.Now().Add(time.Hour), Error: "x"}); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	s := serve(t, dashboard.Config{Store: st})
	_, p := s.get(t, "/bulk/requeue?state=failed&chat=101")
	mustContain(t, "bounded scan", p, fmt.Sprintf("among the first %d rows read", dashboard.MaxChatScan))
	if keys := matches(idField, p); len(keys) != 0 {
		t.Errorf("a scan past its bound found %v", keys)
	}
}

// slowStats is a store whose counts take long to take, as a big table's do.
type slowStats struct {
	store
	took  time.Duration
	calls atomic.Int32
}

func (s *slowStats) Stats(ctx context.Context) (intake.Stats, error) {
	s.calls.Add(1)
	time.Sleep(s.took) // the table's size, not a wait for anything
	return s.store.Stats(ctx)
}

// A count that takes long is reused by the refreshes that follow it, and
// the page says how old the counts it shows are.
func TestOverviewReusesSlowCounts(t *testing.T) {
	t.Parallel()
	st := &slowStats{store: storeKinds[0].open(t), took: 300 * time.Millisecond}
	exhaustOne(t, st.store, 1)
	s := serve(t, dashboard.Config{Store: st, RefreshInterval: dashboard.MinRefreshInterval})
	_, p := s.get(t, "/")
	mustContain(t, "first overview", p, "unacknowledged")
	if strings.Contains(p, "counted ") {
		t.Fatalf("a fresh count is said to be old:\n%s", p)
	}
	time.Sleep(2 * dashboard.MinRefreshInterval) // a refresh or two later
	_, p = s.get(t, "/")
	mustContain(t, "refreshed overview", p, "counted ")
	if n := st.calls.Load(); n != 1 {
		t.Errorf("%d counts for two overviews within ten times a count's cost, want 1", n)
	}
}
