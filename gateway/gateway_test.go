package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/closedport"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

func TestPassThroughAndRefusals(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	r := f.send(t, nil, "hello")
	if r.status != 200 || !r.env.OK || r.header.Get(wire.HeaderOutcome) != "" {
		t.Fatalf("unfenced sendMessage = %d %s (outcome %q); want Telegram's 200", r.status, r.body, r.header.Get(wire.HeaderOutcome))
	}
	if n := f.ledger("hello"); n != 1 {
		t.Fatalf("ledger holds %d messages; want 1", n)
	}
	if e := <-f.events; e.Method != "sendMessage" || e.Outcome != wire.OutcomeAnswered || e.Fenced || e.Tries != 1 {
		t.Errorf("event %+v", e)
	}

	wrong := f.post(t, "/bot123:wrongwrongwrongwrongwrongwrongwrong/sendMessage", nil, map[string]any{"chat_id": f.chat.ID, "text": "x"})
	if wrong.status != 401 || wrong.env.ErrorCode != 401 || strings.Contains(string(wrong.body), f.tg.Token) {
		t.Errorf("wrong token = %d %s; want Telegram's 401", wrong.status, wrong.body)
	}
	for _, m := range []string{"getUpdates", "setWebhook", "deletewebhook"} {
		r := f.post(t, "/bot"+f.tg.Token+"/"+m, nil, map[string]any{})
		if r.status != 409 || r.env.OK || r.header.Get(wire.HeaderOutcome) != "refused" || !strings.Contains(r.env.Description, "tgrelay receives") {
			t.Errorf("%s = %d %s; want a Telegram-shaped 409 refusal", m, r.status, r.body)
		}
	}
	if r := f.post(t, "/nothing", nil, map[string]any{}); r.status != 404 || r.env.ErrorCode != 404 {
		t.Errorf("an unknown path = %d %s; want 404", r.status, r.body)
	}
	if calls := f.tg.Calls(); calls["getUpdates"]+calls["setWebhook"]+calls["deleteWebhook"] != 0 {
		t.Errorf("refused calls reached Telegram: %v", calls)
	}
	if n := f.ledger("x"); n != 0 {
		t.Errorf("a call with a wrong token was sent")
	}
}

func TestStaleAttemptSendsNothing(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	first := f.claim(t, 1)
	f.fail(t, first)
	second := f.reclaim(t, 1)

	for name, r := range map[string]reply{
		"headers": f.send(t, &first, "stale"),
		"root":    f.post(t, attemptRoot("", first)+"/bot"+f.tg.Token+"/sendMessage", nil, map[string]any{"chat_id": f.chat.ID, "text": "stale"}),
		"read":    f.post(t, "/bot"+f.tg.Token+"/getMe", &first, map[string]any{}),
	} {
		if r.status != gateway.StatusStale || r.env.ErrorCode != 409 || r.header.Get(wire.HeaderOutcome) != "stale" {
			t.Errorf("%s: a reclaimed attempt's call = %d %s; want 409 stale", name, r.status, r.body)
		}
	}
	if n := f.ledger("stale"); n != 0 {
		t.Fatalf("the ledger holds %d messages of a stale attempt", n)
	}
	// The live attempt sends; once it ended failed, it is stale too (a
	// completed attempt goes on: see TestCompletedAttemptsTail).
	if r := f.send(t, &second, "live"); r.status != 200 {
		t.Fatalf("the live attempt's call = %d %s", r.status, r.body)
	}
	ok, err := f.store.Settle(t.Context(), second, intake.Settlement{State: intake.StateFailed, At: time.Now(), RetryAt: time.Now().Add(time.Hour)})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if r := f.send(t, &second, "after settle"); r.status != 409 {
		t.Errorf("a settled attempt's call = %d %s; want 409", r.status, r.body)
	}
	if f.ledger("after settle") != 0 || f.ledger("live") != 1 {
		t.Errorf("ledger: %v", f.tg.MessagesTo(f.chat.ID))
	}
	if r := f.post(t, "/a/1/x/abc/bot"+f.tg.Token+"/sendMessage", nil, map[string]any{}); r.status != 400 {
		t.Errorf("a malformed per-attempt root = %d %s; want 400", r.status, r.body)
	}
}

// TestReplayAcrossAttempts: a handler sends, then fails; the retry's
// identical calls are answered from the journal and Telegram gets each
// message once.
func TestReplayAcrossAttempts(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	first := f.claim(t, 7)
	a1 := f.send(t, &first, "reply")
	a2 := f.send(t, &first, "reply") // the same text twice: two messages
	if a1.status != 200 || a2.status != 200 || bytes.Equal(a1.body, a2.body) {
		t.Fatalf("attempt 1: %d %s, %d %s", a1.status, a1.body, a2.status, a2.body)
	}
	f.fail(t, first)
	second := f.reclaim(t, 7)
	for i, want := range []reply{a1, a2} {
		r := f.send(t, &second, "reply")
		if r.status != 200 || !bytes.Equal(r.body, want.body) || r.header.Get(gateway.HeaderReplayed) != "true" {
			t.Errorf("attempt 2 call %d = %d %s (replayed %q); want attempt 1's answer %s replayed", i+1, r.status, r.body, r.header.Get(gateway.HeaderReplayed), want.body)
		}
	}
	if n := f.ledger("reply"); n != 2 {
		t.Fatalf("ledger holds %d messages; want the 2 of attempt 1", n)
	}
	// A third identical call is new: it is sent.
	if r := f.send(t, &second, "reply"); r.status != 200 || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Errorf("a third identical call = %d, replayed %q; want sent", r.status, r.header.Get(gateway.HeaderReplayed))
	}
	// Form encoding of the same parameters is the same call.
	third := func() intake.Identity { f.fail(t, second); return f.reclaim(t, 7) }()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+"/bot"+f.tg.Token+"/sendMessage",
		strings.NewReader("text=reply&chat_id="+itoa(f.chat.ID)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(wire.HeaderUpdateID, "7")
	req.Header.Set(wire.HeaderAttempt, itoa(int64(third.Attempt)))
	req.Header.Set(wire.HeaderClaimID, third.ClaimID)
	if r := do(t, req); r.header.Get(gateway.HeaderReplayed) != "true" || !bytes.Equal(r.body, a1.body) {
		t.Errorf("the form-encoded identical call = %d %s; want the replayed JSON call's answer", r.status, r.body)
	}
	if n := f.ledger("reply"); n != 3 {
		t.Errorf("ledger holds %d messages; want 3", n)
	}
	es, err := f.store.Journal(t.Context(), 7)
	if err != nil || len(es) != 3 {
		t.Errorf("Journal(7) = %d entries, %v; want 3", len(es), err)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestTelegram5xxIsNotReplayed: Telegram's own 5xx (in its JSON envelope)
// says it did not act, as botapi.Classify reads it (retryable). The app
// gets it as it came, and a later attempt's identical call is sent, not
// answered the 5xx from the journal, so the message still goes out.
func TestTelegram5xxIsNotReplayed(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	if err := f.tg.Arm(telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultServerError}); err != nil {
		t.Fatal(err)
	}
	first := f.claim(t, 8)
	if r := f.send(t, &first, "after 500"); r.status != http.StatusInternalServerError || r.env.ErrorCode != 500 || r.header.Get(wire.HeaderOutcome) != "" {
		t.Fatalf("attempt 1 = %d %s (outcome %q); want Telegram's 500 as it came", r.status, r.body, r.header.Get(wire.HeaderOutcome))
	}
	f.fail(t, first)
	second := f.reclaim(t, 8)
	if r := f.send(t, &second, "after 500"); r.status != http.StatusOK || r.header.Get(gateway.HeaderReplayed) != "" {
		t.Errorf("attempt 2 = %d %s (replayed %q); want it sent and Telegram's 200", r.status, r.body, r.header.Get(gateway.HeaderReplayed))
	}
	if n := f.ledger("after 500"); n != 1 {
		t.Errorf("ledger holds %d messages; want 1", n)
	}
}

// TestTransportFaults: each fault of the connection to Telegram surfaces as
// the right outcome, and a later attempt never resends an unknown call.
func TestTransportFaults(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fault      telegramtest.Fault
		status     int
		outcome    string
		ledger     int
		replayable bool // a later attempt's identical call is answered from the journal, else sent
	}{
		// Telegram's own 5xx: it did not act, so a later attempt sends.
		{"answered_500", telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultServerError}, 500, "", 0, false},
		{"proxy_page", telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultProxyError}, gateway.StatusUnknown, "unknown", 0, true},
		{"reset", telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultReset}, gateway.StatusUnknown, "unknown", 0, true},
		{"drop_after_effect", telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultDropAfterEffect}, gateway.StatusUnknown, "unknown", 1, true},
		{"hang", telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultHang}, gateway.StatusUnknown, "unknown", 0, true},
		{"huge_body", telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultHugeBody}, gateway.StatusUnknown, "unknown", 1, true},
		{"telegram_429", telegramtest.Fault{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 1}, 200, "", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, fixtureOpts{transport: transport.Config{ResponseTimeout: 500 * time.Millisecond}})
			if err := f.tg.Arm(tc.fault); err != nil {
				t.Fatal(err)
			}
			id := f.claim(t, 1)
			r := f.send(t, &id, "m")
			if r.status != tc.status || r.header.Get(wire.HeaderOutcome) != tc.outcome {
				t.Fatalf("status %d outcome %q body %s; want %d %q", r.status, r.header.Get(wire.HeaderOutcome), r.body, tc.status, tc.outcome)
			}
			if tc.outcome == "unknown" && (r.env.OK || r.env.ErrorCode != gateway.StatusUnknown || r.env.Description == "") {
				t.Errorf("the unknown answer is not Telegram-shaped: %s", r.body)
			}
			if strings.Contains(string(r.body), f.tg.Token) {
				t.Errorf("the answer holds the token: %s", r.body)
			}
			f.fail(t, id)
			again := f.reclaim(t, 1)
			r2 := f.send(t, &again, "m")
			ledger := tc.ledger
			switch {
			case !tc.replayable:
				ledger++
				if r2.header.Get(gateway.HeaderReplayed) != "" || r2.status != http.StatusOK {
					t.Errorf("attempt 2 = %d replayed %q %s; want it sent and Telegram's 200", r2.status, r2.header.Get(gateway.HeaderReplayed), r2.body)
				}
			case r2.header.Get(gateway.HeaderReplayed) != "true" || r2.status != r.status:
				t.Errorf("attempt 2 = %d replayed %q %s; want the recorded %d replayed", r2.status, r2.header.Get(gateway.HeaderReplayed), r2.body, r.status)
			}
			if n := f.ledger("m"); n != ledger {
				t.Errorf("ledger holds %d; want %d", n, ledger)
			}
		})
	}
}

// TestNotDispatched: with Telegram unreachable, the call is tried
// MaxSendTries times, answered 503 not-dispatched, and a later attempt sends
// it.
func TestNotDispatched(t *testing.T) {
	root := "http://" + closedport.Addr(t) // refuses every connection
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.APIRoot = root; c.MaxSendTries = 2 }})
	id := f.claim(t, 3)
	r := f.send(t, &id, "later")
	if r.status != gateway.StatusNotDispatched || r.header.Get(wire.HeaderOutcome) != "not-dispatched" || !strings.Contains(r.env.Description, "never left") {
		t.Fatalf("unreachable Telegram = %d %s", r.status, r.body)
	}
	if e := <-f.events; e.Tries != 2 || e.Outcome != wire.OutcomeNotDispatched {
		t.Errorf("event %+v; want 2 tries, not dispatched", e)
	}
	es, _ := f.store.Journal(t.Context(), 3)
	if len(es) != 1 || es[0].Outcome != intake.CallNotDispatched {
		t.Fatalf("journal %+v; want one not-dispatched entry", es)
	}
	// The app repeats the call in the same attempt: still occurrence 1.
	f.send(t, &id, "later")
	if es, _ := f.store.Journal(t.Context(), 3); len(es) != 1 || es[0].Occurrence != 1 {
		t.Fatalf("journal after a repeat %+v; want occurrence 1 reused", es)
	}
}

// TestNoStoreRefusesIdentity: without a store a call with an identity is
// refused, not sent unfenced.
func TestNoStoreRefusesIdentity(t *testing.T) {
	f := newFixture(t, fixtureOpts{cfg: func(c *gateway.Config) { c.Store = nil }})
	id := intake.Identity{UpdateID: 1, Attempt: 1, ClaimID: "c"}
	if r := f.send(t, &id, "x"); r.status != 400 || f.ledger("x") != 0 {
		t.Errorf("a fenced call without a store = %d %s", r.status, r.body)
	}
}

func TestConfigValidation(t *testing.T) {
	ok := gateway.Config{Token: "1:x", Transport: http.DefaultTransport}
	for field, mut := range map[string]func(*gateway.Config){
		"Token":            func(c *gateway.Config) { c.Token = "" },
		"APIRoot":          func(c *gateway.Config) { c.APIRoot = "ftp://x" },
		"Transport":        func(c *gateway.Config) { c.Transport = nil },
		"MaxBufferedBody":  func(c *gateway.Config) { c.MaxBufferedBody = -1 },
		"MaxBufferedTotal": func(c *gateway.Config) { c.MaxBufferedBody, c.MaxBufferedTotal = 2<<20, 1<<20 },
		"MaxSendTries":     func(c *gateway.Config) { c.MaxSendTries = 11 },
		"MaxAttempts":      func(c *gateway.Config) { c.MaxAttempts = -1 },
		"ResponseTimeout":  func(c *gateway.Config) { c.ResponseTimeout = 11 * time.Minute },
	} {
		c := ok
		mut(&c)
		_, err := gateway.New(c)
		if ce, ok := errors.AsType[*gateway.ConfigError](err); !ok || ce.Field != field || !errors.Is(err, gateway.ErrInvalidConfig) {
			t.Errorf("%s: New = %v; want a *ConfigError naming it, matching ErrInvalidConfig", field, err)
		}
		if verr := c.Validate(); verr == nil || verr.Error() != err.Error() {
			t.Errorf("%s: Validate = %v, want New's %v", field, verr, err)
		}
	}
	if _, err := gateway.New(ok); err != nil {
		t.Errorf("New(valid) = %v", err)
	}
}

// A buffered answer, Telegram's or the gateway's own, is sent with its
// length in one piece, not chunked.
func TestAnswersAreSized(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	for _, c := range []struct {
		name, path string
		want       int
	}{
		{"Telegram's answer", "/bot" + f.tg.Token + "/sendMessage", http.StatusOK},
		{"a refusal", "/bot" + f.tg.Token + "/getUpdates", http.StatusConflict},
	} {
		body, _ := json.Marshal(map[string]any{"chat_id": f.chat.ID, "text": "sized"})
		resp, err := http.Post(f.srv.URL+c.path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != c.want {
			t.Errorf("%s: status %d %s, want %d", c.name, resp.StatusCode, b, c.want)
		}
		if resp.ContentLength != int64(len(b)) || len(resp.TransferEncoding) != 0 {
			t.Errorf("%s: Content-Length %d, Transfer-Encoding %v for a %d-byte body; want its length, not chunked",
				c.name, resp.ContentLength, resp.TransferEncoding, len(b))
		}
	}
}

// TestFilePathStaysAFile sends file downloads whose paths, once decoded,
// hold dot segments or the characters "?" and "#": the gateway must
// refuse the first (a server that resolves dot segments would read another
// URL, such as a Bot API method, sent unjournaled) and keep the others
// part of the path it sends on.
func TestFilePathStaysAFile(t *testing.T) {
	t.Parallel()
	const token = "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	upstream := make(chan string, 10)
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upstream <- r.RequestURI
		io.WriteString(w, "file content")
	}))
	t.Cleanup(tg.Close)
	base, err := transport.New(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{Token: token, APIRoot: tg.URL, Transport: base, StreamTransport: gateway.NewStreamTransport()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	get := func(t *testing.T, path string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.URL.Opaque = path // sent as written: no dot segment resolved
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	file := "/file/bot" + token + "/"
	for _, path := range []string{
		file + "..%2F..%2Fbot" + token + "%2FsendMessage%3Fchat_id%3D1%26text%3Dhi",
		file + "../../bot" + token + "/sendMessage",
		file + "photos/%2E%2E/%2E%2E/bot" + token + "/getMe",
		file + "./photos/a.jpg",
	} {
		if status := get(t, path); status != http.StatusNotFound {
			t.Errorf("GET %s = %d; want 404", path, status)
		}
	}
	for path, want := range map[string]string{
		file + "photos/a%3Fb.jpg": file + "photos/a%3Fb.jpg",
		file + "photos/a%23b.jpg": file + "photos/a%23b.jpg",
		file + "photos/a.jpg?x=1": file + "photos/a.jpg?x=1",
	} {
		if status := get(t, path); status != http.StatusOK {
			t.Errorf("GET %s = %d; want 200", path, status)
			continue
		}
		if got := <-upstream; got != want {
			t.Errorf("GET %s went to Telegram as %s; want %s", path, got, want)
		}
	}
	select {
	case got := <-upstream:
		t.Errorf("a refused download reached Telegram as %s", got)
	default:
	}
}

// TestQueryThatDoesNotParseKeepsCallsApart: two calls whose URL queries
// differ only in pairs url.ParseQuery drops (a ";", a bad escape) are
// different calls, so a later attempt's call is not answered from the
// journal entry of the earlier attempt's other call.
func TestQueryThatDoesNotParseKeepsCallsApart(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	get := func(t *testing.T, id intake.Identity, query string) reply {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.srv.URL+"/bot"+f.tg.Token+"/sendMessage?"+query, nil)
		if err != nil {
			t.Fatal(err)
		}
		wire.SetIdentity(req.Header, id.UpdateID, id.Attempt, id.ClaimID)
		return do(t, req)
	}
	for i, q := range [][2]string{
		{"text=one;two", "text=three;four"},
		{"text=%zz1", "text=%zz2"},
	} {
		first := f.claim(t, int64(9+i))
		get(t, first, "chat_id="+itoa(f.chat.ID)+"&"+q[0])
		f.fail(t, first)
		second := f.reclaim(t, int64(9+i))
		if r := get(t, second, "chat_id="+itoa(f.chat.ID)+"&"+q[1]); r.header.Get(gateway.HeaderReplayed) != "" {
			t.Errorf("?%s after ?%s = %d %s, replayed; want it sent as the other call it is", q[1], q[0], r.status, r.body)
		}
	}
}
