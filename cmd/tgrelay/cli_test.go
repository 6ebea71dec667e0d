package main

// Tests of the command line as a new user meets it: the real binary, its
// exit codes, its output and the files it leaves.

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// runBin runs the binary with args and env (added to a clean environment)
// and returns its stdout, stderr and exit code.
func runBin(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, tgrelayBinary(t), args...)
	cmd.Env = append(childEnv("HOME="+t.TempDir()), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// apiRecorder is a Bot API root that counts the requests it gets.
func apiRecorder(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		http.Error(w, `{"ok":false,"error_code":500,"description":"unexpected"}`, 500)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

func TestCLISendMalformedTokenExitsAsHelpSays(t *testing.T) {
	t.Parallel()
	help, _, code := runBin(t, nil, "help", "send")
	if code != 0 || !strings.Contains(help, "Exit 2 is a usage error") || !strings.Contains(help, "<bot id>:<secret>") {
		t.Fatalf("help send (exit %d) does not document the malformed token's exit code:\n%s", code, help)
	}
	api, calls := apiRecorder(t)
	for _, token := range []string{"not-a-token", "abc:def", "123456:", ":secretpart", "123456:has space", "123456:ok/slash"} {
		out, errOut, code := runBin(t, []string{"TGRELAY_TOKEN=" + token}, "send", "--api-root", api, "--chat", "1", "--text", "hi")
		if code != exitUsage || !strings.Contains(errOut, "malformed") {
			t.Errorf("token %q: exit %d, stderr %q; want %d naming a malformed token", token, code, errOut, exitUsage)
		}
		if strings.Contains(out+errOut, token) && len(token) > 3 {
			t.Errorf("token %q echoed:\n%s%s", token, out, errOut)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Errorf("the Bot API got %d request(s) for malformed tokens, want none", n)
	}
}

func TestCLISendNotDispatchedNamesItsCause(t *testing.T) {
	t.Parallel()
	token := "123456:" + strings.Repeat("A", 35)
	send := func(env []string, args ...string) (string, string, int) {
		return runBin(t, append([]string{"TGRELAY_TOKEN=" + token}, env...), append([]string{"send", "--chat", "1", "--text", "hi"}, args...)...)
	}
	wantNotDispatched := func(name, out, errOut string, code int, cause string) {
		t.Helper()
		if code != exitSendNotDispatched || !strings.Contains(out, cause) || !strings.Contains(errOut, cause) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want %d naming %q", name, code, out, errOut, exitSendNotDispatched, cause)
		}
	}

	t.Run("no such host", func(t *testing.T) {
		t.Parallel()
		const host = "no-such-host.invalid"
		if _, err := net.DefaultResolver.LookupHost(t.Context(), host); !isNotFound(err) {
			t.Skipf("this machine's resolver does not answer NXDOMAIN for %s (%v)", host, err)
		}
		out, errOut, code := send(nil, "--api-root", "http://"+host, "--proxy", "none")
		wantNotDispatched("no such host", out, errOut, code, "no such host "+host)
	})

	t.Run("certificate not trusted, then trusted with --ca-file", func(t *testing.T) {
		t.Parallel()
		srv := telegramtest.NewUnstartedServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}})
		srv.StartTLS()
		t.Cleanup(srv.Close)
		out, errOut, code := send(nil, "--api-root", srv.URL)
		wantNotDispatched("self-signed", out, errOut, code, "certificate is not trusted")
		ca := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
			t.Fatal(err)
		}
		u := srv.NewUser("Ada")
		c, err := srv.NewPrivateChat(u)
		if err != nil {
			t.Fatal(err)
		}
		out, errOut, code = runBin(t, []string{"TGRELAY_TOKEN=" + srv.Token}, "send", "--api-root", srv.URL, "--ca-file", ca,
			"--chat", strconv.FormatInt(c.ID, 10), "--text", "hi")
		if code != exitSendAnswered || !strings.Contains(out, "answered: message_id") {
			t.Errorf("with --ca-file: exit %d, stdout %q, stderr %q; want answered", code, out, errOut)
		}
	})

	t.Run("proxy answered 502", func(t *testing.T) {
		t.Parallel()
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadGateway)
		}))
		t.Cleanup(proxy.Close)
		out, errOut, code := send(nil, "--api-root", "http://api.example.invalid", "--proxy", proxy.URL)
		wantNotDispatched("proxy 502", out, errOut, code, "the proxy answered 502 Bad Gateway")
	})

	t.Run("SOCKS proxy from the environment", func(t *testing.T) {
		t.Parallel()
		out, errOut, code := send([]string{"HTTPS_PROXY=socks5://127.0.0.1:1080", "HTTP_PROXY=socks5://127.0.0.1:1080"}, "--api-root", "http://api.example.invalid")
		wantNotDispatched("socks", out, errOut, code, "SOCKS proxies are not")
		_, errOut, code = send(nil, "--proxy", "socks5://127.0.0.1:1080")
		if code != exitUsage || !strings.Contains(errOut, "--proxy: SOCKS proxies are not supported") {
			t.Errorf("--proxy socks5://: exit %d, stderr %q; want a usage error naming --proxy", code, errOut)
		}
	})
}

func isNotFound(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) && dns.IsNotFound
}

func TestCLIFlagErrorsNameTheFlag(t *testing.T) {
	t.Parallel()
	token := "TGRELAY_TOKEN=123456:" + strings.Repeat("A", 35)
	for _, tc := range []struct {
		env  []string
		args []string
		want string
		code int // 0: exitUsage
	}{
		{[]string{token}, []string{"send", "--chat", "1", "--text", "x", "--api-root", "not a url"}, "--api-root is not a base URL", 0},
		{[]string{token}, []string{"send", "--chat", "1", "--text", "x", "--timeout", "0s"}, "--timeout is 0s", 0},
		{[]string{token}, []string{"send", "--chat", "1", "--text", "x", "--ca-file", "/nonexistent/ca.pem"}, "--ca-file", exitError},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--api-root", "ftp://x", "--token", "123456:" + strings.Repeat("A", 35), "--secret", "s"}, "--api-root is not a base URL", 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--poll", "--db", "postgres://127.0.0.1:1/x", "--api-root", "http://user:pw@127.0.0.1:1", "--token", "123456:" + strings.Repeat("A", 35)}, "--api-root is not a base URL", 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--poll", "--db", "postgres://127.0.0.1:1/x", "--api-root", "http://127.0.0.1:1/?x=1", "--token", "123456:" + strings.Repeat("A", 35)}, "--api-root is not a base URL", 0},
		{[]string{token}, []string{"send", "--chat", "1", "--text", "x", "--api-root", "http://user:pw@127.0.0.1:1"}, "--api-root is not a base URL", 0},
		{[]string{token}, []string{"webhook", "check", "--url", "https://bot.example/hook", "--secret", "s", "--api-root", "http://127.0.0.1:1/#x"}, "--api-root is not a base URL", 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--token", "123456:" + strings.Repeat("A", 35), "--secret", "s", "--proxy", "socks5://h:1"}, "--proxy: SOCKS", 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--token", "bad", "--secret", "s"}, "bot token", 0}, // the relay (botapi.ValidToken) or checkToken refuses it, whichever runs first
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--max-attempts", "-1"}, "--max-attempts is -1", 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--db", "postgres://127.0.0.1:1/x", "--token", "123456:" + strings.Repeat("A", 35), "--secret", "s", "--public-url", "http://bot.example/hook"}, "--public-url is not an address Telegram delivers to: a webhook address must be an https URL", 0},
		{[]string{token}, []string{"webhook", "set", "--url", "http://bot.example/hook", "--secret", "s", "--api-root", "http://127.0.0.1:1"}, "", exitError}, // a local Bot API server may take http://
		{[]string{token}, []string{"webhook", "set", "--url", "http://bot.example/hook", "--secret", "s", "--api-root", "https://api.telegram.org/"}, "--url is not an address Telegram delivers to: a webhook address must be an https URL", 0},
		{[]string{token}, []string{"webhook", "set", "--url", "https://bot.example:8080/hook", "--secret", "s"}, "--url is not an address Telegram delivers to: Telegram delivers webhooks only to ports", 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--no-gateway", "--gateway-listen", "127.0.0.1:0"}, "--gateway-listen is set, but the gateway is disabled", 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--retry-order", "sideways"}, `--retry-order is "sideways": want in-line or out-of-line`, 0},
		{nil, []string{"serve", "--forward", "http://127.0.0.1:1/", "--retry-order", "out-of-line", "--chat-order", "strict", "--db", "postgres://127.0.0.1:1/x"}, "--retry-order contradicts", 0},
	} {
		if tc.code == 0 {
			tc.code = exitUsage
		}
		_, errOut, code := runBin(t, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d with %q", tc.args, code, errOut, tc.code, tc.want)
		}
		for _, goName := range []string{"APIRoot", "Config.", "MaxAttempts", "Forward.", "ResponseTimeout"} {
			if strings.Contains(errOut, goName) {
				t.Errorf("%v: stderr names a Go field (%s): %q", tc.args, goName, errOut)
			}
		}
	}
}

func TestCLIHelp(t *testing.T) {
	t.Parallel()
	out, _, code := runBin(t, nil, "help")
	if code != 0 {
		t.Fatalf("help exit %d", code)
	}
	for _, c := range commands() {
		if !strings.Contains(out, "\t"+c.name+" ") {
			t.Errorf("help does not list %s:\n%s", c.name, out)
		}
	}
	for _, name := range []string{"help", "version"} {
		if !strings.Contains(out, "\t"+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
		hout, herr, code := runBin(t, nil, "help", name)
		if code != 0 || !strings.Contains(hout, "Usage: tgrelay "+name) {
			t.Errorf("help %s: exit %d, stdout %q, stderr %q", name, code, hout, herr)
		}
	}
	for _, cmd := range []string{"send", "serve"} {
		hout, _, _ := runBin(t, nil, "help", cmd)
		for _, flag := range []string{"-proxy", "-ca-file", "-timeout"} {
			if !strings.Contains(hout, flag) {
				t.Errorf("help %s does not document %s", cmd, flag)
			}
		}
	}
}

func TestCLIAdminCommandsRefuseAMissingDatabase(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "typo.db")
	for _, args := range [][]string{
		{"updates", "ls", "--db", db},
		{"updates", "exhausted", "--db", db},
		{"updates", "show", "1", "--db", db},
	} {
		_, errOut, code := runBin(t, nil, args...)
		if code != exitUsage || !strings.Contains(errOut, db+" does not exist") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error naming the missing file", args, code, errOut)
		}
		if _, err := os.Stat(db); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%v created %s", args, db)
		}
	}
}

func TestCLIServeSaysOnceItCreatedTheDatabase(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "relay.db")
	ep := newBotEndpoint(t, nil)
	args := []string{"--db", db, "--listen", "127.0.0.1:0", "--forward", ep.url()}
	for i, want := range []int{1, 0} {
		r := startServeProc(t, nil, args...)
		if err := r.stop(t); err != nil {
			t.Fatalf("serve exit: %v\n%s", err, r.stderr)
		}
		ls := r.logLines("serve: created a new SQLite database")
		if len(ls) != want || (want == 1 && ls[0]["path"] != db) {
			t.Errorf("start %d: creation lines %v, want %d naming %s", i+1, ls, want, db)
		}
	}
}
