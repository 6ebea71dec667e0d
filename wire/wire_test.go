package wire_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/wire"
)

func TestAttemptRootRoundTrip(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"http://127.0.0.1:8081", "http://127.0.0.1:8081/", "https://gw.example//"} {
		root := wire.AttemptRoot(base, 42, 3, "c-1_x")
		if !strings.HasSuffix(root, wire.RootSuffix) || strings.Contains(root[strings.Index(root, "://")+3:], "//") {
			t.Errorf("AttemptRoot(%q) = %q", base, root)
		}
		path := root[strings.Index(root, wire.AttemptPrefix):] + "/bot123:abc/sendMessage"
		u, a, c, rest, ok := wire.CutAttemptPath(path)
		if !ok || rest != "/bot/bot123:abc/sendMessage" {
			t.Fatalf("CutAttemptPath(%q) = %q %q %q %q %v", path, u, a, c, rest, ok)
		}
		uid, n, claim, err := wire.ParseIdentity(u, a, c)
		if err != nil || uid != 42 || n != 3 || claim != "c-1_x" {
			t.Errorf("ParseIdentity(%q, %q, %q) = %d %d %q %v", u, a, c, uid, n, claim, err)
		}
	}
	if got := wire.AttemptRoot("http://h:1/", 42, 2, "c-1"); got != "http://h:1/a/42/2/c-1/bot" {
		t.Errorf("AttemptRoot = %q", got)
	}
}

func TestCutAttemptPathRefuses(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "/bot1:a/getMe", "/a/", "/a/1/2/c", "a/1/2/c/bot", "/b/1/2/c/bot"} {
		if _, _, _, _, ok := wire.CutAttemptPath(p); ok {
			t.Errorf("CutAttemptPath(%q) ok", p)
		}
	}
}

func TestParseIdentityNamesThePart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, u, a, c, part string
	}{
		{"negative update", "-1", "1", "c", "update id"},
		{"update not a number", "x", "1", "c", "update id"},
		{"attempt zero", "1", "0", "c", "attempt number"},
		{"attempt not a number", "1", "1.5", "c", "attempt number"},
		{"empty claim", "1", "1", "", "claim id"},
		{"claim with a slash", "1", "1", "a/b", "claim id"},
		{"claim too long", "1", "1", strings.Repeat("c", wire.MaxClaimIDBytes+1), "claim id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, _, err := wire.ParseIdentity(tt.u, tt.a, tt.c)
			var ie *wire.IdentityError
			if !errors.As(err, &ie) || ie.Part != tt.part {
				t.Fatalf("err = %v, want an IdentityError for the %s", err, tt.part)
			}
			if tt.c != "" && tt.c != "c" && strings.Contains(err.Error(), tt.c) {
				t.Errorf("error %q quotes the value", err)
			}
		})
	}
	if _, _, c, err := wire.ParseIdentity("0", "1", strings.Repeat("c", wire.MaxClaimIDBytes)); err != nil || len(c) != wire.MaxClaimIDBytes {
		t.Errorf("the longest claim id: %v", err)
	}
}

func TestSetIdentityIsReadBack(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	wire.SetIdentity(h, 7, 2, "claim-9")
	u, a, c, err := wire.ParseIdentity(h.Get(wire.HeaderUpdateID), h.Get(wire.HeaderAttempt), h.Get(wire.HeaderClaimID))
	if err != nil || u != 7 || a != 2 || c != "claim-9" {
		t.Fatalf("read back %d %d %q %v", u, a, c, err)
	}
}

func TestOutcomeOf(t *testing.T) {
	t.Parallel()
	if got := wire.OutcomeOf(http.Header{}); got != wire.OutcomeAnswered {
		t.Errorf("no header: %q, want answered", got)
	}
	h := http.Header{}
	h.Set(wire.HeaderOutcome, string(wire.OutcomeUnknown))
	if got := wire.OutcomeOf(h); got != wire.OutcomeUnknown {
		t.Errorf("unknown header: %q", got)
	}
}

// FuzzAttemptPath checks that whatever CutAttemptPath and ParseIdentity
// accept, AttemptRoot writes back as the same path.
func FuzzAttemptPath(f *testing.F) {
	f.Add("/a/42/3/c-1/bot/bot1:x/sendMessage")
	f.Add("/a/0/1/x/")
	f.Add("/a/1//c/bot")
	f.Add("/a/99999999999999999999/1/c/bot")
	f.Fuzz(func(t *testing.T, p string) {
		u, a, c, rest, ok := wire.CutAttemptPath(p)
		if !ok {
			return
		}
		if !strings.HasPrefix(rest, "/") {
			t.Fatalf("rest %q of %q has no leading slash", rest, p)
		}
		uid, n, claim, err := wire.ParseIdentity(u, a, c)
		if err != nil {
			return
		}
		root := wire.AttemptRoot("", uid, n, claim)
		back := strings.TrimSuffix(root, wire.RootSuffix) + rest
		u2, a2, c2, rest2, ok := wire.CutAttemptPath(back)
		uid2, n2, claim2, err := wire.ParseIdentity(u2, a2, c2)
		if !ok || err != nil || uid2 != uid || n2 != n || claim2 != claim || rest2 != rest {
			t.Fatalf("%q read as (%d %d %q %q), written back as %q", p, uid, n, claim, rest, back)
		}
	})
}

func TestBotMethod(t *testing.T) {
	for path, want := range map[string]string{
		"/bot123:abc/sendMessage":               "sendMessage",
		"/a/7/1/c-9/bot/bot123:abc/getMe":       "getMe",
		"/file/bot123:abc/photos/file_5":        "",
		"/file/bot123:abc/documents/file_5.pdf": "",
		"/bot123:abc":                           "",
		"/bot123:abc/":                          "",
		"/updates":                              "",
		"sendMessage":                           "",
	} {
		got, ok := wire.BotMethod(path)
		if got != want || ok != (want != "") {
			t.Errorf("BotMethod(%q) = %q, %v; want %q", path, got, ok, want)
		}
	}
}
