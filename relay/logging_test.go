package relay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
)

func TestFailureReason(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{intake.RetryLater(&forward.StatusError{Kind: "update", Code: 429}, 1), FailHTTP429},
		{&forward.StatusError{Kind: "update", Code: 503}, FailHTTP503},
		{intake.Abandon(&forward.StatusError{Kind: "update", Code: 404}), FailHTTP4xx},
		{&forward.StatusError{Kind: "update", Code: 502}, FailHTTP5xx},
		{&intake.PanicError{Value: "x"}, FailPanic},
		{fmt.Errorf("x: %w", intake.ErrUnparsableBody), FailUnparsable},
		{fmt.Errorf("forward: update to endpoint failed: %w", context.DeadlineExceeded), FailTimeout},
		{fmt.Errorf("forward: %w", context.Canceled), FailCancelled},
		{fmt.Errorf("forward: %w", &net.OpError{Op: "dial", Err: errors.New("connection refused")}), FailConnection},
		{errors.New("something"), FailOther},
	} {
		if got := FailureReason(tc.err); got != tc.want {
			t.Errorf("FailureReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// jsonLines decodes the JSON log lines in buf.
func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestRateLimitedLogBurstThenSuppressedCount(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	log := slog.New(rateLimited(slog.NewJSONHandler(&buf, nil), clock)).With("component", "test")
	for i := range 100 {
		log.Warn("endpoint failed", "i", i)
	}
	log.Info("another message") // its own bucket
	lines := jsonLines(t, &buf)
	if len(lines) != logBurst+1 {
		t.Fatalf("%d lines after 100 of one message and 1 of another, want the burst %d plus 1:\n%s", len(lines), logBurst, buf.String())
	}
	if lines[logBurst]["msg"] != "another message" {
		t.Errorf("a second message was limited by the first's bucket: %v", lines[logBurst])
	}
	if lines[0]["component"] != "test" {
		t.Errorf("attrs of With lost: %v", lines[0])
	}
	// One interval later exactly one more line passes, carrying the count
	// of the lines dropped before it.
	buf.Reset()
	now = now.Add(logEvery)
	log.Warn("endpoint failed", "i", 100)
	log.Warn("endpoint failed", "i", 101)
	lines = jsonLines(t, &buf)
	if len(lines) != 1 || lines[0]["suppressed"] != float64(100-logBurst) || lines[0]["i"] != float64(100) {
		t.Errorf("after %v: %v, want one line with suppressed=%d", logEvery, lines, 100-logBurst)
	}
	// The bucket refills up to the burst, not beyond.
	buf.Reset()
	now = now.Add(100 * logEvery)
	for range 3 * logBurst {
		log.Warn("endpoint failed")
	}
	if lines = jsonLines(t, &buf); len(lines) != logBurst {
		t.Errorf("after a long quiet period %d lines passed, want the burst %d", len(lines), logBurst)
	}
}

func TestRateLimitedLogBoundsItsKeys(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(1_700_000_000, 0)
	h := rateLimited(slog.NewJSONHandler(&buf, nil), func() time.Time { return now })
	log := slog.New(h)
	for i := range 10 * logMaxKeys {
		log.Warn(fmt.Sprintf("message %d", i))
	}
	st := h.(*limitHandler).st
	if n := len(st.keys); n > logMaxKeys+1 {
		t.Errorf("%d buckets after %d distinct messages, want at most %d", n, 10*logMaxKeys, logMaxKeys+1)
	}
	if got := len(jsonLines(t, &buf)); got > logMaxKeys+logBurst {
		t.Errorf("%d lines passed, want at most %d", got, logMaxKeys+logBurst)
	}
}

func TestDemoteInfo(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(demoteInfo{slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})})
	log.Info("per-attempt detail")
	log.Warn("a warning stays")
	lines := jsonLines(t, &buf)
	if len(lines) != 1 || lines[0]["msg"] != "a warning stays" {
		t.Errorf("lines = %v, want only the warning at the Info level", lines)
	}
}
