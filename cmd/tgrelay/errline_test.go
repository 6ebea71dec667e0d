package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/closedport"
)

// TestServeFailureInOneLine: a serve that cannot reach the Bot API says so
// in one line with the flags to check, without the package chain; with
// --log-level debug the chain is in the log.
func TestServeFailureInOneLine(t *testing.T) {
	t.Parallel()
	for _, level := range []string{"info", "debug"} {
		t.Run(level, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), []string{"serve",
				"--token", "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
				"--api-root", "http://" + closedport.Addr(t),
				"--db", filepath.Join(t.TempDir(), "t.db"),
				"--forward", "http://127.0.0.1:1/update",
				"--secret", "s3cr3t",
				"--listen", "127.0.0.1:0",
				"--public-url", "https://bot.example/hook",
				"--log-level", level,
			}, &stdout, &stderr)
			if code != exitError {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitError, stderr.String())
			}
			out := stderr.String()
			var last []string
			for line := range strings.Lines(out) {
				if strings.HasPrefix(line, "tgrelay serve: ") {
					last = append(last, line)
				}
			}
			if len(last) != 1 {
				t.Fatalf("want one 'tgrelay serve:' line, got %d in:\n%s", len(last), out)
			}
			want := "tgrelay serve: claim the webhook: the Bot API was not reached: connection refused\n"
			if last[0] != want {
				t.Errorf("error line %q, want %q", last[0], want)
			}
			if !strings.Contains(out, "Check --api-root, --proxy and --ca-file.") {
				t.Errorf("no hint naming the flags in:\n%s", out)
			}
			chain := strings.Contains(out, "hookowner: ")
			if chain != (level == "debug") {
				t.Errorf("at --log-level %s the package chain shows: %v; want it only at debug:\n%s", level, chain, out)
			}
			if strings.Contains(out, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA") {
				t.Errorf("the token reached stderr:\n%s", out)
			}
		})
	}
}

// TestServePostgresFailureSaysWhy: when PostgreSQL refuses serve's
// connection, the one line says the server's reason, not the refused TLS
// attempt that pgx's default sslmode=prefer makes (and joins) first.
func TestServePostgresFailureSaysWhy(t *testing.T) {
	t.Parallel()
	addr := refusingPostgres(t, "28P01", `password authentication failed for user "bot"`)
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"serve",
		"--db", "postgres://bot:wrong-password@" + addr + "/bot",
		"--forward", "http://127.0.0.1:1/update",
		"--listen", "127.0.0.1:0",
	}, &stdout, &stderr)
	if code != exitError {
		t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitError, stderr.String())
	}
	want := `tgrelay serve: open PostgreSQL store: FATAL: password authentication failed for user "bot" (SQLSTATE 28P01)` + "\n"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr does not have %q:\n%s", want, stderr.String())
	}
}

// refusingPostgres serves PostgreSQL's wire protocol on a loopback port as
// far as refusing every client: it declines TLS, as a server with ssl=off
// does, and answers a startup message with a FATAL error of this code and
// message. It returns the address.
func refusingPostgres(t *testing.T, code, msg string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	const sslRequest = 80877103
	fields := "SFATAL\x00VFATAL\x00C" + code + "\x00M" + msg + "\x00\x00"
	refusal := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(4+len(fields)))
	refusal = append(refusal, fields...)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				for {
					var head [8]byte
					if _, err := io.ReadFull(c, head[:]); err != nil {
						return
					}
					n := binary.BigEndian.Uint32(head[:4])
					if n < 8 || n > 1<<16 {
						return
					}
					if _, err := io.CopyN(io.Discard, c, int64(n-8)); err != nil {
						return
					}
					if binary.BigEndian.Uint32(head[4:]) == sslRequest {
						if _, err := c.Write([]byte{'N'}); err != nil {
							return
						}
						continue
					}
					_, _ = c.Write(refusal)
					return
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// TestAdminCommandFailuresInOneLine: webhook and updates tell a failure as
// serve does, in one line with a hint, without the package chain, which
// --log-level debug adds.
func TestAdminCommandFailuresInOneLine(t *testing.T) {
	t.Parallel()
	const token = "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	corrupt := filepath.Join(t.TempDir(), "corrupt.db")
	if err := os.WriteFile(corrupt, []byte("not a database, but long enough to be read as a header"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		line  string
		hint  string
		chain string
	}{
		{
			name: "webhook",
			args: []string{"webhook", "check", "--url", "https://bot.example/hook", "--secret", "s3cr3t",
				"--token", token, "--api-root", "http://" + closedport.Addr(t)},
			line:  "tgrelay webhook: check the webhook: the Bot API was not reached: connection refused\n",
			hint:  "Check --api-root, --proxy and --ca-file. Run with --log-level debug for the full error.",
			chain: "hookowner: ",
		},
		{
			name:  "updates",
			args:  []string{"updates", "ls", "--db", corrupt},
			line:  "tgrelay updates: open SQLite store " + corrupt + ": file is not a database (26)\n",
			hint:  "Run with --log-level debug for the full error.",
			chain: "sqlitestore: ",
		},
	} {
		for _, level := range []string{"info", "debug"} {
			t.Run(tc.name+"/"+level, func(t *testing.T) {
				t.Parallel()
				code, _, out := runCapture(t, append(tc.args, "--log-level", level)...)
				if code != exitError {
					t.Fatalf("exit code %d, want %d; stderr:\n%s", code, exitError, out)
				}
				var lines []string
				for line := range strings.Lines(out) {
					if strings.HasPrefix(line, "tgrelay "+tc.name+": ") {
						lines = append(lines, line)
					}
				}
				if len(lines) != 1 || lines[0] != tc.line {
					t.Errorf("error lines %q, want [%q]", lines, tc.line)
				}
				if !strings.Contains(out, tc.hint) {
					t.Errorf("no hint %q in:\n%s", tc.hint, out)
				}
				if chain := strings.Contains(out, tc.chain); chain != (level == "debug") {
					t.Errorf("at --log-level %s the package chain shows: %v; want it only at debug:\n%s", level, chain, out)
				}
				if strings.Contains(out, token) || strings.Contains(out, "s3cr3t") {
					t.Errorf("a secret reached stderr:\n%s", out)
				}
			})
		}
	}
}

// TestInOneLineKeepsAnErrorThatWrapsNothing: a message that is one line
// already is not cut at its first colon and repeated.
func TestInOneLineKeepsAnErrorThatWrapsNothing(t *testing.T) {
	t.Parallel()
	err := fmt.Errorf("update %d: no unacknowledged exhaustion with attempt %d", 5, 2)
	if got := inOneLine(err, nil); got != err {
		t.Errorf("inOneLine(%q) = %q, want it unchanged", err, got)
	}
}
