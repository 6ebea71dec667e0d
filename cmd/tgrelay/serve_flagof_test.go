package main

import (
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/relay"
)

// configPaths lists every field path of a relay.Config, the paths a
// *relay.ConfigError can name: each field, and the fields of each nested
// struct of tgrelay's own packages, joined by ".".
func configPaths(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		path := prefix + f.Name
		out = append(out, path)
		ft := f.Type
		if ft.Kind() == reflect.Struct && strings.HasPrefix(ft.PkgPath(), "github.com/tgrelay/tgrelay/") {
			out = append(out, configPaths(ft, path+".")...)
		}
	}
	return out
}

// TestServeFlagOf: every field path the relay can report names a flag of
// serve, or is one serve sets no flag for (notServeFlags, with a reason, a
// parent path covering its children); and every flag named exists. So a
// user reads a flag, never a Go identifier.
func TestServeFlagOf(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	defineServeFlags(fs)
	paths := configPaths(reflect.TypeFor[relay.Config](), "")
	if len(paths) < 60 {
		t.Fatalf("found %d paths, want every field of relay.Config and its nested configs", len(paths))
	}
	known := map[string]bool{}
	for _, p := range paths {
		known[p] = true
		t.Run(p, func(t *testing.T) {
			if name, ok := serveFlagOf[p]; ok {
				if fs.Lookup(name) == nil {
					t.Errorf("%s maps to --%s, which serve does not define", p, name)
				}
				return
			}
			if notServeFlag(p) {
				return
			}
			// A struct path whose every leaf is covered needs no flag of
			// its own.
			if hasCoveredChildren(p, paths) {
				return
			}
			t.Errorf("%s maps to no flag of serve; add it to serveFlagOf, or to notServeFlags with the reason", p)
		})
	}
	for p := range serveFlagOf {
		if !known[p] {
			t.Errorf("serveFlagOf names %s, which is no field path of relay.Config", p)
		}
	}
	for p := range notServeFlags {
		if !known[p] {
			t.Errorf("notServeFlags names %s, which is no field path of relay.Config", p)
		}
	}
}

func notServeFlag(p string) bool {
	for f := p; ; {
		if _, ok := notServeFlags[f]; ok {
			return true
		}
		i := strings.LastIndexByte(f, '.')
		if i < 0 {
			return false
		}
		f = f[:i]
	}
}

func hasCoveredChildren(p string, paths []string) bool {
	n := 0
	for _, q := range paths {
		if strings.HasPrefix(q, p+".") {
			n++
		}
	}
	return n > 0
}

// TestServeUsageErrorSpeaksFlags: a relay config error reads as the flag,
// with no Go identifier of the relay's, also for a field named in passing.
func TestServeUsageErrorSpeaksFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&relay.ConfigError{Pkg: "relay", Field: "Gateway.Listen", Err: errors.New("is not a loopback address: the gateway holds the bot's token; set Gateway.AllowRemote to serve it elsewhere")},
			"--gateway-listen is not a loopback address: the gateway holds the bot's token; pass --gateway-allow-remote to serve it elsewhere"},
		{&relay.ConfigError{Pkg: "relay", Field: "Intake.RetryOutOfOrder", Err: errors.New(`contradicts ChatOrder "strict": a failed update holds its chat in the store`)},
			`--retry-order contradicts --chat-order "strict": a failed update holds its chat in the store`},
		{&relay.ConfigError{Pkg: "relay", Field: "WebhookCertificateFunc", Err: errors.New("needs PublicURL: a certificate is uploaded when the webhook is claimed")},
			"--self-signed needs --public-url: a certificate is uploaded when the webhook is claimed"},
		{&relay.ConfigError{Pkg: "relay", Field: "Gateway.Limits.Chat.Count", Err: errors.New("is 0")},
			"invalid setting: is 0"},
	} {
		got := serveUsageError(tc.err).Error()
		if got != tc.want {
			t.Errorf("serveUsageError(%v)\n got %q\nwant %q", tc.err, got, tc.want)
		}
	}
}
