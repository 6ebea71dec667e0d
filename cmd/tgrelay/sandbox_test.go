package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

const waitLimit = 10 * time.Second

// lineWriter is an io.Writer that keeps everything written and signals
// each complete line.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
	part  string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 100)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	w.part += string(p)
	for {
		i := strings.IndexByte(w.part, '\n')
		if i < 0 {
			break
		}
		select {
		case w.lines <- w.part[:i]:
		default:
		}
		w.part = w.part[i+1:]
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// sandboxInfo reads the URL and token lines the sandbox prints.
func sandboxInfo(t *testing.T, lines <-chan string) (url, token string) {
	t.Helper()
	deadline := time.After(waitLimit)
	for url == "" || token == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("sandbox output ended before its URL and token")
			}
			if v, ok := strings.CutPrefix(l, "Bot API:"); ok {
				url = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(l, "Token:"); ok {
				token = strings.TrimSpace(v)
			}
		case <-deadline:
			t.Fatalf("sandbox printed no URL and token within %v", waitLimit)
		}
	}
	return url, token
}

func postJSON(t *testing.T, c *http.Client, url string, body any, out any) int {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := c.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
	}
	return resp.StatusCode
}

func getJSON(t *testing.T, c *http.Client, url string, out any) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

func TestSandboxInProcess(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout, stderr := newLineWriter(), newLineWriter()
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, []string{"sandbox", "-addr", "127.0.0.1:0"}, stdout, stderr) }()
	base, token := sandboxInfo(t, stdout.lines)
	c := &http.Client{}
	defer c.CloseIdleConnections()

	// Control API: a user, a private chat, a command.
	var user struct {
		ID int64 `json:"id"`
	}
	postJSON(t, c, base+"/_sandbox/users", map[string]any{"first_name": "Ada"}, &user)
	var chat struct {
		ID int64 `json:"id"`
	}
	postJSON(t, c, base+"/_sandbox/chats", map[string]any{"type": "private", "user_id": user.ID}, &chat)
	var upd struct {
		UpdateID int64 `json:"update_id"`
	}
	if code := postJSON(t, c, base+"/_sandbox/command", map[string]any{"chat_id": chat.ID, "user_id": user.ID, "command": "start"}, &upd); code != 200 || upd.UpdateID == 0 {
		t.Fatalf("command = %d %+v", code, upd)
	}

	// Bot API: the bot polls and answers.
	var updates struct {
		OK     bool `json:"ok"`
		Result []struct {
			UpdateID int64 `json:"update_id"`
			Message  struct {
				Text string `json:"text"`
			} `json:"message"`
		} `json:"result"`
	}
	getJSON(t, c, base+"/bot"+token+"/getUpdates", &updates)
	if !updates.OK || len(updates.Result) != 1 || updates.Result[0].Message.Text != "/start" {
		t.Fatalf("getUpdates = %+v", updates)
	}
	var sent struct {
		OK bool `json:"ok"`
	}
	postJSON(t, c, base+"/bot"+token+"/sendMessage", map[string]any{"chat_id": chat.ID, "text": "Hello Ada"}, &sent)
	if !sent.OK {
		t.Fatal("sendMessage failed")
	}
	// Rate limits are on by default: a short burst per chat passes, then
	// sends are refused with 429.
	for i := range telegramtest.DefaultChatLimitCount - 1 {
		postJSON(t, c, base+"/bot"+token+"/sendMessage", map[string]any{"chat_id": chat.ID, "text": fmt.Sprint("again ", i)}, &sent)
		if !sent.OK {
			t.Fatalf("send %d of the burst failed", i+2)
		}
	}
	var limited struct {
		ErrorCode int `json:"error_code"`
	}
	postJSON(t, c, base+"/bot"+token+"/sendMessage", map[string]any{"chat_id": chat.ID, "text": "one too many"}, &limited)
	if limited.ErrorCode != 429 {
		t.Errorf("send past the burst = %d, want 429", limited.ErrorCode)
	}

	// A fault armed through the control API.
	postJSON(t, c, base+"/_sandbox/faults", map[string]any{"method": "getMe", "kind": "server_error"}, nil)
	resp, err := c.Get(base + "/bot" + token + "/getMe")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("getMe with a fault armed = %d", resp.StatusCode)
	}

	var msgs []struct {
		ChatID int64  `json:"chat_id"`
		Text   string `json:"text"`
	}
	getJSON(t, c, base+"/_sandbox/messages", &msgs)
	if len(msgs) != telegramtest.DefaultChatLimitCount || msgs[0].Text != "Hello Ada" || msgs[0].ChatID != chat.ID {
		t.Errorf("ledger = %+v", msgs)
	}

	c.CloseIdleConnections()
	cancel()
	select {
	case code := <-exited:
		if code != exitOK {
			t.Errorf("exit code = %d, stderr %q", code, stderr.String())
		}
	case <-time.After(waitLimit):
		t.Fatal("sandbox did not stop after its context was cancelled")
	}
	if !strings.Contains(stdout.String(), "sandbox stopped") {
		t.Errorf("stdout = %q", stdout.String())
	}
}

func TestSandboxTLS(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	certFile := filepath.Join(t.TempDir(), "cert.pem")
	stdout := newLineWriter()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"sandbox", "-addr", "127.0.0.1:0", "-tls", "-cert", certFile}, stdout, io.Discard)
	}()
	base, token := sandboxInfo(t, stdout.lines)
	if !strings.HasPrefix(base, "https://") {
		t.Fatalf("URL = %q", base)
	}
	pemBytes, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	c := tlsClient(t, pemBytes)
	defer c.CloseIdleConnections()
	var me struct {
		OK bool `json:"ok"`
	}
	getJSON(t, c, base+"/bot"+token+"/getMe", &me)
	if !me.OK {
		t.Error("getMe over TLS failed")
	}
	c.CloseIdleConnections()
	cancel()
	if code := <-exited; code != exitOK {
		t.Errorf("exit code = %d", code)
	}
}

// TestSandboxBinary builds the real binary and runs `tgrelay sandbox`
// until SIGINT.
func TestSandboxBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "tgrelay")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), bin, "sandbox", "-addr", "127.0.0.1:0", "-no-limits")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	var rest bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			rest.WriteString(sc.Text() + "\n")
			lines <- sc.Text()
		}
	}()
	base, token := sandboxInfo(t, lines)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	var me struct {
		OK     bool `json:"ok"`
		Result struct {
			IsBot bool `json:"is_bot"`
		} `json:"result"`
	}
	getJSON(t, c, base+"/bot"+token+"/getMe", &me)
	if !me.OK || !me.Result.IsBot {
		t.Errorf("getMe = %+v", me)
	}
	c.CloseIdleConnections()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	<-readDone
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tgrelay sandbox exited with %v; stderr %q", err, stderr.String())
	}
	if !strings.Contains(rest.String(), "sandbox stopped") {
		t.Errorf("stdout = %q", rest.String())
	}
}

func tlsClient(t *testing.T, pemBytes []byte) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemBytes) {
		t.Fatal("the written certificate is not PEM")
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func TestSandboxWebhookFlags(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout := newLineWriter()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"sandbox", "-addr", "127.0.0.1:0", "-webhook-backoff", "1ms", "-webhook-attempts", "2"}, stdout, io.Discard)
	}()
	base, token := sandboxInfo(t, stdout.lines)
	c := &http.Client{}
	defer c.CloseIdleConnections()

	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusInternalServerError) // always fails: given up after 2 attempts
	}))
	defer hook.Close()
	var ok struct {
		OK bool `json:"ok"`
	}
	postJSON(t, c, base+"/bot"+token+"/setWebhook", map[string]any{"url": hook.URL}, &ok)
	if !ok.OK {
		t.Fatal("setWebhook failed")
	}
	var user, chat struct {
		ID int64 `json:"id"`
	}
	postJSON(t, c, base+"/_sandbox/users", map[string]any{"first_name": "Ada"}, &user)
	postJSON(t, c, base+"/_sandbox/chats", map[string]any{"type": "private", "user_id": user.ID}, &chat)
	postJSON(t, c, base+"/_sandbox/send", map[string]any{"chat_id": chat.ID, "user_id": user.ID, "text": "hi"}, nil)

	var deliveries []struct {
		Attempt int  `json:"attempt"`
		Status  int  `json:"status"`
		GaveUp  bool `json:"gave_up"`
	}
	deadline := time.Now().Add(waitLimit)
	for len(deliveries) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("deliveries = %+v after %v, want 2 attempts", deliveries, waitLimit)
		}
		time.Sleep(5 * time.Millisecond) // polling the control API; it has no push
		getJSON(t, c, base+"/_sandbox/deliveries", &deliveries)
	}
	if deliveries[0].Status != 500 || deliveries[1].Attempt != 2 || !deliveries[1].GaveUp {
		t.Errorf("deliveries = %+v, want two 500s, the second given up (-webhook-attempts 2)", deliveries)
	}
	c.CloseIdleConnections()
	cancel()
	if code := <-exited; code != exitOK {
		t.Errorf("exit code = %d", code)
	}
}

// TestSandboxDeadlineFlags: -inline-deadline sets an inline query's
// deadline (read back from /_sandbox/queries, no waiting), and a negative
// one is a usage error.
func TestSandboxDeadlineFlags(t *testing.T) {
	t.Parallel()
	if code := run(t.Context(), []string{"sandbox", "-addr", "127.0.0.1:0", "-inline-deadline", "-1s"}, io.Discard, io.Discard); code != exitUsage {
		t.Errorf("a negative -inline-deadline: exit %d, want %d", code, exitUsage)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout := newLineWriter()
	exited := make(chan int, 1)
	go func() {
		exited <- run(ctx, []string{"sandbox", "-addr", "127.0.0.1:0", "-inline-deadline", "1500ms", "-precheckout-deadline", "0"}, stdout, io.Discard)
	}()
	base, _ := sandboxInfo(t, stdout.lines)
	c := &http.Client{}
	defer c.CloseIdleConnections()
	var user struct {
		ID int64 `json:"id"`
	}
	postJSON(t, c, base+"/_sandbox/users", map[string]any{"first_name": "Ada"}, &user)
	postJSON(t, c, base+"/_sandbox/inline", map[string]any{"user_id": user.ID, "query": "cats"}, nil)
	var qs []struct {
		Kind     string    `json:"kind"`
		Asked    time.Time `json:"asked"`
		Deadline time.Time `json:"deadline"`
		State    string    `json:"state"`
	}
	getJSON(t, c, base+"/_sandbox/queries", &qs)
	if len(qs) != 1 || qs[0].Kind != "inline_query" || qs[0].Deadline.Sub(qs[0].Asked) != 1500*time.Millisecond {
		t.Errorf("queries = %+v; want one inline query with a 1.5 s deadline", qs)
	}
	c.CloseIdleConnections()
	cancel()
	if code := <-exited; code != exitOK {
		t.Errorf("exit code = %d", code)
	}
}
