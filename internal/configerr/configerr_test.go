package configerr_test

import (
	"errors"
	"fmt"
	"net/url"
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
