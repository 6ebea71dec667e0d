package relay

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/memstore"
	"github.com/tgrelay/tgrelay/throttle"
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
		{"APIRoot", func(c *Config) { c.APIRoot = "http://user:pass@127.0.0.1:8081" }},
		{"APIRoot", func(c *Config) { c.APIRoot = "http://127.0.0.1:8081/?x=1" }},
		{"APIRoot", func(c *Config) { c.APIRoot = "http://127.0.0.1:8081/#bot" }},
		{"Store", func(c *Config) { c.Store = nil }},
		{"Forward.URL", func(c *Config) { c.Forward.URL = "" }},
		{"Forward.URL", func(c *Config) { c.Forward.URL = "not a url" }},
		{"Forward.ExhaustionURL", func(c *Config) { c.Forward.ExhaustionURL = "/relative" }},
		{"Forward.Timeout", func(c *Config) { c.Intake.LeaseDuration, c.Forward.Timeout = time.Second, 2*time.Second }},
		{"Intake.MaxAttempts", func(c *Config) { c.Intake.MaxAttempts = -1 }},
		{"Intake.MaxConcurrent", func(c *Config) { c.Intake.MaxConcurrent = 1 << 30 }},
		{"Intake.LeaseDuration", func(c *Config) { c.Intake.LeaseDuration = time.Nanosecond }},
		{"Intake.SweepInterval", func(c *Config) { c.Intake.SweepInterval = -time.Second }},
		{"Intake.PendingGrace", func(c *Config) { c.Intake.PendingGrace = -1 }},
		{"Intake.Retention", func(c *Config) { c.Intake.Retention = -1 }},
		{"Intake.AcceptTimeout", func(c *Config) { c.Intake.AcceptTimeout = 2 * intake.MaxAcceptTimeout }},
		{"BackoffBase", func(c *Config) { c.BackoffBase = 2 * MaxBackoffBase }},
		{"DrainTimeout", func(c *Config) { c.DrainTimeout = -time.Second }},
		{"Intake.ChatOrder", func(c *Config) { c.Intake.ChatOrder = "global" }},
		{"Intake.ChatOrder", func(c *Config) {
			c.Intake.ChatOrder, c.Store = intake.ChatOrderStrict, struct{ intake.Store }{memstore.New()} // no ChatOrderStore
		}},
		{"Intake.HeartbeatTimeout", func(c *Config) { c.Intake.HeartbeatTimeout = -time.Second }},
		{"Intake.HeartbeatInterval", func(c *Config) { c.Intake.HeartbeatInterval = time.Minute }},
		{"Intake.HeartbeatInterval", func(c *Config) { c.Intake.HeartbeatTimeout, c.Intake.HeartbeatInterval = time.Second, time.Second }},
		{"Intake.MaxCrashes", func(c *Config) { c.Intake.MaxCrashes = -2 }},
		{"Intake.MaxCrashes", func(c *Config) { c.Intake.MaxCrashes = intake.MaxMaxCrashes + 1 }},
		{"Path", func(c *Config) { c.Path = "telegram" }},
		{"Secret", func(c *Config) { c.Secret = "" }},
		{"Secret", func(c *Config) { c.Secret = "has space" }},
		{"PublicURL", func(c *Config) { c.PublicURL = "example.org/hook" }},
		{"MaxConnections", func(c *Config) { c.MaxConnections = 101 }},
		{"WebhookCheckInterval", func(c *Config) { c.WebhookCheckInterval = time.Millisecond }},
		{"PollTimeout", func(c *Config) { c.Poll, c.PollTimeout = true, 1500*time.Millisecond }},
		{"PublicURL", func(c *Config) { c.Poll, c.PublicURL = true, "https://example.org/hook" }},
		{"MaxConnections", func(c *Config) { c.Poll, c.MaxConnections = true, 101 }},
		{"Secret", func(c *Config) { c.Poll, c.Secret = true, "has space" }},
		{"Path", func(c *Config) { c.Poll, c.Path = true, "telegram" }},
		{"PollTimeout", func(c *Config) { c.PollTimeout = 51 * time.Second }},
		{"Intake.RetryOutOfOrder", func(c *Config) { c.Intake.ChatOrder, c.Intake.RetryOutOfOrder = intake.ChatOrderStrict, true }},
		{"Forward.AppSecretToken", func(c *Config) { c.Forward.AppSecretToken = "has space" }},
		{"Forward.Timeout", func(c *Config) { c.Forward.Timeout = -time.Second }},
		{"Gateway.Limits.MaxWait", func(c *Config) { c.Gateway.Limits.MaxWait = -time.Second }},
		{"Gateway.Limits.Chat.Count", func(c *Config) { c.Gateway.Limits.Chat = throttle.Limit{Per: time.Second} }},
		{"Gateway.PublicURL", func(c *Config) { c.Gateway.PublicURL = "gateway.internal:8082" }},
		{"Gateway.PublicURL", func(c *Config) {
			c.Gateway.PublicURL = "http://user:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA@gateway.internal:8082"
		}},
		{"Gateway.PublicURL", func(c *Config) { c.Gateway.PublicURL = "http://gateway.internal:8082/?x=1" }},
		{"Gateway.PublicURL", func(c *Config) { c.Gateway.PublicURL = "http://gateway.internal:8082/#x" }},
		{"Gateway.MaxSendTries", func(c *Config) { c.Gateway.MaxSendTries = -1 }},
		{"Gateway.MaxBufferedBody", func(c *Config) { c.Gateway.MaxBufferedBody = -1 }},
		{"Gateway.MaxBufferedTotal", func(c *Config) { c.Gateway.MaxBufferedTotal = -1 }},
		{"Gateway.ResponseTimeout", func(c *Config) { c.Gateway.ResponseTimeout = time.Nanosecond }},
		{"BotTransport.AttemptDelay", func(c *Config) { c.BotTransport.AttemptDelay = time.Hour }},
		{"Deadlines.Margin", func(c *Config) { c.Deadlines.Margin = -time.Second }},
		{"Deadlines.CallbackQuery", func(c *Config) { c.Deadlines.CallbackQuery = -2 }},
		{"Deadlines.MaxConcurrent", func(c *Config) { c.Deadlines.MaxConcurrent = -1 }},
	} {
		cfg := validConfig()
		tc.mutate(&cfg)
		_, err := New(cfg)
		if verr := cfg.Validate(); verr == nil || err == nil || verr.Error() != err.Error() {
			t.Errorf("%s: Validate = %v, want New's %v", tc.field, verr, err)
		}
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

// TestValidateNamesStoreLast: without a Store, Validate reports every
// other invalid field first, and Store only when all else is valid, so a
// command line checks its flags before it opens (and creates) its store.
func TestValidateNamesStoreLast(t *testing.T) {
	t.Parallel()
	cfg := validConfig()
	cfg.Store = nil
	cfg.Intake.LeaseDuration = time.Nanosecond
	if ce, ok := errors.AsType[*ConfigError](cfg.Validate()); !ok || ce.Field != "Intake.LeaseDuration" {
		t.Errorf("Validate without a store and with a bad lease = %v, want Intake.LeaseDuration", cfg.Validate())
	}
	cfg.Intake.LeaseDuration = 0
	if ce, ok := errors.AsType[*ConfigError](cfg.Validate()); !ok || ce.Field != "Store" {
		t.Errorf("Validate without a store = %v, want Store", cfg.Validate())
	}
	if err := validConfig().Validate(); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
}

// TestConfigErrorIsOneType: the errors of the nested packages are the
// relay's *ConfigError, one type, so one errors.As serves a caller.
func TestConfigErrorIsOneType(t *testing.T) {
	t.Parallel()
	var ce *ConfigError = &intake.ConfigError{Field: "X"}
	if _, ok := any(ce).(*throttle.ConfigError); !ok {
		t.Error("relay.ConfigError and throttle.ConfigError differ")
	}
}

func TestNewFillsDefaults(t *testing.T) {
	t.Parallel()
	r, err := New(validConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close(context.Background())
	c := r.cfg
	if c.Listen != DefaultListen || c.Path != DefaultPath || c.BackoffBase != DefaultBackoffBase ||
		c.DrainTimeout != DefaultDrainTimeout || c.WebhookCheckInterval != DefaultWebhookCheckInterval ||
		c.StoreName != "store" || c.Forward.Timeout != forward.DefaultTimeout {
		t.Errorf("filled config = %+v, want the documented defaults", c)
	}
	lease := 10 * time.Second
	cfg := validConfig()
	cfg.Intake.LeaseDuration = lease
	r2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close(context.Background())
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
		Observer{EventFunc: func(e Event) { a = append(a, e.Kind) }},
		Observer{},
		Observer{EventFunc: func(Event) { panic("an observer's bug") }},
		Observer{EventFunc: func(e Event) { b = append(b, e.Kind) }},
	)
	o.EventFunc(Event{Kind: KindAccepted})
	o.EventFunc(Event{Kind: KindClaimed})
	if len(a) != 2 || len(b) != 2 || a[1] != KindClaimed || b[1] != KindClaimed {
		t.Errorf("observers saw %v and %v, want both events each, past a panicking one", a, b)
	}
	if Observers(Observer{}, Observer{}).EventFunc != nil {
		t.Error("Observers of none observing is not the zero Observer")
	}
}
