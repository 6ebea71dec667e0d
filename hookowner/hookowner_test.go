package hookowner_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/telegramtest"
)

const (
	secret = "s3cret-webhook_token"
	other  = "another-secret"
	addr   = "https://bot.example.com/tg/hook"
)

// recorder wraps a Caller and records the methods called, in order.
type recorder struct {
	c       hookowner.Caller
	methods []string
	params  []map[string]any
}

func (r *recorder) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	r.methods = append(r.methods, method)
	b, _ := json.Marshal(params)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	r.params = append(r.params, m)
	return r.c.Call(ctx, method, params)
}

func setup(t *testing.T) (*telegramtest.Server, *recorder) {
	t.Helper()
	srv := telegramtest.NewServer(telegramtest.Config{})
	t.Cleanup(srv.Close)
	c, err := botapi.New(srv.Token, botapi.Config{APIRoot: srv.URL, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return srv, &recorder{c: c}
}

// set registers a webhook directly, as another deployment would.
func set(t *testing.T, r *recorder, url, secretToken string) {
	t.Helper()
	if _, err := r.c.Call(t.Context(), "setWebhook", map[string]any{"url": url, "secret_token": secretToken}); err != nil {
		t.Fatal(err)
	}
}

func TestOwnerTag(t *testing.T) {
	t.Parallel()
	a, err := hookowner.OwnerTag(secret)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := hookowner.OwnerTag(secret)
	c, _ := hookowner.OwnerTag(other)
	if a != b || a == c || len(a) != 16 {
		t.Fatalf("tags: %q %q %q; want deterministic, distinct, 16 hex digits", a, b, c)
	}
	if strings.Contains(a, secret) {
		t.Fatal("tag contains the secret")
	}
	for _, bad := range []string{"", "has space", "ünicode", strings.Repeat("a", 257)} {
		if _, err := hookowner.OwnerTag(bad); !errors.Is(err, hookowner.ErrBadSecret) {
			t.Errorf("OwnerTag(%q) = %v, want ErrBadSecret", bad, err)
		}
	}
}

func TestTaggedURL(t *testing.T) {
	t.Parallel()
	got, err := hookowner.TaggedURL("https://h.example/p/a?x=1&owner=stale", secret)
	if err != nil {
		t.Fatal(err)
	}
	tag, _ := hookowner.OwnerTag(secret)
	if want := "https://h.example/p/a?owner=" + tag + "&x=1"; got != want {
		t.Fatalf("TaggedURL = %q, want %q", got, want)
	}
	if _, err := hookowner.TaggedURL("ftp://h/p", secret); err == nil {
		t.Fatal("ftp URL accepted")
	}
	// A query that does not parse whole would lose the pairs that do not
	// parse: the address registered would not be the one given.
	for _, raw := range []string{"https://h.example/p?a=1;b=2", "https://h.example/p?x=%zz&y=1"} {
		if got, err := hookowner.TaggedURL(raw, secret); err == nil {
			t.Errorf("TaggedURL(%q) = %q; want an error, not a query cut short", raw, got)
		} else if strings.Contains(err.Error(), "h.example") {
			t.Errorf("TaggedURL(%q) error %q quotes the address", raw, err)
		}
		if err := (hookowner.ClaimConfig{URL: raw, Secret: secret}).Validate(); err == nil {
			t.Errorf("Validate(URL %q) = nil; want the URL refused", raw)
		}
	}
}

func TestClaimPollingBotNeedsTakeoverFromNone(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	_, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret})
	var ce *hookowner.ClaimError
	if !errors.As(err, &ce) || ce.Reason != hookowner.ReasonOwnedElsewhere || ce.OwnerHost != hookowner.HostNone {
		t.Fatalf("claim of a polling bot = %v, want owned-elsewhere by none", err)
	}
	if strings.Join(r.methods, ",") != "getWebhookInfo" {
		t.Fatalf("calls = %v, want only getWebhookInfo", r.methods)
	}
	res, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: hookowner.HostNone})
	if err != nil {
		t.Fatal(err)
	}
	if res.TakenFrom != hookowner.HostNone || !strings.HasPrefix(res.URL, addr+"?owner=") {
		t.Fatalf("result = %+v", res)
	}
}

func TestClaimRefusesForeignWebhookNamingHostOnly(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	set(t, r, "https://other.example.net/very/secret/path", "x")
	r.methods = nil
	_, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: "third.example"})
	var ce *hookowner.ClaimError
	if !errors.As(err, &ce) || ce.Reason != hookowner.ReasonOwnedElsewhere || ce.OwnerHost != "other.example.net" {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "secret/path") || !strings.Contains(err.Error(), "other.example.net") {
		t.Fatalf("message %q must name the host and not the path", err)
	}
	if len(r.methods) != 1 {
		t.Fatalf("calls = %v, want no setWebhook", r.methods)
	}
}

func TestClaimSameAddressOtherSecret(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	tagged, _ := hookowner.TaggedURL(addr, other)
	set(t, r, tagged, other)
	_, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret})
	var ce *hookowner.ClaimError
	if !errors.As(err, &ce) || ce.Reason != hookowner.ReasonOtherSecret {
		t.Fatalf("err = %v, want other-secret", err)
	}
	if strings.Contains(err.Error(), other) || strings.Contains(err.Error(), secret) {
		t.Fatal("a secret reached the error message")
	}
}

func TestClaimRefreshesOwnAndTakesOverNamedHost(t *testing.T) {
	t.Parallel()
	srv, r := setup(t)
	set(t, r, "https://old.example.org/hook", "x")
	res, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{
		URL: addr, Secret: secret, TakeoverFrom: "old.example.org",
		AllowedUpdates: []string{"message"}, MaxConnections: 7,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.TakenFrom != "old.example.org" {
		t.Fatalf("TakenFrom = %q", res.TakenFrom)
	}
	r.methods, r.params = nil, nil
	res, err = hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	if res.TakenFrom != "" {
		t.Fatalf("refresh reported a takeover from %q", res.TakenFrom)
	}
	if got := strings.Join(r.methods, ","); got != "getWebhookInfo,setWebhook,getWebhookInfo" {
		t.Fatalf("calls = %s", got)
	}
	p := r.params[1]
	if p["secret_token"] != secret || p["drop_pending_updates"] != false {
		t.Fatalf("setWebhook params = %v", p)
	}
	st, err := hookowner.Check(t.Context(), r, addr, secret)
	if err != nil || !st.Owned || st.OwnerHost != "bot.example.com" {
		t.Fatalf("Check = %+v, %v", st, err)
	}
	_ = srv
}

func TestClaimValidates(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	if _, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: "bad secret"}); !errors.Is(err, hookowner.ErrBadSecret) {
		t.Fatalf("bad secret: %v", err)
	}
	if _, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret, MaxConnections: 101}); err == nil {
		t.Fatal("MaxConnections 101 accepted")
	}
	if len(r.methods) != 0 {
		t.Fatalf("invalid configs called %v", r.methods)
	}
}

func TestCheckReportsMoveAndDelete(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	if _, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: hookowner.HostNone}); err != nil {
		t.Fatal(err)
	}
	set(t, r, "https://intruder.example/h", "y")
	st, err := hookowner.Check(t.Context(), r, addr, secret)
	if err != nil || st.Owned || st.OwnerHost != "intruder.example" {
		t.Fatalf("Check after move = %+v, %v", st, err)
	}
	var ce *hookowner.ClaimError
	if err := hookowner.Delete(t.Context(), r, secret, ""); !errors.As(err, &ce) {
		t.Fatalf("Delete of a foreign webhook = %v", err)
	}
	if err := hookowner.Delete(t.Context(), r, secret, "intruder.example"); err != nil {
		t.Fatal(err)
	}
	st, _ = hookowner.Check(t.Context(), r, addr, secret)
	if st.OwnerHost != hookowner.HostNone {
		t.Fatalf("after delete the webhook points to %q", st.OwnerHost)
	}
	if err := hookowner.Delete(t.Context(), r, secret, ""); err != nil {
		t.Fatalf("Delete without a webhook = %v", err)
	}
}

// ignoring answers setWebhook with success without passing it on, as a
// Telegram that did not keep the webhook would look.
type ignoring struct{ hookowner.Caller }

func (i ignoring) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if method == "setWebhook" {
		return json.RawMessage("true"), nil
	}
	return i.Caller.Call(ctx, method, params)
}

func TestClaimNotConfirmed(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	_, err := hookowner.Claim(t.Context(), ignoring{r}, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: hookowner.HostNone})
	var ce *hookowner.ClaimError
	if !errors.As(err, &ce) || ce.Reason != hookowner.ReasonNotConfirmed || ce.OwnerHost != hookowner.HostNone {
		t.Fatalf("err = %v, want not-confirmed", err)
	}
}

func TestClaimUploadsCertificate(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	cert := []byte("-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBATAKBggqhkjOPQQDAjAUMRIwEAYDVQQDEwkxMjcuMC4wLjEwHhcNMjYwMTAxMDAwMDAwWhcNMjcwMTAxMDAwMDAwWjAUMRIwEAYDVQQDEwkxMjcuMC4wLjEwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAT6\n-----END CERTIFICATE-----\n")
	// A certificate Telegram cannot parse is refused by setWebhook.
	if _, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: hookowner.HostNone, Certificate: cert}); err == nil {
		t.Fatal("Claim with a broken certificate succeeded")
	}
	good := selfSignedPEM(t)
	res, err := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: addr, Secret: secret, TakeoverFrom: hookowner.HostNone, Certificate: good})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := r.c.Call(t.Context(), "getWebhookInfo", nil)
	if err != nil {
		t.Fatal(err)
	}
	var in struct {
		URL  string `json:"url"`
		Cert bool   `json:"has_custom_certificate"`
	}
	if err := json.Unmarshal(raw, &in); err != nil || in.URL != res.URL || !in.Cert {
		t.Fatalf("getWebhookInfo = %s (%v), want %s with a custom certificate", raw, err, res.URL)
	}
}

// TestClaimConfigValidate: each invalid field is a *ConfigError naming it,
// and Claim refuses it before any call to Telegram.
// TestWebhookAddressRefusesACredential: a webhook address with a user
// name or password is refused by every function that takes one, in an
// error that does not quote the password: the secret token, not the URL,
// proves a delivery is Telegram's. Nothing is registered.
func TestWebhookAddressRefusesACredential(t *testing.T) {
	t.Parallel()
	_, r := setup(t)
	for _, raw := range []string{"https://bot:hunter2@bot.example/hook", "https://bot@bot.example/hook", "https://:hunter2@bot.example/hook"} {
		_, err := hookowner.TaggedURL(raw, secret)
		if !errors.Is(err, configerr.ErrURLCredential) {
			t.Errorf("TaggedURL(%s) = %v; want the credential refused", raw, err)
		}
		verr := (hookowner.ClaimConfig{URL: raw, Secret: secret}).Validate()
		if ce, ok := errors.AsType[*hookowner.ConfigError](verr); !ok || ce.Field != "URL" || !errors.Is(verr, configerr.ErrURLCredential) {
			t.Errorf("Validate(URL %s) = %v; want URL refused for its credential", raw, verr)
		}
		_, cerr := hookowner.Check(t.Context(), r, raw, secret)
		_, clerr := hookowner.Claim(t.Context(), r, hookowner.ClaimConfig{URL: raw, Secret: secret, TakeoverFrom: hookowner.HostNone})
		for _, e := range []error{err, verr, cerr, clerr} {
			if e == nil || strings.Contains(e.Error(), "hunter2") || strings.Contains(e.Error(), "bot.example") {
				t.Errorf("%s: error %v; want one that quotes neither the password nor the address", raw, e)
			}
		}
	}
	if slices.Contains(r.methods, "setWebhook") {
		t.Errorf("calls made: %v; want no setWebhook", r.methods)
	}
}

func TestClaimConfigValidate(t *testing.T) {
	t.Parallel()
	ok := hookowner.ClaimConfig{URL: "https://bot.example/hook", Secret: "s3cret"}
	for field, mut := range map[string]func(*hookowner.ClaimConfig){
		"URL":            func(c *hookowner.ClaimConfig) { c.URL = "/relative" },
		"Secret":         func(c *hookowner.ClaimConfig) { c.Secret = "has space" },
		"MaxConnections": func(c *hookowner.ClaimConfig) { c.MaxConnections = 101 },
	} {
		c := ok
		mut(&c)
		err := c.Validate()
		if ce, isCE := errors.AsType[*hookowner.ConfigError](err); !isCE || ce.Field != field {
			t.Errorf("%s: Validate = %v, want a *ConfigError naming it", field, err)
		}
		if _, cerr := hookowner.Claim(t.Context(), nil, c); cerr == nil || cerr.Error() != err.Error() {
			t.Errorf("%s: Claim = %v, want Validate's %v", field, cerr, err)
		}
	}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate(valid) = %v", err)
	}
}
