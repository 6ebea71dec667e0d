package botapi_test

import (
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

func TestValidToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		token string
		want  bool
	}{
		{"BotFather's shape", "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq", true},
		{"short, as in tests", "1:s3cr3t", true},
		{"dash and underscore", "7:_-", true},
		{"longest bot id", strings.Repeat("9", botapi.MaxBotIDDigits) + ":x", true},
		{"longest token", "1:" + strings.Repeat("a", botapi.MaxTokenBytes-2), true},
		{"empty", "", false},
		{"no colon", "123456", false},
		{"no bot id", ":abc", false},
		{"no secret", "123:", false},
		{"bot id not digits", "12a:abc", false},
		{"bot id too long", strings.Repeat("9", botapi.MaxBotIDDigits+1) + ":x", false},
		{"too long", "1:" + strings.Repeat("a", botapi.MaxTokenBytes-1), false},
		{"slash", "123:abc/def", false},
		{"query", "123:abc?x", false},
		{"space", "123 456:abc", false},
		{"newline", "123:abc\n", false},
		{"second colon", "123:abc:def", false},
		{"non-ASCII", "123:abcé", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := botapi.ValidToken(tt.token); got != tt.want {
				t.Errorf("ValidToken(%q) = %v, want %v", tt.token, got, tt.want)
			}
		})
	}
}

// FuzzValidToken checks ValidToken against its documented shape, and that
// New agrees with it.
func FuzzValidToken(f *testing.F) {
	for _, s := range []string{"1:a", "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawq", "", ":", "1:", "a:b", "1:a/b", "1::a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, token string) {
		id, secret, found := strings.Cut(token, ":")
		want := found && len(token) <= botapi.MaxTokenBytes &&
			len(id) >= 1 && len(id) <= botapi.MaxBotIDDigits && strings.Trim(id, "0123456789") == "" &&
			secret != "" && strings.Trim(secret, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == ""
		if got := botapi.ValidToken(token); got != want {
			t.Fatalf("ValidToken(%q) = %v, want %v", token, got, want)
		}
		_, err := botapi.New(token, botapi.Config{})
		if (err == nil) != want {
			t.Fatalf("New(%q) err = %v, ValidToken %v", token, err, want)
		}
	})
}
