package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
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
