package transport_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/transport"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		field string
		cfg   transport.Config
	}{
		{"ConnectTimeout", transport.Config{ConnectTimeout: -1}},
		{"AttemptDelay", transport.Config{AttemptDelay: -1}},
		{"AttemptDelay", transport.Config{AttemptDelay: transport.MinAttemptDelay - 1}},
		{"AttemptDelay", transport.Config{AttemptDelay: transport.MaxAttemptDelay + 1}},
		{"ResolutionDelay", transport.Config{ResolutionDelay: -time.Second}},
		{"ResponseTimeout", transport.Config{ResponseTimeout: -time.Second}},
		{"IdleConnTimeout", transport.Config{IdleConnTimeout: -time.Second}},
		{"MaxResponseBytes", transport.Config{MaxResponseBytes: -1}},
		{"MaxRequestBytes", transport.Config{MaxRequestBytes: -1}},
		{"MaxIdleConnsPerHost", transport.Config{MaxIdleConnsPerHost: -1}},
	}
	for _, tc := range cases {
		_, err := transport.New(tc.cfg)
		if ce, ok := errors.AsType[*transport.ConfigError](err); !ok || ce.Field != tc.field {
			t.Errorf("New(%+v) = %v, want a *ConfigError naming %s", tc.cfg, err, tc.field)
		}
		if verr := tc.cfg.Validate(); verr == nil || verr.Error() != err.Error() {
			t.Errorf("Validate(%+v) = %v, want New's %v", tc.cfg, verr, err)
		}
	}
	if _, err := transport.New(transport.Config{}); err != nil {
		t.Errorf("zero Config: %v", err)
	}
	if _, err := transport.NewClient(transport.Config{ConnectTimeout: -1}); err == nil {
		t.Error("NewClient accepted an invalid Config")
	}
}

func TestConfigIsCopied(t *testing.T) {
	t.Parallel()
	srv := newRawServer(t, "tcp", "127.0.0.1:0", serveOK)
	cfg := transport.Config{Proxy: noProxy, MaxResponseBytes: 1 << 20}
	tr, err := transport.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	cfg.MaxResponseBytes = 1 // a later edit must change nothing
	resp, err := send(t.Context(), tr, srv.url())
	if err != nil {
		t.Fatalf("RoundTrip after editing the caller's Config: %v", err)
	}
	resp.Body.Close()
}
