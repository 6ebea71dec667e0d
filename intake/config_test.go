package intake_test

import (
	"context"
	"errors"
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
		want string // the field path of the *intake.ConfigError; "" means valid
	}{
		{"zero values take defaults", func(c *intake.Config) {}, ""},
		{"attempt handler", func(c *intake.Config) { c.Handler, c.AttemptHandler = nil, attempt }, ""},
		{"no store", func(c *intake.Config) { c.Store = nil }, "Store"},
		{"no handler", func(c *intake.Config) { c.Handler = nil }, "Handler"},
		{"two handlers", func(c *intake.Config) { c.AttemptHandler = attempt }, "Handler"},
		{"negative MaxAttempts", func(c *intake.Config) { c.MaxAttempts = -1 }, "MaxAttempts"},
		{"too many MaxAttempts", func(c *intake.Config) { c.MaxAttempts = intake.MaxMaxAttempts + 1 }, "MaxAttempts"},
		{"negative LeaseDuration", func(c *intake.Config) { c.LeaseDuration = -time.Second }, "LeaseDuration"},
		{"tiny LeaseDuration", func(c *intake.Config) { c.LeaseDuration = time.Millisecond }, "LeaseDuration"},
		{"huge LeaseDuration", func(c *intake.Config) { c.LeaseDuration = 25 * time.Hour }, "LeaseDuration"},
		{"negative PendingGrace", func(c *intake.Config) { c.PendingGrace = -1 }, "PendingGrace"},
		{"huge PendingGrace", func(c *intake.Config) { c.PendingGrace = 25 * time.Hour }, "PendingGrace"},
		{"negative SweepInterval", func(c *intake.Config) { c.SweepInterval = -1 }, "SweepInterval"},
		{"tiny SweepInterval", func(c *intake.Config) { c.SweepInterval = time.Microsecond }, "SweepInterval"},
		{"negative Retention", func(c *intake.Config) { c.Retention = -time.Hour }, "Retention"},
		{"huge Retention", func(c *intake.Config) { c.Retention = intake.MaxRetention + 1 }, "Retention"},
		{"negative MaxConcurrent", func(c *intake.Config) { c.MaxConcurrent = -2 }, "MaxConcurrent"},
		{"huge MaxConcurrent", func(c *intake.Config) { c.MaxConcurrent = intake.MaxMaxConcurrent + 1 }, "MaxConcurrent"},
		{"negative PageSize", func(c *intake.Config) { c.PageSize = -1 }, "PageSize"},
		{"huge PageSize", func(c *intake.Config) { c.PageSize = intake.MaxPageSize + 1 }, "PageSize"},
		{"negative MaxQueued", func(c *intake.Config) { c.MaxQueued = -1 }, "MaxQueued"},
		{"huge MaxQueued", func(c *intake.Config) { c.MaxQueued = intake.MaxMaxQueued + 1 }, "MaxQueued"},
		{"negative MaxBatch", func(c *intake.Config) { c.MaxBatch = -1 }, "MaxBatch"},
		{"huge MaxBatch", func(c *intake.Config) { c.MaxBatch = intake.MaxMaxBatch + 1 }, "MaxBatch"},
		{"negative HeartbeatTimeout", func(c *intake.Config) { c.HeartbeatTimeout = -1 }, "HeartbeatTimeout"},
		{"huge HeartbeatTimeout", func(c *intake.Config) { c.HeartbeatTimeout = 2 * time.Hour }, "HeartbeatTimeout"},
		{"interval not below timeout", func(c *intake.Config) { c.HeartbeatInterval = intake.DefaultHeartbeatTimeout }, "HeartbeatInterval"},
		{"short timeout shortens the default interval", func(c *intake.Config) { c.HeartbeatTimeout = 30 * time.Millisecond }, ""},
		{"no crash budget", func(c *intake.Config) { c.MaxCrashes = -1 }, ""},
		{"negative MaxCrashes", func(c *intake.Config) { c.MaxCrashes = -2 }, "MaxCrashes"},
		{"huge MaxCrashes", func(c *intake.Config) { c.MaxCrashes = intake.MaxMaxCrashes + 1 }, "MaxCrashes"},
		{"process chat order", func(c *intake.Config) { c.ChatOrder = intake.ChatOrderProcess }, ""},
		{"strict chat order", func(c *intake.Config) { c.ChatOrder = intake.ChatOrderStrict }, ""},
		{"unknown chat order", func(c *intake.Config) { c.ChatOrder = "global" }, "ChatOrder"},
		{"strict chat order and RetryOutOfOrder", func(c *intake.Config) { c.ChatOrder, c.RetryOutOfOrder = intake.ChatOrderStrict, true },
			"RetryOutOfOrder"},
		{"strict chat order without a ChatOrderStore", func(c *intake.Config) {
			c.ChatOrder, c.Store = intake.ChatOrderStrict, struct{ intake.Store }{memstore.New()}
		}, "ChatOrder"},
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
				t.Fatalf("New accepted the config, want an error naming %s", tc.want)
			}
			if tc.want == "" {
				return
			}
			ce, ok := errors.AsType[*intake.ConfigError](err)
			if !ok || ce.Field != tc.want || !strings.HasPrefix(err.Error(), "intake: "+tc.want+" ") {
				t.Fatalf("New error %q (%T), want an *intake.ConfigError naming %s", err, err, tc.want)
			}
			if verr := cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Fatalf("Validate = %v, want New's %v", verr, err)
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
