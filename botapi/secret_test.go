package botapi_test

import (
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/botapi"
)

func TestValidSecretToken(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"":                       false,
		"a":                      true,
		"Az09_-":                 true,
		strings.Repeat("x", 256): true,
		strings.Repeat("x", 257): false,
		"has space":              false,
		"dot.":                   false,
		"ünï":                    false,
		"tab\t":                  false,
		"slash/":                 false,
	} {
		if got := botapi.ValidSecretToken(s); got != want {
			t.Errorf("ValidSecretToken(%.20q) = %v, want %v", s, got, want)
		}
	}
}

func FuzzValidSecretToken(f *testing.F) {
	for _, s := range []string{"", "a", "has space", strings.Repeat("Z", 256), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want := len(s) >= 1 && len(s) <= 256 && strings.Trim(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == ""
		if got := botapi.ValidSecretToken(s); got != want {
			t.Errorf("ValidSecretToken(%q) = %v, want %v", s, got, want)
		}
	})
}
