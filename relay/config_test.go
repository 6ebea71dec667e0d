package relay

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
)

const validToken = "123456:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

func validConfig() Config {
	return Config{
		Token:   validToken,
		Store:   memstore.New(),
		Secret:  "s3cr3t",
		Forward: forward.Config{URL: "http://127.0.0.1:1/update"},
	}
}

func TestNewNamesTheInvalidField(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		field  string
		mutate func(*Config)
	}{
		{"Token", func(c *Config) { c.Token = "" }},
		{"Token", func(c *Config) { c.Token = "has space:" + strings.Repeat("A", 40) }},
		{"APIRoot", func(c *Config) { c.APIRoot = "ftp://example.org" }},
		{"Store", func(c *Config) { c.Store = nil }},
		{"Forward.URL", func(c *Config) { c.Forward.URL = "" }},
		{"Forward.URL", func(c *Config) { c.Forward.URL = "not a url" }},
		{"Forward.ExhaustionURL", func(c *Config) { c.Forward.ExhaustionURL = "/relative" }},
		{"Forward.Timeout", func(c *Config) { c.LeaseDuration, c.Forward.Timeout = time.Second, 2*time.Second }},
		{"MaxAttempts", func(c *Config) { c.MaxAttempts = -1 }},
		{"MaxConcurrent", func(c *Config) { c.MaxConcurrent = 1 << 30 }},
		{"LeaseDuration", func(c *Config) { c.LeaseDuration = time.Nanosecond }},
		{"SweepInterval", func(c *Config) { c.SweepInterval = -time.Second }},
		{"PendingGrace", func(c *Config) { c.PendingGrace = -1 }},
		{"Retention", func(c *Config) { c.Retention = -1 }},
		{"BackoffBase", func(c *Config) { c.BackoffBase = 2 * MaxBackoffBase }},
		{"DrainTimeout", func(c *Config) { c.DrainTimeout = -time.Second }},
		{"ChatOrder", func(c *Config) { c.ChatOrder = "global" }},
		{"ChatOrder", func(c *Config) {
			c.ChatOrder, c.Store = intake.ChatOrderStrict, struct{ intake.Store }{memstore.New()} // no ChatOrderStore
		}},
		{"HeartbeatTimeout", func(c *Config) { c.HeartbeatTimeout = -time.Second }},
		{"HeartbeatInterval", func(c *Config) { c.HeartbeatInterval = time.Minute }},
		{"HeartbeatInterval", func(c *Config) { c.HeartbeatTimeout, c.HeartbeatInterval = time.Second, time.Second }},
		{"MaxCrashes", func(c *Config) { c.MaxCrashes = -2 }},
		{"MaxCrashes", func(c *Config) { c.MaxCrashes = intake.MaxMaxCrashes + 1 }},
		{"Path", func(c *Config) { c.Path = "telegram" }},
		{"Secret", func(c *Config) { c.Secret = "" }},
		{"Secret", func(c *Config) { c.Secret = "has space" }},
		{"PublicURL", func(c *Config) { c.PublicURL = "example.org/hook" }},
		{"MaxConnections", func(c *Config) { c.MaxConnections = 101 }},
		{"WebhookCheckInterval", func(c *Config) { c.WebhookCheckInterval = time.Millisecond }},
		{"PollTimeout", func(c *Config) { c.Poll, c.PollTimeout = true, 1500*time.Millisecond }},
		{"PublicURL", func(c *Config) { c.Poll, c.PublicURL = true, "https://example.org/hook" }},
	} {
		cfg := validConfig()
		tc.mutate(&cfg)
		_, err := New(cfg)
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("%s: New = %v, want a *ConfigError for %s", tc.field, err, tc.field)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "relay: "+tc.field+" ") {
			t.Errorf("%s: error %q does not start with the field's name", tc.field, msg)
		}
		for _, secret := range []string{"has space", validToken, "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: error %q quotes a secret", tc.field, msg)
			}
		}
	}
}

func TestNewFillsDefaults(t *testing.T) {
	t.Parallel()
	r, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	c := r.cfg
	if c.Listen != DefaultListen || c.Path != DefaultPath || c.BackoffBase != DefaultBackoffBase ||
		c.DrainTimeout != DefaultDrainTimeout || c.WebhookCheckInterval != DefaultWebhookCheckInterval ||
		c.StoreName != "store" || c.Forward.Timeout != forward.DefaultTimeout {
		t.Errorf("filled config = %+v, want the documented defaults", c)
	}
	lease := 10 * time.Second
	cfg := validConfig()
	cfg.LeaseDuration = lease
	r2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Stop()
	if r2.cfg.Forward.Timeout != lease/2 {
		t.Errorf("Forward.Timeout with a 10s lease = %v, want half the lease", r2.cfg.Forward.Timeout)
	}
}

func TestRetryFuncBounded(t *testing.T) {
	t.Parallel()
	f := retryFunc(10 * time.Millisecond)
	for attempt, want := range map[int]time.Duration{1: 10 * time.Millisecond, 2: 40 * time.Millisecond, 3: 160 * time.Millisecond} {
		d, ok := f(errors.New("x"), attempt)
		if !ok || d != want {
			t.Errorf("retry(%d) = %v, %v; want %v", attempt, d, ok, want)
		}
	}
	if d, _ := f(errors.New("x"), 1000); d != MaxRetryBackoff {
		t.Errorf("retry(1000) = %v, want the cap %v", d, MaxRetryBackoff)
	}
}

func TestObserversFanOutAndRecover(t *testing.T) {
	t.Parallel()
	var a, b []Kind
	o := Observers(
		ObserverFunc(func(e Event) { a = append(a, e.Kind) }),
		nil,
		ObserverFunc(func(Event) { panic("an observer's bug") }),
		ObserverFunc(func(e Event) { b = append(b, e.Kind) }),
	)
	o.Observe(Event{Kind: KindAccepted})
	o.Observe(Event{Kind: KindClaimed})
	if len(a) != 2 || len(b) != 2 || a[1] != KindClaimed || b[1] != KindClaimed {
		t.Errorf("observers saw %v and %v, want both events each, past a panicking one", a, b)
	}
}
