package main

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

func TestSandboxStrictWebhook(t *testing.T) {
	t.Parallel()
	var got atomic.Int64
	hook := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { got.Add(1) }))
	hook.Config.ErrorLog = log.New(io.Discard, "", 0)
	hook.StartTLS() // a certificate for example.com, its own root
	t.Cleanup(hook.Close)
	caFile := filepath.Join(t.TempDir(), "hook-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: hook.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	stdout, stderr := newLineWriter(), newLineWriter()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"sandbox", "-addr", "127.0.0.1:0", "-no-limits", "-webhook-backoff", "10ms",
			"-strict-webhook", "-webhook-ca-file", caFile, "-webhook-connect", "example.com:8443=" + hook.Listener.Addr().String()}, stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(waitLimit):
			t.Error("sandbox did not stop")
		}
	})
	base, token := sandboxInfo(t, stdout.lines)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	var ans struct {
		OK          bool   `json:"ok"`
		Description string `json:"description"`
	}
	for url, want := range map[string]string{
		"http://example.com:8443/hook":  telegramtest.ErrMsgNotHTTPS,
		"https://example.com:8080/hook": telegramtest.ErrMsgPort,
	} {
		ans.Description = ""
		postJSON(t, c, base+"/bot"+token+"/setWebhook", map[string]any{"url": url}, &ans)
		if ans.OK || ans.Description != "Bad Request: "+want {
			t.Errorf("setWebhook %s answered %+v, want %q", url, ans, want)
		}
	}
	postJSON(t, c, base+"/bot"+token+"/setWebhook", map[string]any{"url": "https://example.com:8443/hook"}, &ans)
	if !ans.OK {
		t.Fatalf("setWebhook answered %+v", ans)
	}
	var user, chat struct {
		ID int64 `json:"id"`
	}
	postJSON(t, c, base+"/_sandbox/users", map[string]any{"first_name": "Ada"}, &user)
	postJSON(t, c, base+"/_sandbox/chats", map[string]any{"type": "private", "user_id": user.ID}, &chat)
	postJSON(t, c, base+"/_sandbox/send", map[string]any{"chat_id": chat.ID, "user_id": user.ID, "text": "hi"}, nil)
	deadline := time.Now().Add(waitLimit)
	for got.Load() == 0 {
		if time.Now().After(deadline) {
			var info map[string]any
			getJSON(t, c, base+"/bot"+token+"/getWebhookInfo", &info)
			t.Fatalf("no delivery over verified HTTPS; getWebhookInfo %v", info)
		}
		time.Sleep(5 * time.Millisecond) // the hook counts; there is no event to wait on
	}

	// The flags are refused without -strict-webhook.
	var errOut strings.Builder
	if code := run(t.Context(), []string{"sandbox", "-webhook-ca-file", caFile}, io.Discard, &errOut); code != exitUsage || !strings.Contains(errOut.String(), "need -strict-webhook") {
		t.Errorf("exit %d, stderr %q", code, errOut.String())
	}
}
