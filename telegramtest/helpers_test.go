package telegramtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// waitLimit bounds every wait for an asynchronous event; reaching it fails
// the test loudly.
const waitLimit = 10 * time.Second

// answer is Telegram's envelope as a test reads it.
type answer struct {
	Status      int             `json:"-"`
	OK          bool            `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   int             `json:"error_code"`
	Description string          `json:"description"`
	Parameters  struct {
		RetryAfter      int   `json:"retry_after"`
		MigrateToChatID int64 `json:"migrate_to_chat_id"`
	} `json:"parameters"`
}

func newServer(t *testing.T, cfg telegramtest.Config) *telegramtest.Server {
	t.Helper()
	srv := telegramtest.NewServer(cfg)
	t.Cleanup(srv.Close)
	return srv
}

// call posts params as JSON to method with a plain net/http client.
func call(t *testing.T, srv *telegramtest.Server, method string, params map[string]any) answer {
	t.Helper()
	a, err := tryCall(t.Context(), srv, method, params)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return a
}

func tryCall(ctx context.Context, srv *telegramtest.Server, method string, params map[string]any) (answer, error) {
	body, _ := json.Marshal(params)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/bot"+srv.Token+"/"+method, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return do(srv.Client(), req)
}

func do(c *http.Client, req *http.Request) (answer, error) {
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	var a answer
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	if err := json.Unmarshal(b, &a); err != nil {
		return answer{Status: resp.StatusCode}, err
	}
	a.Status = resp.StatusCode
	return a, nil
}

func postForm(t *testing.T, srv *telegramtest.Server, method string, v url.Values) answer {
	t.Helper()
	resp, err := srv.Client().PostForm(srv.URL+"/bot"+srv.Token+"/"+method, v)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatal(err)
	}
	a.Status = resp.StatusCode
	return a
}

func wantOK(t *testing.T, a answer) {
	t.Helper()
	if !a.OK || a.Status != 200 {
		t.Fatalf("answer = %d %q, want ok", a.Status, a.Description)
	}
}

func wantError(t *testing.T, a answer, code int, desc string) {
	t.Helper()
	if a.OK || a.Status != code || a.ErrorCode != code || a.Description != desc {
		t.Fatalf("answer = %d/%d %q, want %d %q", a.Status, a.ErrorCode, a.Description, code, desc)
	}
}

type sentMessage struct {
	MessageID int64 `json:"message_id"`
	Chat      struct {
		ID   int64  `json:"id"`
		Type string `json:"type"`
	} `json:"chat"`
	Text string `json:"text"`
}

func decode[T any](t *testing.T, raw json.RawMessage) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// fixture is a server with limits off and one user in a private chat.
type fixture struct {
	srv  *telegramtest.Server
	user telegramtest.User
	chat telegramtest.Chat
}

func setup(t *testing.T, cfg telegramtest.Config) fixture {
	t.Helper()
	srv := newServer(t, cfg)
	u := srv.NewUser("Ada")
	c, err := srv.NewPrivateChat(u)
	if err != nil {
		t.Fatal(err)
	}
	return fixture{srv, u, c}
}

func noLimits() telegramtest.Config {
	return telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}}
}

// newClock is a manual clock for Config.NowFunc.
func newClock() *testkit.Clock { return testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

// recv receives from ch within waitLimit or fails.
func recv[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitLimit):
		t.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		panic("unreachable")
	}
}

// waitIdle waits, bounded, until no update is pending on srv.
func waitIdle(t *testing.T, srv *telegramtest.Server, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
