package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/wire"
)

// TestServeKilledBetweenIntentAndOutcome: the real binary's gateway
// journals a reply's intent and is SIGKILLed before the outcome (a test
// hook stops it there). After a restart, the update's next attempt makes
// the identical call: it is answered unknown from the journal, never sent,
// and the chat holds at most one message.
func TestServeKilledBetweenIntentAndOutcome(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	u, chat := serveAnnChat(t, srv)
	type answer struct {
		status            int
		outcome, replayed string
	}
	var (
		mu      sync.Mutex
		answers []answer
		calls   int
	)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		root := r.Header.Get(wire.HeaderAPIRoot)
		mu.Lock()
		calls++
		mu.Unlock()
		body := fmt.Sprintf(`{"chat_id":%d,"text":"exactly once"}`, chat.ID)
		resp, err := http.Post(root+"/bot"+srv.Token+"/sendMessage", "application/json", bytes.NewBufferString(body))
		if err != nil {
			w.WriteHeader(http.StatusBadGateway) // the relay died mid-call
			return
		}
		resp.Body.Close()
		mu.Lock()
		answers = append(answers, answer{resp.StatusCode, resp.Header.Get(wire.HeaderOutcome), resp.Header.Get(gateway.HeaderReplayed)})
		mu.Unlock()
	}))
	t.Cleanup(app.Close)
	db := filepath.Join(t.TempDir(), "relay.db")
	args := []string{"--token", srv.Token, "--api-root", srv.URL, "--db", db, "--poll", "--poll-timeout", "1s",
		"--forward", app.URL, "--lease", "1s", "--sweep-interval", "100ms", "--backoff-base", "10ms",
		"--pending-grace", "100ms", "--gateway-listen", testkit.FreeAddr(t)}
	r := startServeProc(t, []string{envGatewayStopAfterIntent + "=1"}, args...)
	if _, err := srv.SendText(chat, u, "hi"); err != nil {
		t.Fatal(err)
	}
	serveWaitFor(t, "the gateway to stop after the intent", func() bool {
		return len(r.logLines("gateway: stopped after intent (test hook)")) > 0
	}, r)
	r.kill()

	r = startServeProc(t, nil, args...)
	serveWaitFor(t, "the next attempt's call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(answers) > 0
	}, r)
	mu.Lock()
	got := answers[0]
	mu.Unlock()
	if got.status != gateway.StatusUnknown || got.outcome != "unknown" || got.replayed != "true" {
		t.Errorf("the next attempt's identical call = %+v; want 502 unknown, replayed", got)
	}
	if n := len(srv.MessagesTo(chat.ID)); n > 1 {
		t.Errorf("the chat holds %d messages; want at most one", n)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit: %v", err)
	}
}

// TestServeGatewayStatesItsAnswerBound: the real binary's gateway states
// its answer bound on every answer: with serve's defaults, a minute's wait,
// 30 s for Telegram's answer and 10 s to journal it.
func TestServeGatewayStatesItsAnswerBound(t *testing.T) {
	t.Parallel()
	srv := serveFakeTelegram(t)
	gw := testkit.FreeAddr(t)
	db := filepath.Join(t.TempDir(), "relay.db")
	r := startServeProc(t, nil, "--token", srv.Token, "--api-root", srv.URL, "--db", db, "--poll", "--poll-timeout", "1s",
		"--forward", "http://127.0.0.1:9/unused", "--gateway-listen", gw)
	resp, err := http.Get("http://" + gw + "/bot" + srv.Token + "/getMe")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get(gateway.HeaderCallTimeout) != "100" {
		t.Errorf("getMe through the gateway: %d, %s %q; want 200 and 100", resp.StatusCode, gateway.HeaderCallTimeout, resp.Header.Get(gateway.HeaderCallTimeout))
	}
	if err := r.stop(t); err != nil {
		t.Errorf("serve exit: %v", err)
	}
}
