package broadcast_test

import (
	"errors"
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

// TestConfigErrorNamesTheField: each invalid field is a
// *broadcast.ConfigError whose Field names it; a bad name still matches
// ErrInvalidName.
func TestConfigErrorNamesTheField(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		field string
		cfg   broadcast.Config
	}{
		{"Name", broadcast.Config{Name: "../x", Dir: dir, DryRun: true}},
		{"Dir", broadcast.Config{Name: "a", DryRun: true}},
		{"Rate", broadcast.Config{Name: "a", Dir: dir, DryRun: true, Rate: -1}},
		{"Concurrency", broadcast.Config{Name: "a", Dir: dir, DryRun: true, Concurrency: -1}},
		{"MaxAttempts", broadcast.Config{Name: "a", Dir: dir, DryRun: true, MaxAttempts: -1}},
	} {
		_, err := broadcast.Run(t.Context(), tc.cfg)
		if ce, ok := errors.AsType[*broadcast.ConfigError](err); !ok || ce.Field != tc.field {
			t.Errorf("Run = %v, want a *ConfigError naming %s", err, tc.field)
		}
		if tc.field == "Name" && !errors.Is(err, broadcast.ErrInvalidName) {
			t.Errorf("Run with a bad name = %v, want ErrInvalidName", err)
		}
	}
}
