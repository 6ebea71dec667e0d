package relay_test

// Tests of package relay run relays in this process against telegramtest
// (the fake Bot API), a real SQLite file (or a real PostgreSQL) and a
// recording bot endpoint on loopback.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/sqlitestore"
	"github.com/tgrelay/tgrelay/internal/pgtest"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/wire"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testSecret is a realistic webhook secret; it must never reach a log.
const testSecret = "s3cr3t-Webhook_Value-9f8e7d6c5b4a"

// logLines returns the JSON log lines of buf whose msg is msg.
func logLines(buf *testkit.SyncBuffer, msg string) []map[string]any {
	var out []map[string]any
	for line := range strings.SplitSeq(buf.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// recorder is an observer counting events by kind (and reason).
type recorder struct {
	mu     sync.Mutex
	counts map[string]int
	events []relay.Event
}

func newRecorder() *recorder { return &recorder{counts: map[string]int{}} }

func (r *recorder) Observe(e relay.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[string(e.Kind)]++
	if e.Reason != "" {
		r.counts[string(e.Kind)+"/"+e.Reason]++
	}
	r.events = append(r.events, e)
}

func (r *recorder) count(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[key]
}

func (r *recorder) all(k relay.Kind) []relay.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []relay.Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// endpointHit is one request the bot endpoint received.
type endpointHit struct {
	attempt   int
	claimID   string
	relayName string
}

// botEndpoint is the bot's HTTP endpoint, recording every forward.
type botEndpoint struct {
	srv *httptest.Server
	// respond decides the answer to attempt n (from 1) of an update; nil
	// answers 200.
	respond func(updateID int64, n int) (status int, retryAfter string)

	mu          sync.Mutex
	hits        map[int64][]endpointHit
	exhaustions []forward.ExhaustionPayload
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
		e.hits[id] = append(e.hits[id], endpointHit{attempt: attempt, claimID: r.Header.Get(wire.HeaderClaimID), relayName: r.Header.Get("X-Relay")})
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
	mux.HandleFunc("POST /exhaustion", func(w http.ResponseWriter, r *http.Request) {
		p, err := forward.DecodeExhaustion(r.Body)
		if err != nil {
			t.Errorf("exhaustion payload: %v", err)
		}
		e.mu.Lock()
		e.exhaustions = append(e.exhaustions, p)
		e.mu.Unlock()
		w.Header().Set(forward.HeaderAck, p.ClaimID)
	})
	e.srv = httptest.NewServer(mux)
	t.Cleanup(e.srv.Close)
	return e
}

func (e *botEndpoint) url() string           { return e.srv.URL + "/update" }
func (e *botEndpoint) exhaustionURL() string { return e.srv.URL + "/exhaustion" }

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

func (e *botEndpoint) exhaustionPayloads() []forward.ExhaustionPayload {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]forward.ExhaustionPayload(nil), e.exhaustions...)
}

// fakeTelegram starts a fake Bot API with fast webhook re-delivery.
func fakeTelegram(t *testing.T) *telegramtest.Server {
	t.Helper()
	srv := telegramtest.NewServer(telegramtest.Config{
		Webhook: telegramtest.WebhookConfig{Timeout: 10 * time.Second, Backoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 1000},
		Logf:    t.Logf,
	})
	t.Cleanup(srv.Close)
	return srv
}

func botClient(t *testing.T, srv *telegramtest.Server) *botapi.Client {
	t.Helper()
	c, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// sqliteStore opens a SQLite store in the test's temp dir, closed at the
// end of the test (after the relay stopped: cleanups run last-first).
func sqliteStore(t *testing.T) *sqlitestore.Store {
	t.Helper()
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "relay.db"), sqlitestore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// listen returns a loopback listener.
func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// baseConfig is a polling relay against srv into a new SQLite store,
// forwarding to ep, logging JSON to logs, observed by rec, with fast
// sweeps and retries.
func baseConfig(t *testing.T, srv *telegramtest.Server, ep *botEndpoint, logs *testkit.SyncBuffer, rec *recorder) relay.Config {
	t.Helper()
	return relay.Config{
		Token:       srv.Token,
		APIRoot:     srv.URL,
		Store:       sqliteStore(t),
		StoreName:   "sqlite",
		Poll:        true,
		PollTimeout: time.Second,
		Forward:     forward.Config{URL: ep.url()},
		Intake:      relay.IntakeConfig{SweepInterval: 50 * time.Millisecond},
		BackoffBase: 10 * time.Millisecond,
		Observer:    relay.Observer{EventFunc: rec.Observe},
		Logger:      slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
}

// start creates and starts a relay, stopped at the end of the test.
func start(t *testing.T, cfg relay.Config) *relay.Relay {
	t.Helper()
	r, err := relay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
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

// assertNoSecrets fails when text holds the token, its secret half, or the
// webhook secret.
func assertNoSecrets(t *testing.T, what, text, token string) {
	t.Helper()
	_, half, _ := strings.Cut(token, ":")
	for name, s := range map[string]string{"token": token, "token secret half": half, "webhook secret": testSecret} {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s contains the %s:\n%s", what, name, text)
		}
	}
}

// get returns the status and body of GET url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
