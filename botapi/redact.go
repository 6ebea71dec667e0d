package botapi

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Redacted replaces every masked secret.
const Redacted = "[redacted]"

// MinSecretLen is the shortest value [Redactor.Add] masks: shorter values
// would mask ordinary words, so Add ignores them.
const MinSecretLen = 4

// tokenShape finds bot tokens inside text: a narrower form of the shape
// [ValidToken] accepts, with a bot id of five or more digits and a secret
// half of thirty or more of [A-Za-z0-9_-], so that ordinary text ("12:30")
// is not masked. Only the secret half is replaced, so the bot id stays
// readable.
var tokenShape = regexp.MustCompile(`([0-9]{5,}):[A-Za-z0-9_-]{30,}`)

// botID matches the bot id of a token-like value ("123:...") so that its
// mask keeps the id readable.
var botID = regexp.MustCompile(`^[0-9]+:.`)

// Redact masks the secret half of anything in s shaped like a bot token,
// keeping the bot id: "123456:[redacted]". A token too short to have that
// shape (as in tests) is not recognised; use [Client.Redact] or a
// [Redactor] to mask a known token whatever its shape.
func Redact(s string) string {
	if !mayHoldToken(s) {
		return s
	}
	return tokenShape.ReplaceAllString(s, "$1:"+Redacted)
}

// mayHoldToken reports whether tokenShape matches somewhere in s: a ':'
// with five digits right before it and thirty token characters right
// after it. Most text holds none, and this scan costs a small part of the
// regexp's (which masked every journaled answer of the gateway).
func mayHoldToken(s string) bool {
	for i := strings.IndexByte(s, ':'); i >= 0; {
		digits := 0
		for k := i - 1; k >= 0 && digits < 5 && '0' <= s[k] && s[k] <= '9'; k-- {
			digits++
		}
		if digits == 5 {
			n := 0
			for k := i + 1; k < len(s) && n < 30 && tokenChar(s[k]); k++ {
				n++
			}
			if n == 30 {
				return true
			}
		}
		next := strings.IndexByte(s[i+1:], ':')
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// Redactor masks secrets in text: registered exact values (in their raw and
// URL-escaped forms), registered patterns, and anything shaped like a bot
// token ([Redact]). It is the one redaction rule of the module: the
// [Client] masks its token with it, and a program installs
// [Redactor.ReplaceAttr] in its slog handlers so no log line carries a
// secret.
//
// The zero value masks by shape only. A Redactor is safe for concurrent
// use; Add and AddPattern may be called while others mask. It must not be
// copied after first use.
type Redactor struct {
	mu       sync.RWMutex
	masks    []mask // longest form first, so a secret containing another is masked whole
	patterns []*regexp.Regexp
}

// mask is one form of a registered value and what replaces it.
type mask struct{ form, with string }

// Add registers secret values (a bot token, a webhook secret, a password).
// Values shorter than [MinSecretLen] are ignored. A value shaped like a bot
// token ("<digits>:<secret>") keeps its bot id readable: "123:[redacted]";
// its secret half is masked on its own too, wherever it appears without
// the id.
func (r *Redactor) Add(values ...string) {
	for _, v := range values {
		if len(v) >= MinSecretLen {
			r.add(v)
		}
	}
}

// add registers v whatever its length.
func (r *Redactor) add(v string) {
	if v == "" {
		return
	}
	masks := escapedForms(v, Redacted)
	if botID.MatchString(v) {
		// A token keeps its bot id readable. Its secret half is the
		// credential on its own (the bot id is public), so it is masked
		// wherever it appears without the id too: an app's "invalid key
		// AAH…", a status line echoing it.
		id, half := v[:strings.IndexByte(v, ':')+1], v[strings.IndexByte(v, ':')+1:]
		masks = escapedForms(v, id+Redacted)
		if len(half) >= MinSecretLen {
			masks = append(masks, escapedForms(half, Redacted)...)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range masks {
		if !slices.ContainsFunc(r.masks, func(have mask) bool { return have.form == m.form }) {
			r.masks = append(r.masks, m)
		}
	}
	slices.SortStableFunc(r.masks, func(a, b mask) int { return len(b.form) - len(a.form) })
}

// escapedForms returns the masks of v in its raw and URL-escaped forms,
// each replaced by with.
func escapedForms(v, with string) []mask {
	q := url.QueryEscape(v)
	forms := []string{v, q, url.PathEscape(v), lowerEscapes(q)}
	out := make([]mask, len(forms))
	for i, f := range forms {
		out[i] = mask{form: f, with: with}
	}
	return out
}

// lowerEscapes returns s with the hex digits of its %XX escapes in lower
// case, a form some clients print.
func lowerEscapes(s string) string {
	b := []byte(s)
	for i := 0; i+2 < len(b); i++ {
		if b[i] == '%' {
			b[i+1] = toLowerHex(b[i+1])
			b[i+2] = toLowerHex(b[i+2])
		}
	}
	return string(b)
}

func toLowerHex(c byte) byte {
	if c >= 'A' && c <= 'F' {
		return c + ('a' - 'A')
	}
	return c
}

// AddPattern registers patterns whose every match is masked whole. A nil
// pattern, or one that matches the empty string, is an error and nothing
// is registered.
func (r *Redactor) AddPattern(patterns ...*regexp.Regexp) error {
	for i, p := range patterns {
		if p == nil || p.MatchString("") {
			return fmt.Errorf("botapi: pattern %d is nil or matches the empty string", i)
		}
	}
	r.mu.Lock()
	r.patterns = append(r.patterns, patterns...)
	r.mu.Unlock()
	return nil
}

// Redact returns s with every registered value masked (the longest first),
// then every registered pattern's matches, then anything shaped like a bot
// token. A nil Redactor masks by shape only.
func (r *Redactor) Redact(s string) string {
	if r != nil {
		r.mu.RLock()
		for _, m := range r.masks {
			s = strings.ReplaceAll(s, m.form, m.with)
		}
		for _, p := range r.patterns {
			s = p.ReplaceAllLiteralString(s, Redacted)
		}
		r.mu.RUnlock()
	}
	return Redact(s)
}

// ReplaceAttr is a [slog.HandlerOptions] ReplaceAttr that passes every
// string through [Redactor.Redact], the message included. Errors,
// fmt.Stringers, byte slices and other non-scalar values are rendered as
// text first and then masked, so a secret inside a struct or an error chain
// is masked too; numbers, booleans, times and durations pass unchanged.
//
//	red := &botapi.Redactor{}
//	red.Add(token, webhookSecret)
//	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{ReplaceAttr: red.ReplaceAttr}))
func (r *Redactor) ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(r.Redact(a.Value.String()))
	case slog.KindAny:
		var s string
		switch v := a.Value.Any().(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		case []byte:
			s = string(v)
		default:
			s = fmt.Sprintf("%+v", v)
		}
		a.Value = slog.StringValue(r.Redact(s))
	}
	return a
}

// Handler returns a [slog.Handler] that masks every line before next sees
// it: the message and every attribute, those added by WithAttrs and inside
// groups included (see [Redactor.ReplaceAttr]). Use it where a library
// takes a caller's logger it cannot configure, so that a secret in an
// error a line carries never reaches next. A nil Redactor masks by shape
// only.
func (r *Redactor) Handler(next slog.Handler) slog.Handler {
	return &redactHandler{next: next, r: r}
}

// redactHandler is the slog.Handler of [Redactor.Handler].
type redactHandler struct {
	next slog.Handler
	r    *Redactor
}

func (h *redactHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// attr masks a, descending into groups.
func (h *redactHandler) attr(a slog.Attr) slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		g := a.Value.Group()
		as := make([]slog.Attr, len(g))
		for i, x := range g {
			as[i] = h.attr(x)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(as...)}
	}
	return h.r.ReplaceAttr(nil, a)
}

func (h *redactHandler) WithAttrs(as []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(as))
	for i, a := range as {
		masked[i] = h.attr(a)
	}
	return &redactHandler{next: h.next.WithAttrs(masked), r: h.r}
}

func (h *redactHandler) WithGroup(name string) slog.Handler {
	return &redactHandler{next: h.next.WithGroup(name), r: h.r}
}
