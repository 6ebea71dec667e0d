package intake_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	attempt := func(context.Context, intake.Update, intake.Attempt) error { return nil }
	valid := func() intake.Config { return intake.Config{Store: memstore.New(), Handler: nop} }
	for _, tc := range []struct {
		name string
		edit func(*intake.Config)
		want string // "" means valid
	}{
		{"zero values take defaults", func(c *intake.Config) {}, ""},
		{"attempt handler", func(c *intake.Config) { c.Handler, c.AttemptHandler = nil, attempt }, ""},
		{"no store", func(c *intake.Config) { c.Store = nil }, "Config.Store"},
		{"no handler", func(c *intake.Config) { c.Handler = nil }, "exactly one of Config.Handler and Config.AttemptHandler"},
		{"two handlers", func(c *intake.Config) { c.AttemptHandler = attempt }, "exactly one of Config.Handler and Config.AttemptHandler"},
		{"negative MaxAttempts", func(c *intake.Config) { c.MaxAttempts = -1 }, "Config.MaxAttempts is -1, want 1 to 1000"},
		{"too many MaxAttempts", func(c *intake.Config) { c.MaxAttempts = intake.MaxMaxAttempts + 1 }, "Config.MaxAttempts"},
		{"negative LeaseDuration", func(c *intake.Config) { c.LeaseDuration = -time.Second }, "Config.LeaseDuration is -1s, want 10ms to 24h0m0s"},
		{"tiny LeaseDuration", func(c *intake.Config) { c.LeaseDuration = time.Millisecond }, "Config.LeaseDuration"},
		{"huge LeaseDuration", func(c *intake.Config) { c.LeaseDuration = 25 * time.Hour }, "Config.LeaseDuration"},
		{"negative PendingGrace", func(c *intake.Config) { c.PendingGrace = -1 }, "Config.PendingGrace"},
		{"huge PendingGrace", func(c *intake.Config) { c.PendingGrace = 25 * time.Hour }, "Config.PendingGrace"},
		{"negative SweepInterval", func(c *intake.Config) { c.SweepInterval = -1 }, "Config.SweepInterval"},
		{"tiny SweepInterval", func(c *intake.Config) { c.SweepInterval = time.Microsecond }, "Config.SweepInterval"},
		{"negative Retention", func(c *intake.Config) { c.Retention = -time.Hour }, "Config.Retention"},
		{"huge Retention", func(c *intake.Config) { c.Retention = intake.MaxRetention + 1 }, "Config.Retention"},
		{"negative MaxConcurrent", func(c *intake.Config) { c.MaxConcurrent = -2 }, "Config.MaxConcurrent is -2"},
		{"huge MaxConcurrent", func(c *intake.Config) { c.MaxConcurrent = intake.MaxMaxConcurrent + 1 }, "Config.MaxConcurrent"},
		{"negative PageSize", func(c *intake.Config) { c.PageSize = -1 }, "Config.PageSize"},
		{"huge PageSize", func(c *intake.Config) { c.PageSize = intake.MaxPageSize + 1 }, "Config.PageSize"},
		{"negative MaxQueued", func(c *intake.Config) { c.MaxQueued = -1 }, "Config.MaxQueued"},
		{"huge MaxQueued", func(c *intake.Config) { c.MaxQueued = intake.MaxMaxQueued + 1 }, "Config.MaxQueued"},
		{"negative MaxBatch", func(c *intake.Config) { c.MaxBatch = -1 }, "Config.MaxBatch"},
		{"huge MaxBatch", func(c *intake.Config) { c.MaxBatch = intake.MaxMaxBatch + 1 }, "Config.MaxBatch"},
		{"negative HeartbeatTimeout", func(c *intake.Config) { c.HeartbeatTimeout = -1 }, "Config.HeartbeatTimeout"},
		{"huge HeartbeatTimeout", func(c *intake.Config) { c.HeartbeatTimeout = 2 * time.Hour }, "Config.HeartbeatTimeout"},
		{"interval not below timeout", func(c *intake.Config) { c.HeartbeatInterval = intake.DefaultHeartbeatTimeout }, "Config.HeartbeatInterval is 10s, want 1ms up to below HeartbeatTimeout 10s"},
		{"short timeout shortens the default interval", func(c *intake.Config) { c.HeartbeatTimeout = 30 * time.Millisecond }, ""},
		{"no crash budget", func(c *intake.Config) { c.MaxCrashes = -1 }, ""},
		{"negative MaxCrashes", func(c *intake.Config) { c.MaxCrashes = -2 }, "Config.MaxCrashes is -2, want 1 to 1000 (zero means 10), or -1 for no crash budget"},
		{"huge MaxCrashes", func(c *intake.Config) { c.MaxCrashes = intake.MaxMaxCrashes + 1 }, "Config.MaxCrashes"},
		{"process chat order", func(c *intake.Config) { c.ChatOrder = intake.ChatOrderProcess }, ""},
		{"strict chat order", func(c *intake.Config) { c.ChatOrder = intake.ChatOrderStrict }, ""},
		{"unknown chat order", func(c *intake.Config) { c.ChatOrder = "global" }, `Config.ChatOrder is "global", want "process" or "strict"`},
		{"strict chat order and RetryOutOfOrder", func(c *intake.Config) { c.ChatOrder, c.RetryOutOfOrder = intake.ChatOrderStrict, true },
			"Config.RetryOutOfOrder contradicts Config.ChatOrder"},
		{"strict chat order without a ChatOrderStore", func(c *intake.Config) {
			c.ChatOrder, c.Store = intake.ChatOrderStrict, struct{ intake.Store }{memstore.New()}
		}, "requires a ChatOrderStore"},
		{"limits are allowed", func(c *intake.Config) {
			c.MaxAttempts, c.LeaseDuration, c.PendingGrace = intake.MaxMaxAttempts, intake.MinLeaseDuration, intake.MaxPendingGrace
			c.SweepInterval, c.Retention, c.MaxConcurrent = intake.MinSweepInterval, intake.MaxRetention, 1
			c.PageSize, c.MaxQueued, c.MaxBatch = 1, 1, intake.MaxMaxBatch
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := valid()
			tc.edit(&cfg)
			r, err := intake.New(cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("New: %v", err)
			case tc.want == "":
				if err := r.Close(t.Context()); err != nil {
					t.Fatal(err)
				}
			case err == nil:
				t.Fatalf("New accepted the config, want an error containing %q", tc.want)
			case !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "intake: "):
				t.Fatalf("New error %q, want one containing %q", err, tc.want)
			}
		})
	}
}

// New copies the Config: a later change by the caller has no effect.
func TestConfigIsCopied(t *testing.T) {
	t.Parallel()
	called := ""
	cfg := intake.Config{Store: memstore.New(), Handler: func(context.Context, intake.Update) error { called = "first"; return nil }}
	r, err := intake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Handler = func(context.Context, intake.Update) error { called = "second"; return nil }
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	mustAccept(t, r, msg(1, 1), intake.Accepted)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := r.Idle(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if called != "first" {
		t.Fatalf("handler %q ran, want the one configured at New", called)
	}
}
