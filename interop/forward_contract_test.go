package interop

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/wire"
)

// app is a Go stand-in for a bot behind serve: it records what serve
// sent and answers as a test script says.
type app struct {
	mu       sync.Mutex
	updates  []http.Header
	exhaust  []recorded
	answer   func(w http.ResponseWriter, r *http.Request, body []byte)
	exhAck   bool // acknowledge exhaustions with Tgrelay-Ack
	received chan struct{}
	srv      *httptest.Server
}

type recorded struct {
	header http.Header
	body   []byte
}

func newApp(t *testing.T) *app {
	t.Helper()
	a := &app{received: make(chan struct{}, 64)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /update", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.updates = append(a.updates, r.Header.Clone())
		answer := a.answer
		a.mu.Unlock()
		if answer != nil {
			answer(w, r, body)
		}
	})
	mux.HandleFunc("POST /exhaustion", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.exhaust = append(a.exhaust, recorded{r.Header.Clone(), body})
		ack := a.exhAck
		a.mu.Unlock()
		if ack {
			w.Header().Set(forward.HeaderAck, r.Header.Get(wire.HeaderClaimID))
		}
		w.WriteHeader(http.StatusOK) // what any framework answers
		a.received <- struct{}{}
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

var adminURL = regexp.MustCompile(`admin=(http://[0-9.:]+)`)

// metric scrapes one counter from serve's /metrics.
func metric(t *testing.T, admin, name string) float64 {
	t.Helper()
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// TestServeForwardContract runs the real binary between the sandbox and a
// Go app: the app's own secret arrives in Telegram's header, a webhook
// reply serve does not perform is logged and counted, and an exhaustion
// is shaped so nothing takes it for an update and is acknowledged only
// explicitly.
func TestServeForwardContract(t *testing.T) {
	t.Parallel()
	sb := startSandbox(t)
	a := newApp(t)
	const appSecret = "app-only_s3cret"
	serve := startServe(t, sb, a.srv.URL+"/update", "--no-gateway", "--app-secret-token", appSecret,
		"--exhaustion-forward", a.srv.URL+"/exhaustion", "--admin-listen", "127.0.0.1:0", "--max-attempts", "1")
	admin := adminURL.FindStringSubmatch(serve.waitContains(t, "admin=http"))[1]
	ada, adaChat := sb.user(t, "Ada")

	// 1. A webhook reply: answered 200 with a Bot API call in the body, as
	// Telegraf does by default. Serve does not perform it, and says so.
	a.mu.Lock()
	a.answer = func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), "poison") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var u struct {
			Message struct {
				Chat struct {
					ID int64 `json:"id"`
				} `json:"chat"`
			} `json:"message"`
		}
		json.Unmarshal(body, &u)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"method": "sendMessage", "chat_id": u.Message.Chat.ID, "text": "in the body"})
	}
	a.mu.Unlock()
	sb.send(t, adaChat, ada, map[string]any{"text": "hello"})
	line := serve.waitContains(t, "was not performed")
	if !strings.Contains(line, "method=sendMessage") || !strings.Contains(line, "level=WARN") {
		t.Errorf("unacted reply log line = %s", line)
	}
	if n := metric(t, admin, "tgrelay_unacted_replies_total"); n != 1 {
		t.Errorf("tgrelay_unacted_replies_total = %v, want 1", n)
	}
	a.mu.Lock()
	got := a.updates[0]
	a.mu.Unlock()
	if got.Get("X-Telegram-Bot-Api-Secret-Token") != appSecret {
		t.Errorf("update forward secret header = %q, want the app's secret", got.Get("X-Telegram-Bot-Api-Secret-Token"))
	}
	var msgs []json.RawMessage
	sb.control(t, "GET", "messages", nil, &msgs)
	if len(msgs) != 0 {
		t.Errorf("the unacted reply was sent anyway: %s", msgs)
	}

	// 2. A refused update becomes an exhaustion: shaped so no framework
	// takes it for an update, without the app's secret, and not
	// acknowledged by a bare 200.
	poison := sb.send(t, adaChat, ada, map[string]any{"text": "poison"})
	recvWithin(t, a.received, "the exhaustion delivery")
	a.mu.Lock()
	first := a.exhaust[0]
	a.mu.Unlock()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(first.body, &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["update_id"]; ok || top["tgrelay_exhaustion"] == nil {
		t.Errorf("exhaustion body = %s, want only tgrelay_exhaustion at the top", first.body)
	}
	if first.header.Get(forward.HeaderKind) != "exhaustion" || first.header.Get("X-Telegram-Bot-Api-Secret-Token") != "" {
		t.Errorf("exhaustion headers = %v", first.header)
	}
	p, err := forward.DecodeExhaustion(strings.NewReader(string(first.body)))
	if err != nil || p.UpdateID != poison.UpdateID || !strings.Contains(string(p.Update), "poison") {
		t.Errorf("exhaustion = %+v, %v", p, err)
	}
	serve.waitContains(t, "Tgrelay-Ack")
	if n := metric(t, admin, "tgrelay_exhaustions_acknowledged_total"); n != 0 {
		t.Errorf("a bare 200 acknowledged the exhaustion (%v)", n)
	}

	// 3. Echoing the claim id acknowledges it.
	a.mu.Lock()
	a.exhAck = true
	a.mu.Unlock()
	testkit.WaitFor(t, "the exhaustion acknowledged", func() bool {
		return metric(t, admin, "tgrelay_exhaustions_acknowledged_total") == 1
	})
	if strings.Contains(serve.output(), appSecret) {
		t.Error("serve's output contains the app's secret")
	}
}

func recvWithin(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
	}
}
