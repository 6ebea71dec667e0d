package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// TestGatewaySmall runs the gateway scenario at a tiny size, with the
// log-shaped journal floor: every call in every mode, the bare reverse
// proxy included, must succeed (the scenario fails on any), and the RESULT
// line must carry the ratios against the proxy.
func TestGatewaySmall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := runGateway(ctx, []string{"-calls", "40", "-latency-calls", "8", "-workers", "4", "-rounds", "1", "-latency", "5ms", "-floor-log"}, &out)
	if err != nil {
		t.Fatalf("gateway: %v\n%s", err, out.String())
	}
	for _, row := range []string{"reverse proxy", "journal log floor", "log-shaped journal floor (no row rewritten): "} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("no %q in the output:\n%s", row, out.String())
		}
	}
	var result string
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "RESULT gateway ") {
			result = line
		}
	}
	for _, key := range []string{" calls_per_update=2 ", " proxy_per_s=", " plain_vs_proxy=", " identity_vs_proxy=", " proxy_lat_per_s=", " plain_vs_proxy_lat=", " identity_vs_proxy_lat="} {
		if !strings.Contains(result, key) {
			t.Errorf("RESULT has no%s: %q", key, result)
		}
	}
}
