package main

import (
	"bytes"
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
