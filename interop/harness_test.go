package interop

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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

// Bounds of the harness: every wait fails loudly when reached.
const (
	waitLimit    = 20 * time.Second
	installLimit = 5 * time.Minute
	stopLimit    = 5 * time.Second
)

var (
	binDir    string
	buildOnce sync.Once
	buildPath string
	buildErr  error

	modulesOnce sync.Once
	modulesDir  string
	modulesErr  error
)

func TestMain(m *testing.M) {
	var err error
	if binDir, err = os.MkdirTemp("", "tgrelay-interop-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(binDir)
	os.Exit(code)
}

// tgrelay builds the binary once per test run.
func tgrelay(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildPath = filepath.Join(binDir, "tgrelay")
		out, err := exec.Command("go", "build", "-o", buildPath, "github.com/tgrelay/tgrelay/cmd/tgrelay").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildPath
}

// requireNode skips the test loudly when node, npm or the frameworks are
// not to be had, or fails it when TGRELAY_REQUIRE_NODE=1. It returns the
// directory holding node_modules.
func requireNode(t *testing.T) string {
	t.Helper()
	modulesOnce.Do(func() { modulesDir, modulesErr = installFrameworks() })
	if modulesErr != nil {
		if os.Getenv("TGRELAY_REQUIRE_NODE") == "1" {
			t.Fatalf("TGRELAY_REQUIRE_NODE=1 but the Node.js frameworks are unavailable: %v", modulesErr)
		}
		t.Skipf("SKIPPING the grammY/Telegraf interop tests: %v (set TGRELAY_REQUIRE_NODE=1 to make this a failure; .ci/run does)", modulesErr)
	}
	return modulesDir
}

// installFrameworks finds or installs the locked packages of
// testdata/bots, once per lock file.
func installFrameworks() (string, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return "", fmt.Errorf("node is not installed")
	}
	if dir := os.Getenv("TGRELAY_NODE_MODULES"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", "grammy", "package.json")); err != nil {
			return "", fmt.Errorf("TGRELAY_NODE_MODULES=%s has no node_modules/grammy (run npm ci there): %v", dir, err)
		}
		return dir, nil
	}
	if _, err := exec.LookPath("npm"); err != nil {
		return "", fmt.Errorf("npm is not installed")
	}
	lock, err := os.ReadFile("testdata/bots/package-lock.json")
	if err != nil {
		return "", err
	}
	pkg, err := os.ReadFile("testdata/bots/package.json")
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(append(pkg, lock...))
	dir := filepath.Join(cache, "tgrelay-interop", hex.EncodeToString(sum[:6]))
	marker := filepath.Join(dir, ".installed")
	if _, err := os.Stat(marker); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "package.json"), pkg, 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "package-lock.json"), lock, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), installLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund", "--silent")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in %s failed (offline?): %v\n%s", dir, err, out)
	}
	return dir, os.WriteFile(marker, nil, 0o644)
}

// proc is a child process whose output the test reads.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer // stdout and stderr
	// grew is closed and replaced whenever out grows; exited is closed
	// when both outputs are read to their end.
	grew   chan struct{}
	exited chan struct{}
}

// start runs a process until the test ends; its output is logged when the
// test fails.
func start(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, grew: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(args[0], args[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var readers sync.WaitGroup
	for _, r := range []io.Reader{stdout, stderr} {
		readers.Go(func() {
			sc := bufio.NewScanner(r)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			for sc.Scan() {
				line := sc.Text()
				p.mu.Lock()
				p.out.WriteString(line + "\n")
				close(p.grew)
				p.grew = make(chan struct{})
				p.mu.Unlock()
			}
		})
	}
	go func() {
		readers.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		exited := make(chan struct{})
		go func() { p.cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(stopLimit):
			p.cmd.Process.Kill()
			<-exited
		}
		<-p.exited
		if t.Failed() {
			t.Logf("--- output of %s:\n%s", name, p.output())
		}
	})
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine returns the first output line with prefix, within waitLimit.
func (p *proc) waitLine(t *testing.T, prefix string) string {
	t.Helper()
	return p.waitMatch(t, prefix, func(line string) bool { return strings.HasPrefix(line, prefix) })
}

// waitContains returns the first output line containing s, within
// waitLimit.
func (p *proc) waitContains(t *testing.T, s string) string {
	t.Helper()
	return p.waitMatch(t, s, func(line string) bool { return strings.Contains(line, s) })
}

func (p *proc) waitMatch(t *testing.T, what string, match func(string) bool) string {
	t.Helper()
	timeout := time.After(waitLimit)
	for exited := false; ; {
		p.mu.Lock()
		out, grew := p.out.String(), p.grew
		p.mu.Unlock()
		for line := range strings.Lines(out) {
			if line = strings.TrimSuffix(line, "\n"); match(line) {
				return line
			}
		}
		if exited {
			t.Fatalf("%s exited before printing %q:\n%s", p.name, what, out)
		}
		select {
		case <-grew:
		case <-p.exited:
			exited = true // scan what it printed last, once more
		case <-timeout:
			t.Fatalf("%s did not print %q within %v:\n%s", p.name, what, waitLimit, p.output())
		}
	}
}

// sandbox is a running `tgrelay sandbox` and its control API.
type sandbox struct {
	url, token string
	client     *http.Client
}

func startSandbox(t *testing.T) *sandbox {
	t.Helper()
	p := start(t, "tgrelay sandbox", nil, tgrelay(t), "sandbox", "-addr", "127.0.0.1:0")
	sb := &sandbox{client: &http.Client{Timeout: waitLimit + 5*time.Second}}
	sb.url = strings.TrimSpace(strings.TrimPrefix(p.waitLine(t, "Bot API:"), "Bot API:"))
	sb.token = strings.TrimSpace(strings.TrimPrefix(p.waitLine(t, "Token:"), "Token:"))
	t.Cleanup(sb.client.CloseIdleConnections)
	return sb
}

// control calls the sandbox's control API; a non-200 answer fails the test.
func (sb *sandbox) control(t *testing.T, method, path string, body, out any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequestWithContext(t.Context(), method, sb.url+telegramtest.ControlPrefix+path, r)
	resp, err := sb.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

func (sb *sandbox) user(t *testing.T, name string) (telegramtest.User, telegramtest.Chat) {
	t.Helper()
	var u telegramtest.User
	sb.control(t, "POST", "users", map[string]any{"first_name": name}, &u)
	var c telegramtest.Chat
	sb.control(t, "POST", "chats", map[string]any{"type": "private", "user_id": u.ID}, &c)
	return u, c
}

type update struct {
	UpdateID      int64  `json:"update_id"`
	MessageID     int64  `json:"message_id"`
	InlineQueryID string `json:"inline_query_id"`
}

func (sb *sandbox) send(t *testing.T, chat telegramtest.Chat, u telegramtest.User, msg map[string]any) update {
	t.Helper()
	body := map[string]any{"chat_id": chat.ID, "user_id": u.ID}
	for k, v := range msg {
		body[k] = v
	}
	var upd update
	sb.control(t, "POST", "send", body, &upd)
	return upd
}

// waitMessages waits (on the sandbox's signal) until chat has n messages
// from the bot and returns them.
func (sb *sandbox) waitMessages(t *testing.T, chat int64, n int) []telegramtest.Message {
	t.Helper()
	var msgs []telegramtest.Message
	sb.control(t, "POST", "wait/messages", map[string]any{"chat_id": chat, "count": n, "timeout_ms": waitLimit.Milliseconds()}, &msgs)
	return msgs
}
