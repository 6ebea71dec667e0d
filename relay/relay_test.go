package relay_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
)

func TestRelayWebhook(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	hook := listen(t)
	cfg.Poll, cfg.PollTimeout = false, 0
	cfg.Listener, cfg.Secret, cfg.TakeoverFrom = hook, testSecret, hookowner.HostNone
	cfg.PublicURL = "http://" + hook.Addr().String() + "/telegram"
	cfg.AdminListen = "127.0.0.1:0"
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.HandleAdmin("GET /extra", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("mounted")) }))
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })

	info, err := botClient(t, srv).Call(t.Context(), "getWebhookInfo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), hook.Addr().String()) || !strings.Contains(string(info), "owner=") {
		t.Errorf("webhook after start = %s, want our address with an owner tag", info)
	}
	st := r.Status()
	if !st.Ready || st.Webhook.Mode != hookowner.ModeWebhook || st.Store != "sqlite" || !st.Webhook.Owned ||
		st.WebhookURL != cfg.PublicURL || st.AdminURL == "" {
		t.Errorf("Status() = %+v, want ready, webhook, sqlite, claimed and owned, with both URLs", st)
	}

	ups := sendChatter(t, srv, 3, 9)
	testkit.WaitFor(t, "every update forwarded", func() bool { return ep.distinct() == len(ups) })
	for _, u := range ups {
		if hs := ep.hitsOf(u.ID); hs[0].attempt != 1 {
			t.Errorf("update %d first forward has attempt %d, want 1", u.ID, hs[0].attempt)
		}
	}
	testkit.WaitFor(t, "every update completed in the store", func() bool {
		s, err := r.Stats(t.Context())
		return err == nil && s.Count[intake.StateCompleted] == len(ups)
	})
	if got := rec.count(string(relay.KindAccepted)); got != len(ups) {
		t.Errorf("accepted events = %d, want %d", got, len(ups))
	}
	if got := len(rec.all(relay.KindForwarded)); got < len(ups) {
		t.Errorf("forwarded events = %d, want >= %d", got, len(ups))
	}

	// Refusals are answered and reported by reason.
	post := func(secret, body string) int {
		req, _ := http.NewRequest(http.MethodPost, r.WebhookURL(), strings.NewReader(body))
		if secret != "" {
			req.Header.Set(intake.SecretHeader, secret)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("wrong-secret", `{"update_id": 1}`); code != http.StatusForbidden {
		t.Errorf("wrong secret answered %d, want 403", code)
	}
	if code := post(testSecret, `{"no_update_id": true}`); code != http.StatusBadRequest {
		t.Errorf("invalid body answered %d, want 400", code)
	}
	if code := post(testSecret, `{"update_id": 1, "x": "`+strings.Repeat("a", intake.DefaultMaxBodyBytes)+`"}`); code != http.StatusRequestEntityTooLarge {
		t.Errorf("huge body answered %d, want 413", code)
	}
	if code := post(testSecret, string(ups[0].JSON)); code != http.StatusOK {
		t.Errorf("re-delivery answered %d, want 200", code)
	}
	for _, reason := range []string{relay.RejectUnauthorized, relay.RejectInvalid, relay.RejectTooLarge} {
		if got := rec.count(string(relay.KindRejected) + "/" + reason); got != 1 {
			t.Errorf("rejected/%s events = %d, want 1", reason, got)
		}
	}
	if got := rec.count(string(relay.KindDuplicate)); got != 1 {
		t.Errorf("duplicate events = %d, want 1", got)
	}

	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n", "/extra": "mounted"} {
		if code, body := get(t, r.AdminURL()+path); code != 200 || body != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, code, body, want)
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if r.Status().Ready {
		t.Error("Status().Ready after Stop")
	}
	if err := r.Start(t.Context()); !errors.Is(err, relay.ErrStarted) {
		t.Errorf("Start after Stop = %v, want ErrStarted", err)
	}
	assertNoSecrets(t, "the relay's log", logs.String(), srv.Token)
}

func TestRelayPollingKeepsExhaustions(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	var poison atomic.Int64
	poison.Store(-1)
	ep := newBotEndpoint(t, func(id int64, _ int) (int, string) {
		if id == poison.Load() {
			return http.StatusUnprocessableEntity, ""
		}
		return http.StatusOK, ""
	})
	ups := sendChatter(t, srv, 2, 4)
	poison.Store(ups[1].ID)
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	r := start(t, cfg)
	if st := r.Status(); st.Webhook.Mode != hookowner.ModePolling || st.WebhookURL != "" || !st.Webhook.CheckedAt.IsZero() {
		t.Errorf("Status() = %+v, want poll mode without a webhook", st)
	}
	testkit.WaitFor(t, "every update forwarded", func() bool { return ep.distinct() == len(ups) })
	testkit.WaitFor(t, "the poison update kept as an unacknowledged exhaustion, the rest completed", func() bool {
		s, err := r.Stats(t.Context())
		return err == nil && s.Unacknowledged == 1 && s.Count[intake.StateCompleted] == len(ups)-1
	})
	if got := len(ep.hitsOf(ups[1].ID)); got != 1 {
		t.Errorf("a 4xx update was forwarded %d times, want 1 (no retry)", got)
	}
	if got := rec.count(string(relay.KindExhausted)); got != 1 {
		t.Errorf("exhausted events = %d, want 1", got)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if n := srv.PendingUpdates(); n != 0 {
		t.Errorf("Telegram still holds %d updates after a clean stop, want 0 (offset confirmed)", n)
	}
	row, ok, err := cfg.Store.(intake.AdminStore).Get(t.Context(), ups[1].ID)
	if err != nil || !ok || !row.Unacknowledged() {
		t.Errorf("poison row = %+v, %v, %v; want an unacknowledged exhaustion", row, ok, err)
	}
	assertNoSecrets(t, "the relay's log", logs.String(), srv.Token)
}

func TestRelayForwardStatuses(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	var busy, flaky, refused atomic.Int64
	ep := newBotEndpoint(t, func(id int64, n int) (int, string) {
		switch {
		case id == busy.Load() && n == 1:
			return http.StatusServiceUnavailable, "1"
		case id == flaky.Load() && n == 1:
			return http.StatusInternalServerError, ""
		case id == refused.Load():
			return http.StatusBadRequest, ""
		}
		return http.StatusOK, ""
	})
	ups := sendChatter(t, srv, 3, 3)
	busy.Store(ups[0].ID)
	flaky.Store(ups[1].ID)
	refused.Store(ups[2].ID)
	rec := newRecorder()
	cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, rec)
	cfg.Forward.ExhaustionURL = ep.exhaustionURL()
	r := start(t, cfg)

	testkit.WaitFor(t, "the 4xx update delivered as an exhaustion", func() bool { return len(ep.exhaustionPayloads()) >= 1 })
	p := ep.exhaustionPayloads()[0]
	if p.UpdateID != ups[2].ID || p.Attempt != 1 || p.ClaimID == "" || !strings.Contains(p.Error, "400") {
		t.Errorf("exhaustion payload = %+v, want update %d attempt 1 with the 400", p, ups[2].ID)
	}
	if !bytes.Equal(p.Update, ups[2].JSON) {
		t.Errorf("exhaustion carries %s, want the raw update %s", p.Update, ups[2].JSON)
	}
	testkit.WaitFor(t, "the exhaustion acknowledged", func() bool {
		s, err := r.Stats(t.Context())
		return rec.count(string(relay.KindAcknowledged)) == 1 && err == nil && s.Unacknowledged == 0
	})
	testkit.WaitFor(t, "503 and 500 retried to success", func() bool {
		return len(ep.hitsOf(ups[0].ID)) == 2 && len(ep.hitsOf(ups[1].ID)) == 2
	})
	for _, id := range []int64{ups[0].ID, ups[1].ID} {
		hs := ep.hitsOf(id)
		if hs[0].attempt != 1 || hs[1].attempt != 2 || hs[0].claimID == hs[1].claimID {
			t.Errorf("update %d attempts %+v, want 1 then 2 with new claim ids", id, hs)
		}
	}
	var retried, given int
	for _, e := range rec.all(relay.KindFailed) {
		if e.Retrying {
			retried++
		} else {
			given++
		}
		var se *forward.StatusError
		if !errors.As(e.Err, &se) {
			t.Errorf("failed event carries %v, want a *forward.StatusError", e.Err)
		}
	}
	if retried != 2 || given != 1 {
		t.Errorf("failed events: %d retrying, %d given up; want 2 and 1", retried, given)
	}
}

func TestRelayWebhookOwnership(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	bot := botClient(t, srv)
	ep := newBotEndpoint(t, nil)
	if _, err := bot.Call(t.Context(), "setWebhook", map[string]any{"url": "http://other.example:8443/secret-path"}); err != nil {
		t.Fatal(err)
	}
	webhookConfig := func(logs *testkit.SyncBuffer, rec *recorder) relay.Config {
		cfg := baseConfig(t, srv, ep, logs, rec)
		hook := listen(t)
		cfg.Poll, cfg.PollTimeout = false, 0
		cfg.Listener, cfg.Secret = hook, testSecret
		cfg.PublicURL = "http://" + hook.Addr().String() + "/telegram"
		return cfg
	}

	// Refused: the webhook is another deployment's.
	logs := &testkit.SyncBuffer{}
	r, err := relay.New(webhookConfig(logs, newRecorder()))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Start(t.Context())
	var ce *hookowner.ClaimError
	if !errors.As(err, &ce) || ce.Reason != hookowner.ReasonOwnedElsewhere || ce.OwnerHost != "other.example:8443" {
		t.Fatalf("Start = %v, want a ClaimError owned-elsewhere by other.example:8443", err)
	}
	if strings.Contains(err.Error(), "secret-path") {
		t.Errorf("refusal names the other owner's path: %v", err)
	}
	if info, _ := bot.Call(t.Context(), "getWebhookInfo", nil); !strings.Contains(string(info), "other.example") {
		t.Errorf("webhook changed by a refused start: %s", info)
	}

	// Takeover naming the host, then a periodic check sees it move away.
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := webhookConfig(logs, rec)
	cfg.TakeoverFrom, cfg.WebhookCheckInterval = "other.example:8443", time.Second
	r = start(t, cfg)
	if ls := logLines(logs, "relay: webhook set"); len(ls) != 1 || ls[0]["taken_from"] != "other.example:8443" {
		t.Errorf("takeover not logged: %v", ls)
	}
	ups := sendChatter(t, srv, 1, 1)
	testkit.WaitFor(t, "an update through the taken webhook", func() bool { return len(ep.hitsOf(ups[0].ID)) == 1 })
	if _, err := bot.Call(t.Context(), "setWebhook", map[string]any{"url": "http://intruder.example/hook"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, "the move seen", func() bool {
		w := r.Status().Webhook
		return !w.Owned && w.OwnerHost == "intruder.example"
	})
	// The status changes before the warning is written: wait for the line.
	const moved = "relay: the webhook moved away from this relay; updates now go elsewhere"
	testkit.WaitFor(t, "the move warned", func() bool { return len(logLines(logs, moved)) > 0 })
	ls := logLines(logs, moved)
	if len(ls) != 1 || ls[0]["owner_host"] != "intruder.example" {
		t.Errorf("the move warned %v, want once naming intruder.example", ls)
	}
	checked := rec.all(relay.KindWebhookChecked)
	if last := checked[len(checked)-1]; last.Owned || last.Host != "intruder.example" {
		t.Errorf("last check event = %+v, want not owned, intruder.example", last)
	}
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
	assertNoSecrets(t, "the relay's log", logs.String(), srv.Token)
}

func TestRelayGracefulDrain(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	entered := make(chan int64, 16)
	release := make(chan struct{})
	var releaseOnce sync.Once
	ep := newBotEndpoint(t, func(id int64, _ int) (int, string) {
		entered <- id
		<-release
		return http.StatusOK, ""
	})
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	logs := &testkit.SyncBuffer{}
	cfg := baseConfig(t, srv, ep, logs, newRecorder())
	cfg.DrainTimeout = 30 * time.Second
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	ups := sendChatter(t, srv, 1, 1)
	select {
	case <-entered:
	case <-time.After(testkit.WaitLimit):
		t.Fatal("the forward never reached the endpoint")
	}
	// Cancelled while the forward runs: the relay stops receiving and waits.
	cancel()
	testkit.WaitFor(t, "the relay to start draining", func() bool {
		return len(logLines(logs, "relay: stopping: no new updates; draining")) == 1
	})
	select {
	case err := <-done:
		t.Fatalf("Run returned (%v) with a forward still running inside the drain timeout", err)
	default:
	}
	releaseOnce.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil after its context ended", err)
	}
	row, ok, err := cfg.Store.(intake.AdminStore).Get(t.Context(), ups[0].ID)
	if err != nil || !ok || row.State != intake.StateCompleted || row.Attempts != 1 {
		t.Errorf("drained update = %+v (%v, %v), want completed on its only attempt", row, ok, err)
	}
}

func TestRelayDrainDeadlineCancels(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	entered := make(chan int64, 16)
	release := make(chan struct{})
	ep := newBotEndpoint(t, func(id int64, _ int) (int, string) {
		entered <- id
		<-release // an endpoint that never finishes while the relay drains
		return http.StatusOK, ""
	})
	t.Cleanup(func() { close(release) })
	logs := &testkit.SyncBuffer{}
	cfg := baseConfig(t, srv, ep, logs, newRecorder())
	cfg.DrainTimeout = 200 * time.Millisecond
	r := start(t, cfg)
	ups := sendChatter(t, srv, 1, 1)
	select {
	case <-entered:
	case <-time.After(testkit.WaitLimit):
		t.Fatal("the forward never reached the endpoint")
	}
	// Close, as intake.Runner's, says the drain was cut short.
	if err := r.Close(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the drain deadline's error", err)
	}
	if err := r.Close(context.Background()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a second Close = %v, want the first one's result", err)
	}
	if len(logLines(logs, "relay: drain deadline passed; running forwards were cancelled and will be retried")) != 1 {
		t.Errorf("the cancelled drain was not logged:\n%s", logs)
	}
	row, ok, err := cfg.Store.(intake.AdminStore).Get(t.Context(), ups[0].ID)
	if err != nil || !ok || row.State == intake.StateCompleted {
		t.Errorf("cancelled update = %+v (%v, %v), want it left to be retried, not completed", row, ok, err)
	}
}

func TestRelayListenFailureNamesField(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	busy := listen(t)
	cfg := baseConfig(t, srv, newBotEndpoint(t, nil), &testkit.SyncBuffer{}, newRecorder())
	cfg.AdminListen = busy.Addr().String()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var ce *relay.ConfigError
	if err := r.Start(t.Context()); !errors.As(err, &ce) || ce.Field != "AdminListen" {
		t.Errorf("Start on a busy address = %v, want a ConfigError for AdminListen", err)
	}
}

func TestRelayTwoRelaysSharePostgres(t *testing.T) {
	t.Parallel()
	dbURL := pgtest.URL(t)
	pool, err := pgxpool.New(t.Context(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	newStore := func() *pgstore.Store {
		st, err := pgstore.New(t.Context(), pool, pgstore.Config{})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, func(int64, int) (int, string) {
		time.Sleep(5 * time.Millisecond) // the endpoint's own work
		return http.StatusOK, ""
	})
	// A round-robin load balancer in front of two relays, as one public
	// webhook address.
	hookA, hookB := listen(t), listen(t)
	var next atomic.Int64
	targets := []*url.URL{{Scheme: "http", Host: hookA.Addr().String()}, {Scheme: "http", Host: hookB.Addr().String()}}
	lb := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(targets[next.Add(1)%2])
	}})
	t.Cleanup(lb.Close)
	var relays []*relay.Relay
	for i, hook := range []net.Listener{hookA, hookB} {
		cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, newRecorder())
		cfg.Store, cfg.StoreName = newStore(), "postgres"
		cfg.Poll, cfg.PollTimeout = false, 0
		cfg.Listener, cfg.Secret, cfg.TakeoverFrom = hook, testSecret, hookowner.HostNone
		cfg.PublicURL = lb.URL + "/telegram"
		cfg.Intake.PendingGrace, cfg.Intake.SweepInterval = time.Second, 200*time.Millisecond
		cfg.Forward.Header = http.Header{"X-Relay": {string(rune('a' + i))}}
		relays = append(relays, start(t, cfg))
	}
	ups := sendChatter(t, srv, 8, 40)
	testkit.WaitFor(t, "every update forwarded", func() bool { return ep.distinct() == len(ups) })
	by := map[string]int{}
	for _, u := range ups {
		for _, h := range ep.hitsOf(u.ID) {
			by[h.relayName]++
		}
	}
	if by["a"] == 0 || by["b"] == 0 {
		t.Errorf("forwards by relay = %v, want both to share the work", by)
	}
	testkit.WaitFor(t, "every row completed", func() bool {
		s, err := relays[0].Stats(t.Context())
		return err == nil && s.Count[intake.StateCompleted] == len(ups)
	})
	for _, r := range relays {
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	}
}

func TestRelayLogsFailuresRateLimitedWithoutSecrets(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, func(int64, int) (int, string) { return http.StatusBadGateway, "" })
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	hook := listen(t)
	cfg.Poll, cfg.PollTimeout = false, 0
	cfg.Listener, cfg.Secret, cfg.TakeoverFrom = hook, testSecret, hookowner.HostNone
	cfg.PublicURL = "http://" + hook.Addr().String() + "/telegram"
	cfg.Intake.MaxAttempts, cfg.BackoffBase = 2, time.Millisecond
	// Logged at the default level: Info.
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	began := time.Now()
	start(t, cfg)
	const n = 25 // one per chat, so every update fails on its own
	ups := sendChatter(t, srv, n, n)
	testkit.WaitFor(t, "every update given up", func() bool { return rec.count(string(relay.KindExhausted)) == n })
	// A last attempt's failure is reported just after its exhaustion.
	testkit.WaitFor(t, "every attempt's failure reported", func() bool { return rec.count(string(relay.KindFailed)) >= 2*n })
	elapsed := time.Since(began)

	retry := logLines(logs, "relay: forward failed; a retry is scheduled")
	given := logLines(logs, "relay: forward failed; the update is given up")
	exh := logLines(logs, "relay: exhaustion recorded; it waits to be delivered or acknowledged")
	// The limit lets 10 lines of a message through at once and one more
	// every 6 seconds; whatever the machine's speed, that bounds them.
	bound := 10 + int(elapsed/(6*time.Second)) + 1
	for name, ls := range map[string][]map[string]any{"retry": retry, "given up": given, "exhaustion": exh} {
		if len(ls) == 0 || len(ls) > bound {
			t.Errorf("%d %s lines for %d failing updates in %v, want 1 to %d", len(ls), name, n, elapsed, bound)
		}
	}
	if len(retry) > 0 {
		l := retry[0]
		if l["level"] != "WARN" || l["reason"] != relay.FailHTTP5xx || l["attempt"] != float64(1) || l["update_id"] == nil || !strings.Contains(l["err"].(string), "502") {
			t.Errorf("retry line = %v, want a warning naming the update, attempt 1, reason http_5xx and the 502", l)
		}
	}
	if len(given) > 0 && (given[0]["level"] != "ERROR" || given[0]["attempt"] != float64(2)) {
		t.Errorf("given-up line = %v, want an error at attempt 2", given[0])
	}
	if ls := logLines(logs, "intake: attempt failed"); len(ls) != 0 {
		t.Errorf("the runner's per-attempt lines appear at the default level too (%d): %v", len(ls), ls[0])
	}
	// Nothing was lost to the limit in the events.
	if got := rec.count(string(relay.KindFailed)); got != 2*len(ups) {
		t.Errorf("failed events = %d, want %d", got, 2*len(ups))
	}
	assertNoSecrets(t, "the relay's log", logs.String(), srv.Token)
}

// TestRelayCloseContextBoundsTheDrain: Close's context ends the drain
// even when DrainTimeout is far off, as intake.Runner.Close's does, and
// the cut drain is Close's error.
func TestRelayCloseContextBoundsTheDrain(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	entered := make(chan int64, 16)
	release := make(chan struct{})
	ep := newBotEndpoint(t, func(id int64, _ int) (int, string) {
		entered <- id
		<-release // an endpoint that never finishes while the relay drains
		return http.StatusOK, ""
	})
	t.Cleanup(func() { close(release) })
	cfg := baseConfig(t, srv, ep, &testkit.SyncBuffer{}, newRecorder())
	cfg.DrainTimeout = relay.MaxDrainTimeout
	r := start(t, cfg)
	sendChatter(t, srv, 1, 1)
	select {
	case <-entered:
	case <-time.After(testkit.WaitLimit):
		t.Fatal("the forward never reached the endpoint")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // a caller out of time
	if err := r.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with an ended context = %v, want its error", err)
	}
}

// TestRelayWarnsOfAnUnknownAllowedUpdateType: Telegram ignores an
// allowed_updates name it does not know, so a misspelt type would quietly
// stop its updates; the relay says so when it starts, and only for that
// name.
func TestRelayWarnsOfAnUnknownAllowedUpdateType(t *testing.T) {
	t.Parallel()
	srv := fakeTelegram(t)
	ep := newBotEndpoint(t, func(int64, int) (int, string) { return http.StatusOK, "" })
	logs, rec := &testkit.SyncBuffer{}, newRecorder()
	cfg := baseConfig(t, srv, ep, logs, rec)
	cfg.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	cfg.AllowedUpdates = []string{"message", "callback_querys", "pre_checkout_query"}
	start(t, cfg)
	warned := logLines(logs, "relay: an allowed update type is not one tgrelay knows; Telegram ignores names it does not know, so check its spelling")
	if len(warned) != 1 || warned[0]["type"] != "callback_querys" || warned[0]["level"] != "WARN" {
		t.Errorf("warnings for AllowedUpdates %v = %v; want one, for callback_querys", cfg.AllowedUpdates, warned)
	}
}

// TestStartWarnsOnOneP: a relay started with one P says so, with the
// remedy, and one started with more does not. Not parallel: it sets
// GOMAXPROCS for the whole process.
func TestStartWarnsOnOneP(t *testing.T) {
	const warning = "relay: Go runs on one P (GOMAXPROCS=1): while a SQLite store write waits for the disk nothing else runs, the webhook included; set GOMAXPROCS=2, as tgrelay serve does on one CPU"
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	for _, c := range []struct{ procs, want int }{{1, 1}, {2, 0}} {
		runtime.GOMAXPROCS(c.procs)
		srv := fakeTelegram(t)
		logs := &testkit.SyncBuffer{}
		r := start(t, baseConfig(t, srv, newBotEndpoint(t, nil), logs, newRecorder()))
		runtime.GOMAXPROCS(prev) // the relay runs on as many as the rest of the tests
		if n := len(logLines(logs, warning)); n != c.want {
			t.Errorf("GOMAXPROCS=%d: %d warnings, want %d", c.procs, n, c.want)
		}
		_ = r.Close(context.Background())
	}
}
