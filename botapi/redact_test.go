package botapi_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

func TestRedactorValues(t *testing.T) {
	t.Parallel()
	var r botapi.Redactor
	r.Add("ab", "", "hunter2", "hunter2-prod-key", "1:s3cr3t", "we b/hook")
	tests := []struct{ in, want string }{
		{"ab is too short to mask", "ab is too short to mask"},
		{"pw hunter2!", "pw [redacted]!"},
		{"longest first: hunter2-prod-key", "longest first: [redacted]"},
		{"token /bot1:s3cr3t/getMe", "token /bot1:[redacted]/getMe"},
		{"query ?t=1%3As3cr3t and lower 1%3as3cr3t", "query ?t=1:[redacted] and lower 1:[redacted]"},
		{"path we%20b%2Fhook query we+b%2Fhook", "path [redacted] query [redacted]"},
		{"shape " + realToken, "shape 1234567890:[redacted]"},
		{"the secret half alone: invalid key s3cr3t", "the secret half alone: invalid key [redacted]"},
		{`a status line "s3cr3t 200"`, `a status line "[redacted] 200"`},
	}
	for _, tt := range tests {
		if got := r.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	var zero *botapi.Redactor
	if got := zero.Redact("x " + realToken); got != "x 1234567890:[redacted]" {
		t.Errorf("nil Redactor = %q, want the shape masked", got)
	}
}

func TestRedactorPatterns(t *testing.T) {
	t.Parallel()
	var r botapi.Redactor
	if err := r.AddPattern(regexp.MustCompile(`(?i)password=\S+`)); err != nil {
		t.Fatal(err)
	}
	if got := r.Redact("login PASSWORD=x1 ok"); got != "login [redacted] ok" {
		t.Errorf("Redact = %q", got)
	}
	for _, bad := range []*regexp.Regexp{nil, regexp.MustCompile(`x*`)} {
		if err := r.AddPattern(regexp.MustCompile(`y+`), bad); err == nil {
			t.Errorf("AddPattern(%v) = nil, want an error", bad)
		}
	}
	if got := r.Redact("yyy"); got != "yyy" {
		t.Errorf("a refused AddPattern registered a pattern: %q", got)
	}
}

// Every handler option path: the message, string attributes, errors,
// Stringers, structs in groups, in text and JSON.
func TestRedactorReplaceAttr(t *testing.T) {
	t.Parallel()
	r := &botapi.Redactor{}
	r.Add(shortToken, "whsecret")
	for _, newHandler := range []func(*bytes.Buffer, *slog.HandlerOptions) slog.Handler{
		func(b *bytes.Buffer, o *slog.HandlerOptions) slog.Handler { return slog.NewTextHandler(b, o) },
		func(b *bytes.Buffer, o *slog.HandlerOptions) slog.Handler { return slog.NewJSONHandler(b, o) },
	} {
		var buf bytes.Buffer
		log := slog.New(newHandler(&buf, &slog.HandlerOptions{ReplaceAttr: r.ReplaceAttr}))
		log.Info("calling /bot"+shortToken+"/getMe",
			"err", fmt.Errorf("wrapped: %w", errors.New("secret whsecret refused")),
			"url", stringer("https://x/bot"+realToken),
			"raw", []byte("whsecret"),
			slog.Group("g", "v", struct{ S string }{"whsecret"}),
			"n", 42)
		out := buf.String()
		for _, leak := range []string{"s3cr3t", "whsecret", secretOf(realToken)} {
			if strings.Contains(out, leak) {
				t.Errorf("log line leaks %q: %s", leak, out)
			}
		}
		for _, keep := range []string{"1:[redacted]", "1234567890:[redacted]", "42", "wrapped"} {
			if !strings.Contains(out, keep) {
				t.Errorf("log line lost %q: %s", keep, out)
			}
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

// Add may run while other goroutines mask (run with -race).
func TestRedactorConcurrent(t *testing.T) {
	t.Parallel()
	var r botapi.Redactor
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				r.Add(fmt.Sprintf("secret-%d-%d", i, j))
				_ = r.Redact("secret-0-0 and more")
			}
		})
	}
	wg.Wait()
	if got := r.Redact("x secret-3-49 y"); got != "x [redacted] y" {
		t.Errorf("Redact = %q", got)
	}
}

// A registered value never survives redaction, in any text, raw or
// URL-escaped (when it cannot overlap the mask text itself).
func FuzzRedactorHidesValue(f *testing.F) {
	f.Add("a secret-value here", "secret-value")
	f.Add("1:abcd 1%3Aabcd", "1:abcd")
	f.Add("aaaaa", "aaaa")
	f.Add("x"+realToken+"y", realToken)
	f.Fuzz(func(t *testing.T, s, v string) {
		if len(v) < botapi.MinSecretLen || strings.ContainsAny(v, "[]") {
			return
		}
		var r botapi.Redactor
		r.Add(v)
		if got := r.Redact(s); strings.Contains(got, v) {
			t.Fatalf("Redact(%q) with %q registered = %q, still holds it", s, v, got)
		}
	})
}

// A logger behind Redactor.Handler masks the message, attributes added
// with With, groups and errors; levels pass through.
func TestRedactorHandler(t *testing.T) {
	t.Parallel()
	var r botapi.Redactor
	r.Add("hunter2-secret")
	var buf bytes.Buffer
	log := slog.New(r.Handler(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	log = log.With("with", "w hunter2-secret").WithGroup("g")
	log.Debug("dropped hunter2-secret")
	log.Info("msg hunter2-secret", "err", errors.New("Post \"https://api.telegram.org/bot"+realToken+"/sendMessage\": refused"),
		slog.Group("inner", "s", "x hunter2-secret"), "n", 3)
	out := buf.String()
	for _, bad := range []string{"hunter2-secret", realToken, "dropped"} {
		if strings.Contains(out, bad) {
			t.Errorf("log shows %q: %s", bad, out)
		}
	}
	for _, want := range []string{`msg="msg [redacted]"`, `with="w [redacted]"`, `g.inner.s="x [redacted]"`, "1234567890:[redacted]", "g.n=3"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q: %s", want, out)
		}
	}
}

// Redact's scan for a token's shape agrees with masking by the shape
// alone: text it leaves alone holds no token-shaped run, and text it masks
// changes.
func FuzzRedactShape(f *testing.F) {
	f.Add("12345:" + strings.Repeat("a", 30))
	f.Add("1234:" + strings.Repeat("a", 30))
	f.Add("12345:" + strings.Repeat("a", 29))
	f.Add(`{"ok":true,"result":{"date":1733400000,"text":"12:30, a:b::c"}}`)
	f.Add("x 99999:" + strings.Repeat("-", 40) + " y 1:2")
	f.Add(":::12345::" + strings.Repeat("Z", 31))
	f.Fuzz(func(t *testing.T, s string) {
		shaped := regexp.MustCompile(`[0-9]{5}:[A-Za-z0-9_-]{30}`).MatchString(s)
		if changed := botapi.Redact(s) != s; changed != shaped {
			t.Fatalf("Redact(%q) changed it: %v; the text holds a token's shape: %v", s, changed, shaped)
		}
	})
}
