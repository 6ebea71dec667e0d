package dashboard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/broadcast"
	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/intake/storetest"
)

// store is what the dashboard tests need of a store: both capabilities.
type store interface {
	intake.Store
	intake.AdminStore
}

// storeKinds are the stores every page test runs against.
var storeKinds = []struct {
	name string
	open func(t *testing.T) store
}{
	{"memory", func(*testing.T) store { return memstore.New() }},
	{"sqlite", func(t *testing.T) store {
		t.Helper()
		st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "updates.db"), sqlitestore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}},
}

// base is the fixtures' clock: every row is written relative to it.
var base = time.Now().Add(-30 * time.Minute).Truncate(time.Millisecond)

// chatOf is the chat of fixture update i.
func chatOf(i int64) int64 { return 100 + i%3 }

func body(i int64) []byte {
	return fmt.Appendf(nil, `{"update_id":%d,"message":{"message_id":%d,"chat":{"id":%d,"type":"private"},"text":"hello %d"}}`, i, i, chatOf(i), i)
}

// fill records n updates with ids 1..n: every fifth completed, every fifth
// failed, every fifth processing, the rest pending. With exhaust, update
// n+1 is an unacknowledged exhaustion, whose identity it returns.
func fill(t *testing.T, st store, n int, exhaust bool) intake.Identity {
	t.Helper()
	ctx := t.Context()
	var batch []intake.Incoming
	for i := int64(1); i <= int64(n); i++ {
		batch = append(batch, intake.Incoming{UpdateID: i, Body: body(i), Chat: intake.ChatKey(body(i)), ReceivedAt: base.Add(time.Duration(i) * time.Millisecond)})
	}
	if bs, ok := st.(intake.Store); ok && len(batch) > 0 {
		for start := 0; start < len(batch); start += 500 {
			if _, err := addBatch(ctx, bs, batch[start:min(start+500, len(batch))]); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		for _, in := range batch {
			if _, err := st.Add(ctx, in); err != nil {
				t.Fatal(err)
			}
		}
	}
	opts := intake.ClaimOpts{Now: base.Add(time.Second), LeaseUntil: base.Add(time.Hour), MaxAttempts: 5}
	for i := int64(1); i <= int64(n); i++ {
		var s *intake.Settlement
		switch i % 5 {
		case 0:
			s = &intake.Settlement{State: intake.StateCompleted, At: base.Add(2 * time.Second)}
		case 1:
			s = &intake.Settlement{State: intake.StateFailed, At: base.Add(2 * time.Second), RetryAt: base.Add(2 * time.Hour), Error: "forward: app answered 500"}
		case 2:
		default:
			continue
		}
		id, ok, err := st.Claim(ctx, i, opts)
		if err != nil || !ok {
			t.Fatalf("claim %d: %v %v", i, ok, err)
		}
		if s != nil {
			if ok, err := st.Settle(ctx, id, *s); err != nil || !ok {
				t.Fatalf("settle %d: %v %v", i, ok, err)
			}
		}
	}
	if !exhaust {
		return intake.Identity{}
	}
	return exhaustOne(t, st, int64(n)+1)
}

// exhaustOne records update id and exhausts its first attempt.
func exhaustOne(t *testing.T, st store, id int64) intake.Identity {
	t.Helper()
	ctx := t.Context()
	if _, err := st.Add(ctx, intake.Incoming{UpdateID: id, Body: body(id), Chat: intake.ChatKey(body(id)), ReceivedAt: base}); err != nil {
		t.Fatal(err)
	}
	ident, ok, err := st.Claim(ctx, id, intake.ClaimOpts{Now: base.Add(time.Second), LeaseUntil: base.Add(time.Hour), MaxAttempts: 5})
	if err != nil || !ok {
		t.Fatalf("claim %d: %v %v", id, ok, err)
	}
	if ok, err := st.Exhaust(ctx, ident, base.Add(3*time.Second), "forward: app answered 400 Bad Request"); err != nil || !ok {
		t.Fatalf("exhaust %d: %v %v", id, ok, err)
	}
	return ident
}

// server is a dashboard on a real loopback listener with a cookie-keeping
// client.
type server struct {
	*httptest.Server
	h      *dashboard.Handler
	client *http.Client
}

func serve(t *testing.T, cfg dashboard.Config) *server {
	t.Helper()
	h, err := dashboard.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Cleanup(h.Close)
	jar, _ := cookiejar.New(nil)
	c := srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Timeout = 30 * time.Second
	return &server{Server: srv, h: h, client: c}
}

// get fetches path and returns the status and body.
func (s *server) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := s.client.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// post submits form to path.
func (s *server) post(t *testing.T, path string, form url.Values) (int, string) {
	t.Helper()
	resp, err := s.client.PostForm(s.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token of a page's form.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no csrf field in the page:\n%s", page)
	}
	return m[1]
}

// identityForm is the form of an action on ident.
func identityForm(ident intake.Identity, token string) url.Values {
	v := url.Values{"attempt": {fmt.Sprint(ident.Attempt)}, "claim_id": {ident.ClaimID}}
	if token != "" {
		v.Set("csrf", token)
	}
	return v
}

func actionPath(ident intake.Identity, action string) string {
	return fmt.Sprintf("/updates/%d/%s", ident.UpdateID, action)
}

func confirmPath(ident intake.Identity, action string) string {
	return actionPath(ident, action) + "?" + identityForm(ident, "").Encode()
}

// broadcastDir writes a broadcast "promo" of seven recipients: four
// delivered, one failed, one unreachable, and the last one uncertain,
// which halts it.
func broadcastDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var (
		errUncertain   = errors.New("connection lost")
		errFailed      = errors.New("bad request")
		errUnreachable = errors.New("blocked")
	)
	_, err := broadcast.Run(context.Background(), broadcast.Config{
		Name: "promo",
		Dir:  dir,
		AudienceFunc: func(context.Context) ([]broadcast.Recipient, error) {
			var rs []broadcast.Recipient
			for i := int64(1); i <= 7; i++ {
				rs = append(rs, broadcast.ChatID(i))
			}
			return rs, nil
		},
		SendFunc: func(_ context.Context, r broadcast.Recipient) error {
			switch r.ID {
			case 4:
				return errFailed
			case 5:
				return errUnreachable
			case 7:
				return errUncertain
			}
			return nil
		},
		ClassifyFunc: func(err error) broadcast.Verdict {
			switch err {
			case errUncertain:
				return broadcast.Ambiguous("connection-lost")
			case errFailed:
				return broadcast.Failed("bad-request")
			}
			return broadcast.Unreachable("blocked-by-user")
		},
		Rate:        1000,
		Concurrency: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// mustContain fails unless page contains every want.
func mustContain(t *testing.T, what, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("%s: missing %q", what, w)
		}
	}
}

// addBatch records us unclaimed; see [storetest.Add].
var addBatch = storetest.Add
