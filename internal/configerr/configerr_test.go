package configerr_test

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/configerr"
)

var errKind = errors.New("pkg: invalid config")

func TestErrorMessageAndMatching(t *testing.T) {
	t.Parallel()
	e := configerr.New("intake", "LeaseDuration", "is %v: want %v to %v", "1ns", "10ms", "24h")
	if got, want := e.Error(), "intake: LeaseDuration is 1ns: want 10ms to 24h"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e.Kind = errKind
	if !errors.Is(e, errKind) {
		t.Error("errors.Is(e, Kind) = false")
	}
	if (&configerr.Error{Field: "X", Err: errors.New("is bad")}).Error() != "X is bad" {
		t.Error("an Error without Pkg carries a prefix")
	}
}

func TestNestPrefixesThePath(t *testing.T) {
	t.Parallel()
	inner := &configerr.Error{Pkg: "throttle", Field: "PerChat.Count", Err: errors.New("is 0"), Kind: errKind}
	mid := configerr.Nest("gateway", "Limits", fmt.Errorf("gateway: limiter: %w", inner))
	got := configerr.Nest("relay", "Gateway", mid)
	var ce *configerr.Error
	if !errors.As(got, &ce) {
		t.Fatalf("Nest = %T, want *Error", got)
	}
	if ce.Field != "Gateway.Limits.PerChat.Count" || ce.Pkg != "relay" {
		t.Errorf("Nest = %+v, want relay's Gateway.Limits.PerChat.Count", ce)
	}
	if got.Error() != "relay: Gateway.Limits.PerChat.Count is 0" {
		t.Errorf("Error() = %q", got.Error())
	}
	if !errors.Is(got, errKind) {
		t.Error("Nest lost Kind")
	}
	if inner.Field != "PerChat.Count" {
		t.Error("Nest changed the inner error")
	}
	plain := configerr.Nest("relay", "BotTransport", errors.New("transport: x"))
	if !errors.As(plain, &ce) || ce.Field != "BotTransport" {
		t.Errorf("Nest(plain) = %v, want a BotTransport *Error", plain)
	}
	if configerr.Nest("relay", "X", nil) != nil {
		t.Error("Nest(nil) != nil")
	}
	if kept := configerr.Nest("relay", "", inner); !errors.As(kept, &ce) || ce.Field != "PerChat.Count" {
		t.Errorf("Nest with an empty prefix = %v", kept)
	}
}

func TestURLCredential(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"http://127.0.0.1:1/", "https://c.example/otlp"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if err := configerr.URLCredential(u, "send it elsewhere"); err != nil {
			t.Errorf("URLCredential(%s) = %v, want nil", raw, err)
		}
	}
	for _, raw := range []string{"http://bot:hunter2@127.0.0.1:1/", "http://bot@127.0.0.1:1/", "http://:hunter2@127.0.0.1:1/"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		err = configerr.URLCredential(u, "send it in a request header instead")
		if !errors.Is(err, configerr.ErrURLCredential) {
			t.Errorf("URLCredential(%s) = %v, want ErrURLCredential", raw, err)
			continue
		}
		if want := "has a user name or password: a credential in the URL would reach logs and error messages; send it in a request header instead"; err.Error() != want {
			t.Errorf("URLCredential(%s) = %q, want %q", raw, err, want)
		}
	}
}

func TestHTTPURLAndBaseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw        string
		http, base bool
	}{
		{"https://api.telegram.org", true, true},
		{"http://127.0.0.1:8081/root/", true, true},
		{"https://c.example/hook?tag=1", true, false},
		{"https://c.example/root#x", true, false},
		{"https://bot:hunter2@c.example/root", true, false},
		{"https://bot@c.example", true, false},
		{"ftp://c.example", false, false},
		{"/relative", false, false},
		{"https://", false, false},
		{"http://bot:hunter2@bad host/", false, false},
	} {
		u, err := configerr.HTTPURL(tc.raw)
		if (err == nil) != tc.http || (err != nil) != errors.Is(err, configerr.ErrNotHTTPURL) || (err == nil) != (u != nil) {
			t.Errorf("HTTPURL(%s) = %v, %v; want accepted %v", tc.raw, u, err, tc.http)
		}
		b, err := configerr.BaseURL(tc.raw)
		if (err == nil) != tc.base || (err != nil) != errors.Is(err, configerr.ErrNotBaseURL) || (err == nil) != (b != nil) {
			t.Errorf("BaseURL(%s) = %v, %v; want accepted %v", tc.raw, b, err, tc.base)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("BaseURL(%s) quotes the password: %v", tc.raw, err)
		}
	}
}
