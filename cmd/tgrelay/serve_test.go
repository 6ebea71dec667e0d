package main

// Tests of `tgrelay serve` run the real binary, built once per test binary,
// against telegramtest (the fake Bot API, in this process) and a recording
// bot endpoint (httptest, in this process).

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

// waitTimeout bounds every wait of these tests; a wait that runs out fails
// loudly.
const waitTimeout = 45 * time.Second

// testSecret is a realistic webhook secret; it must never reach a log.
const testSecret = "s3cr3t-Webhook_Value-9f8e7d6c5b4a"

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
)

// tgrelayBinary builds the binary once per test binary, into a directory
// under the system temp dir named after this process. There is no hook
// after the last test of the package (TestMain is shared), so each build
// first removes the directories of test processes that are gone.
func tgrelayBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		const prefix = "tgrelay-serve-test-"
		old, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
		for _, d := range old {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), prefix))
			if err == nil && pid != os.Getpid() && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
				_ = os.RemoveAll(d)
			}
		}
		dir := filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", prefix, os.Getpid()))
		if buildErr = os.MkdirAll(dir, 0o755); buildErr != nil {
			return
		}
		buildPath = filepath.Join(dir, "tgrelay")
		out, err := exec.Command("go", "build", "-o", buildPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// serveWaitFor polls cond every few milliseconds until it holds, failing the
// test after waitTimeout.
func serveWaitFor(t *testing.T, what string, cond func() bool, procs ...*serveProc) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			for _, p := range procs {
				t.Logf("serve stderr:\n%s", p.stderr)
			}
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveProc is one running `tgrelay serve` process.
type serveProc struct {
	cmd            *exec.Cmd
	stdout, stderr *testkit.SyncBuffer
	done           chan struct{}
	exitErr        error
	webhook, admin string
}

// logLines returns the JSON log lines with msg.
func (r *serveProc) logLines(msg string) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func (r *serveProc) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits for the exit.
func (r *serveProc) stop(t *testing.T) error {
	t.Helper()
	if !r.exited() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-r.done:
	case <-time.After(waitTimeout):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("serve did not stop within %v after SIGTERM; stderr:\n%s", waitTimeout, r.stderr)
	}
	return r.exitErr
}

// kill sends SIGKILL and waits for the exit.
func (r *serveProc) kill() {
	_ = r.cmd.Process.Kill()
	<-r.done
}

// runServeProc starts serve with args (JSON logs) and the environment env (the
// test's own TGRELAY_ variables removed), without waiting for it.
func runServeProc(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	return runServeProcUnder(t, nil, env, args...)
}

// runServeProcUnder is runServeProc with serve's command line after
// prefix, a command that runs it (such as taskset).
func runServeProcUnder(t *testing.T, prefix, env []string, args ...string) *serveProc {
	t.Helper()
	bin := tgrelayBinary(t)
	r := &serveProc{stdout: &testkit.SyncBuffer{}, stderr: &testkit.SyncBuffer{}, done: make(chan struct{})}
	argv := slices.Concat(prefix, []string{bin, "serve", "--log-format", "json"}, args)
	r.cmd = exec.Command(argv[0], argv[1:]...)
	r.cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TGRELAY_") {
			r.cmd.Env = append(r.cmd.Env, kv)
		}
	}
	r.cmd.Env = append(r.cmd.Env, env...)
	r.cmd.Stdout, r.cmd.Stderr = r.stdout, r.stderr
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { r.exitErr = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		if !r.exited() {
			r.stop(t)
		}
	})
	return r
}

// startServeProc starts serve and waits until it receives (its "receiving" log
// line), reading the webhook and admin addresses from it.
func startServeProc(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	return startServeProcUnder(t, nil, env, args...)
}

// startServeProcUnder is startServeProc with serve run by prefix (see
// runServeProcUnder).
func startServeProcUnder(t *testing.T, prefix, env []string, args ...string) *serveProc {
	t.Helper()
	r := runServeProcUnder(t, prefix, env, args...)
	serveWaitFor(t, "serve to start receiving", func() bool {
		if r.exited() {
			t.Fatalf("serve exited early (%v); stderr:\n%s", r.exitErr, r.stderr)
		}
		for _, msg := range []string{"relay: receiving by webhook", "relay: receiving by long polling"} {
			if ls := r.logLines(msg); len(ls) > 0 {
				r.webhook, _ = ls[0]["webhook"].(string)
				r.admin, _ = ls[0]["admin"].(string)
				return true
			}
		}
		return false
	})
	return r
}

// endpointHit is one request the bot endpoint received.
type endpointHit struct {
	attempt int
	claimID string
}

// botEndpoint is the bot's HTTP endpoint, recording every forward.
type botEndpoint struct {
	srv *httptest.Server
	// respond decides the answer to attempt n (from 1) of an update; nil
	// answers 200.
	respond func(updateID int64, n int) (status int, retryAfter string)

	mu   sync.Mutex
	hits map[int64][]endpointHit
}

func newBotEndpoint(t *testing.T, respond func(int64, int) (int, string)) *botEndpoint {
	t.Helper()
	e := &botEndpoint{respond: respond, hits: map[int64][]endpointHit{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /update", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id, err := intake.ParseUpdate(body)
		hdrID, _ := strconv.ParseInt(r.Header.Get(wire.HeaderUpdateID), 10, 64)
		attempt, _ := strconv.Atoi(r.Header.Get(wire.HeaderAttempt))
		if err != nil || hdrID != id || attempt < 1 || r.Header.Get(wire.HeaderClaimID) == "" {
			t.Errorf("forward without a consistent identity: body id %d (%v), headers %v", id, err, r.Header)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		e.mu.Lock()
		e.hits[id] = append(e.hits[id], endpointHit{attempt: attempt, claimID: r.Header.Get(wire.HeaderClaimID)})
		n := len(e.hits[id])
		e.mu.Unlock()
		status, ra := http.StatusOK, ""
		if e.respond != nil {
			status, ra = e.respond(id, n)
		}
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(status)
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *botEndpoint) url() string { return e.srv.URL + "/update" }

func (e *botEndpoint) hitsOf(id int64) []endpointHit {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]endpointHit(nil), e.hits[id]...)
}

// distinct counts the updates forwarded at least once.
func (e *botEndpoint) distinct() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.hits)
}

// serveFakeTelegram starts a fake Bot API with fast webhook re-delivery.
func serveFakeTelegram(t *testing.T) *telegramtest.Server {
	t.Helper()
	srv := telegramtest.NewServer(telegramtest.Config{
		Webhook: telegramtest.WebhookConfig{Timeout: 10 * time.Second, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 1000},
		Logf:    t.Logf,
	})
	t.Cleanup(srv.Close)
	return srv
}

func serveBotClient(t *testing.T, srv *telegramtest.Server) *botapi.Client {
	t.Helper()
	c, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sendChatter makes users write n messages over chats, round robin, and
// returns the updates.
func sendChatter(t *testing.T, srv *telegramtest.Server, chats, n int) []telegramtest.Update {
	t.Helper()
	ups, err := srv.SendChatter(chats, n)
	if err != nil {
		t.Fatal(err)
	}
	return ups
}

func updateIDs(ups []telegramtest.Update) []int64 {
	var ids []int64
	for _, u := range ups {
		ids = append(ids, u.ID)
	}
	return ids
}

// scrapeMetric returns the value of one series from /metrics ("name" or
// `name{label="v"}`), or -1 when absent.
func scrapeMetric(t *testing.T, admin, series string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatalf("scrapeMetric: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			if err != nil {
				t.Fatalf("metric %s: %v", series, err)
			}
			return v
		}
	}
	return -1
}

// assertServeNoSecrets fails when any output of r holds the token, its secret
// half, or the webhook secret.
func assertServeNoSecrets(t *testing.T, r *serveProc, token string) {
	t.Helper()
	_, half, _ := strings.Cut(token, ":")
	for name, out := range map[string]string{"stdout": r.stdout.String(), "stderr": r.stderr.String()} {
		for what, s := range map[string]string{"token": token, "token secret half": half, "webhook secret": testSecret} {
			if s != "" && strings.Contains(out, s) {
				t.Errorf("%s of serve contains the %s:\n%s", name, what, out)
			}
		}
	}
}

func TestServeWebhook(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	ep := newBotEndpoint(t, nil)
	addr := testkit.FreeAddr(t)
	public := "http://" + addr + "/telegram"
	db := filepath.Join(t.TempDir(), "relay.db")
	// Token and secret by environment, as an operator would pass them.
	r := startServeProc(t, []string{"TGRELAY_TOKEN=" + srv.Token, "TGRELAY_WEBHOOK_SECRET=" + testSecret},
		"--api-root", srv.URL, "--db", db, "--listen", addr, "--public-url", public, "--takeover-from", "none",
		"--forward", ep.url(), "--admin-listen", "127.0.0.1:0", "--log-level", "debug")

	info, err := serveBotClient(t, srv).Call(t.Context(), "getWebhookInfo", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), addr) || !strings.Contains(string(info), "owner=") {
		t.Errorf("webhook after start = %s, want our address with an owner tag", info)
	}
	ups := sendChatter(t, srv, 3, 9)
	ids := updateIDs(ups)
	serveWaitFor(t, "every update forwarded", func() bool { return ep.distinct() == len(ids) })
	for _, id := range ids {
		hs := ep.hitsOf(id)
		if hs[0].attempt != 1 {
			t.Errorf("update %d first forward has attempt %d, want 1", id, hs[0].attempt)
		}
	}
	serveWaitFor(t, "completed in the store", func() bool {
		return scrapeMetric(t, r.admin, `tgrelay_updates{state="completed"}`) == float64(len(ids))
	})
	if got := scrapeMetric(t, r.admin, "tgrelay_updates_accepted_total"); got != float64(len(ids)) {
		t.Errorf("tgrelay_updates_accepted_total = %v, want %d", got, len(ids))
	}
	if got := scrapeMetric(t, r.admin, "tgrelay_attempts_total"); got < float64(len(ids)) {
		t.Errorf("tgrelay_attempts_total = %v, want >= %d", got, len(ids))
	}
	if got := scrapeMetric(t, r.admin, `tgrelay_forward_duration_seconds_count{outcome="ok"}`); got < float64(len(ids)) {
		t.Errorf("forward latency count = %v, want >= %d", got, len(ids))
	}
	if got := scrapeMetric(t, r.admin, "tgrelay_oldest_pending_age_seconds"); got != 0 {
		t.Errorf("tgrelay_oldest_pending_age_seconds = %v with nothing pending, want 0", got)
	}
	if got := scrapeMetric(t, r.admin, "tgrelay_store_up"); got != 1 {
		t.Errorf("tgrelay_store_up = %v, want 1", got)
	}
	if got := scrapeMetric(t, r.admin, "tgrelay_webhook_owned"); got != 1 {
		t.Errorf("tgrelay_webhook_owned = %v, want 1", got)
	}

	// Refusals are answered and counted by reason.
	post := func(secret, body string) int {
		req, _ := http.NewRequest(http.MethodPost, r.webhook, strings.NewReader(body))
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
	for reason, want := range map[string]float64{"unauthorized": 1, "invalid": 1, "too_large": 1} {
		if got := scrapeMetric(t, r.admin, `tgrelay_updates_rejected_total{reason="`+reason+`"}`); got != want {
			t.Errorf("rejected{%s} = %v, want %v", reason, got, want)
		}
	}
	if got := scrapeMetric(t, r.admin, "tgrelay_updates_duplicate_total"); got != 1 {
		t.Errorf("tgrelay_updates_duplicate_total = %v, want 1", got)
	}

	for path, want := range map[string]int{"/healthz": 200, "/readyz": 200} {
		resp, err := http.Get(r.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit after SIGTERM: %v\n%s", err, r.stderr)
	}
	if len(r.logLines("relay: stopped")) != 1 {
		t.Errorf("no clean stop logged:\n%s", r.stderr)
	}
	assertServeNoSecrets(t, r, srv.Token)
}

func TestServeWebhookOwnership(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	bot := serveBotClient(t, srv)
	ep := newBotEndpoint(t, nil)
	if _, err := bot.Call(t.Context(), "setWebhook", map[string]any{"url": "http://other.example:8443/secret-path"}); err != nil {
		t.Fatal(err)
	}
	addr := testkit.FreeAddr(t)
	base := []string{"--token", srv.Token, "--api-root", srv.URL, "--secret", testSecret, "--db", filepath.Join(t.TempDir(), "relay.db"),
		"--listen", addr, "--public-url", "http://" + addr + "/telegram", "--forward", ep.url()}

	// Refused: the webhook is another deployment's.
	r := runServeProc(t, nil, base...)
	select {
	case <-r.done:
	case <-time.After(waitTimeout):
		t.Fatal("serve did not refuse")
	}
	var ee *exec.ExitError
	if !errors.As(r.exitErr, &ee) || ee.ExitCode() != exitUsage {
		t.Errorf("refused serve exit = %v, want code %d", r.exitErr, exitUsage)
	}
	for _, want := range []string{"owned-elsewhere", "--takeover-from other.example:8443"} {
		if !strings.Contains(r.stderr.String(), want) {
			t.Errorf("refusal lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(r.stderr.String(), "secret-path") {
		t.Errorf("refusal names the other owner's path:\n%s", r.stderr)
	}
	info, _ := bot.Call(t.Context(), "getWebhookInfo", nil)
	if !strings.Contains(string(info), "other.example") {
		t.Errorf("webhook changed by a refused serve: %s", info)
	}
	assertServeNoSecrets(t, r, srv.Token)

	// Takeover naming the host.
	r = startServeProc(t, nil, append(base, "--takeover-from", "other.example:8443")...)
	if ls := r.logLines("relay: webhook set"); len(ls) != 1 || ls[0]["taken_from"] != "other.example:8443" {
		t.Errorf("takeover not logged: %v", ls)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit: %v", err)
	}
	assertServeNoSecrets(t, r, srv.Token)
}

func TestServeKillAndRestartLosesNothing(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	// A slow endpoint, so the kill lands mid-stream with forwards running.
	ep := newBotEndpoint(t, func(int64, int) (int, string) {
		time.Sleep(20 * time.Millisecond) // the endpoint's own work, not synchronisation
		return http.StatusOK, ""
	})
	db := filepath.Join(t.TempDir(), "relay.db")
	args := []string{"--token", srv.Token, "--api-root", srv.URL, "--db", db, "--poll", "--poll-timeout", "1s",
		"--forward", ep.url(), "--lease", "1s", "--sweep-interval", "100ms", "--backoff-base", "10ms", "--concurrency", "2"}
	ups := sendChatter(t, srv, 4, 40)
	r := startServeProc(t, nil, args...)
	serveWaitFor(t, "some forwards before the kill", func() bool { return ep.distinct() >= 5 })
	r.kill()
	// The kill landed mid-stream: some updates were not completed yet.
	func() {
		st, err := openStore(t.Context(), db, "", false)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		s, err := st.Stats(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if s.Count[intake.StateCompleted] >= len(ups) {
			t.Fatalf("all %d updates were completed before the kill; the test did not kill mid-stream", len(ups))
		}
		t.Logf("at the kill: %v", s.Count)
	}()
	first := r
	r = startServeProc(t, nil, args...)
	serveWaitFor(t, "every update forwarded after the restart", func() bool { return ep.distinct() == len(ups) }, first, r)
	// Every update ends completed in the store.
	st, err := openStore(t.Context(), db, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	serveWaitFor(t, "every row completed", func() bool {
		s, err := st.Stats(t.Context())
		return err == nil && s.Count[intake.StateCompleted] == len(ups)
	})
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit: %v", err)
	}
	for _, u := range ups {
		if len(ep.hitsOf(u.ID)) == 0 {
			t.Errorf("update %d lost", u.ID)
		}
	}
}

func TestServeFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string
	}{
		{"no forward", nil, []string{"--token", "1:x"}, "--forward is required"},
		{"bad forward", nil, []string{"--forward", "ftp://x"}, "--forward is not a URL: want an absolute"},
		{"forward with a password", nil, []string{"--forward", "http://bot:hunter2@127.0.0.1:1/"}, "--forward has a user name or password: a credential in the URL would reach logs and error messages; send it in a request header instead"},
		{"exhaustion forward with a password", nil, []string{"--forward", "http://127.0.0.1:1/", "--exhaustion-forward", "http://bot:hunter2@127.0.0.1:1/e"}, "--exhaustion-forward has a user name or password"},
		{"public URL with a password", []string{"TGRELAY_WEBHOOK_SECRET=s3cret"}, []string{"--forward", "http://127.0.0.1:1/", "--token", "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "--public-url", "https://bot:hunter2@bot.example.com/h"}, "--public-url has a user name or password: a credential in the URL would reach logs and error messages; the webhook's secret token is what proves a delivery comes from Telegram"},
		{"forward to 0.0.0.0", nil, []string{"--forward", "http://0.0.0.0:3000/"}, "--forward names an unspecified address (0.0.0.0 or ::)"},
		{"exhaustion forward to [::]", []string{"TGRELAY_EXHAUSTION_FORWARD=http://[::]:3000/e"}, []string{"--forward", "http://127.0.0.1:1/"}, "--exhaustion-forward names an unspecified address"},
		{"bad env duration", []string{"TGRELAY_LEASE=soon"}, []string{"--forward", "http://127.0.0.1:1/"}, "TGRELAY_LEASE: invalid value for --lease"},
		{"bad attempts", nil, []string{"--forward", "http://127.0.0.1:1/", "--max-attempts", "0"}, "--max-attempts is 0"},
		{"heartbeat interval", nil, []string{"--forward", "http://127.0.0.1:1/", "--heartbeat-interval", "10s"}, "--heartbeat-interval is 10s: want 1ms up to below the heartbeat timeout (10s)"},
		{"heartbeat timeout", nil, []string{"--forward", "http://127.0.0.1:1/", "--heartbeat-timeout", "2h"}, "--heartbeat-timeout is 2h0m0s"},
		{"no crash budget of 0", nil, []string{"--forward", "http://127.0.0.1:1/", "--max-crashes", "0"}, "--max-crashes is 0: want 1 to 1000, or -1"},
		{"bad crash budget", nil, []string{"--forward", "http://127.0.0.1:1/", "--max-crashes", "-2"}, "--max-crashes is -2"},
		{"timeout above lease", nil, []string{"--forward", "http://127.0.0.1:1/", "--lease", "1s", "--forward-timeout", "2s"}, "--forward-timeout is 2s: want below the lease"},
		{"secret required", nil, []string{"--forward", "http://127.0.0.1:1/", "--token", "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, "--secret (or TGRELAY_WEBHOOK_SECRET) is required"},
		{"bad secret", []string{"TGRELAY_WEBHOOK_SECRET=has space"}, []string{"--forward", "http://127.0.0.1:1/"}, "--secret (or TGRELAY_WEBHOOK_SECRET) is not a valid webhook secret"},
		{"chat order", nil, []string{"--forward", "http://127.0.0.1:1/", "--chat-order", "global"}, `--chat-order is "global": want "process" or "strict"`},
		{"chat order from env", []string{"TGRELAY_CHAT_ORDER=cluster"}, []string{"--forward", "http://127.0.0.1:1/"}, `--chat-order is "cluster"`},
		{"poll timeout", nil, []string{"--forward", "http://127.0.0.1:1/", "--poll", "--poll-timeout", "1500ms"}, "--poll-timeout"},
		{"remote gateway names the flag to pass", nil, []string{"--forward", "http://127.0.0.1:1/", "--gateway-listen", "0.0.0.0:0"}, "not a loopback address: the gateway holds the bot's token; pass --gateway-allow-remote to serve it elsewhere"},
		{"poll timeout without poll", nil, []string{"--forward", "http://127.0.0.1:1/", "--poll-timeout", "20s"}, "--poll-timeout applies only with --poll"},
		{"poll timeout from env without poll", []string{"TGRELAY_POLL_TIMEOUT=20s"}, []string{"--forward", "http://127.0.0.1:1/"}, "--poll-timeout applies only with --poll"},
		{"log format", nil, []string{"--forward", "http://127.0.0.1:1/", "--log-format", "xml"}, `--log-format "xml"`},
		{"dashboard open to the network", nil, []string{"--forward", "http://127.0.0.1:1/", "--admin-listen", "0.0.0.0:0"}, "--admin-token is required: the admin listener is not on a loopback address"},
		{"decline margin", nil, []string{"--forward", "http://127.0.0.1:1/", "--decline-margin", "12s"}, "--decline-margin is 12s: want less than the pre-checkout query deadline (10s)"},
		{"long decline text", nil, []string{"--forward", "http://127.0.0.1:1/", "--callback-decline-text", strings.Repeat("x", 201)}, "--callback-decline-text is 201 characters"},
		{"short admin token", []string{"TGRELAY_ADMIN_TOKEN=has space"}, []string{"--forward", "http://127.0.0.1:1/", "--admin-listen", "127.0.0.1:0"}, "--admin-token is too short"},
		{"negative deadline", nil, []string{"--forward", "http://127.0.0.1:1/", "--deadline-callback-query", "-1s"}, "--deadline-callback-query is -1s: want up to 1h0m0s, or 0 for no deadline"},
		{"deadline over an hour", []string{"TGRELAY_DEADLINE_PRE_CHECKOUT_QUERY=2h"}, []string{"--forward", "http://127.0.0.1:1/"}, "--deadline-pre-checkout-query is 2h0m0s"},
		{"zero deadline concurrency", nil, []string{"--forward", "http://127.0.0.1:1/", "--deadline-concurrency", "0"}, "--deadline-concurrency is 0: want 1 to"},
		{"accept timeout of zero", nil, []string{"--forward", "http://127.0.0.1:1/", "--accept-timeout", "0s"}, "--accept-timeout is 0s"},
		{"accept timeout over an hour", []string{"TGRELAY_ACCEPT_TIMEOUT=2h"}, []string{"--forward", "http://127.0.0.1:1/"}, "--accept-timeout is 2h0m0s"},
		{"deadline concurrency too high", nil, []string{"--forward", "http://127.0.0.1:1/", "--deadline-concurrency", "20000"}, "--deadline-concurrency is 20000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fs := newServeFlagSetForTest()
			o := defineServeFlags(fs)
			err := fs.Parse(tc.args)
			if err == nil {
				err = applyEnv(fs, envLookupIn(tc.env))
			}
			if err == nil {
				err = o.validate()
			}
			if err == nil {
				_, err = newLogger(io.Discard, o.logFormat, o.logLevel, &botapi.Redactor{})
			}
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, tc.want) {
				t.Errorf("error = %v, want a usage error containing %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "has space") {
				t.Errorf("error quotes the secret: %v", err)
			}
			if err != nil && strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error quotes a URL's password: %v", err)
			}
		})
	}
}

func envLookupIn(env []string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		for _, kv := range env {
			if name, v, ok := strings.Cut(kv, "="); ok && name == k {
				return v, true
			}
		}
		return "", false
	}
}

func newServeFlagSetForTest() *flag.FlagSet {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestServeSandboxWithoutToken(t *testing.T) {
	t.Parallel()
	ep := newBotEndpoint(t, nil)
	r := startServeProc(t, nil, "--db", filepath.Join(t.TempDir(), "relay.db"), "--listen", "127.0.0.1:0",
		"--forward", ep.url(), "--admin-listen", "127.0.0.1:0")
	var api, token string
	for line := range strings.SplitSeq(r.stdout.String(), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Bot API:"); ok {
			api = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "Token:"); ok {
			token = strings.TrimSpace(v)
		}
	}
	if api == "" || token == "" || !strings.Contains(r.stdout.String(), "/_sandbox/send") {
		t.Fatalf("sandbox banner lacks the URL, the token or the control API how-to:\n%s", r.stdout)
	}
	// A simulated user writes through the control API, as the banner says.
	control := func(path, body string) map[string]any {
		resp, err := http.Post(api+telegramtest.ControlPrefix+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 {
			t.Fatalf("control %s: %d %v", path, resp.StatusCode, err)
		}
		return m
	}
	user := control("users", `{"first_name":"Ada"}`)
	id := int64(user["id"].(float64))
	control("chats", fmt.Sprintf(`{"type":"private","user_id":%d}`, id))
	up := control("send", fmt.Sprintf(`{"chat_id":%d,"user_id":%d,"text":"hello"}`, id, id))
	uid := int64(up["update_id"].(float64))
	serveWaitFor(t, "the sandbox user's message forwarded", func() bool { return len(ep.hitsOf(uid)) == 1 }, r)
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit: %v", err)
	}
	// The sandbox token is printed on purpose, in the banner only, never
	// in a log line.
	if strings.Contains(r.stderr.String(), token) {
		t.Errorf("logs contain the sandbox token:\n%s", r.stderr)
	}
}
