package broadcast_test

import (
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/broadcast"
)

func TestValidName(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"launch-2026.11_a", true},
		{"A", true},
		{"9lives", true},
		{strings.Repeat("a", broadcast.MaxNameLen), true},
		{"", false},
		{strings.Repeat("a", broadcast.MaxNameLen+1), false},
		{".hidden", false},
		{"-flag", false},
		{"a/b", false},
		{"..", false},
		{"spa ce", false},
		{"ünï", false},
	} {
		if got := broadcast.ValidName(tc.name); got != tc.ok {
			t.Errorf("ValidName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
