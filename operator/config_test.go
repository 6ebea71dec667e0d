package operator_test

import (
	"context"
	"errors"
	"testing"

	"github.com/tgrelay/tgrelay/operator"
)

// TestConfigErrorNamesTheField: each invalid field is an
// *operator.ConfigError whose Field names it.
func TestConfigErrorNamesTheField(t *testing.T) {
	t.Parallel()
	send := func(context.Context, operator.Message) error { return nil }
	for _, tc := range []struct {
		field string
		cfg   operator.Config
	}{
		{"ChatID", operator.Config{SendFunc: send}},
		{"Client", operator.Config{ChatID: 1}},
		{"ParseMode", operator.Config{ChatID: 1, SendFunc: send, ParseMode: "Markdown"}},
		{`Topics["x"]`, operator.Config{ChatID: 1, SendFunc: send, Topics: map[string]int64{"x": 0}}},
		{"MaxAttempts", operator.Config{ChatID: 1, SendFunc: send, MaxAttempts: -1}},
		{"MinInterval", operator.Config{ChatID: 1, SendFunc: send, MinInterval: -1}},
		{"SensitiveValues[0]", operator.Config{ChatID: 1, SendFunc: send, SensitiveValues: []string{"ab"}}},
	} {
		_, err := operator.New(tc.cfg)
		if ce, ok := errors.AsType[*operator.ConfigError](err); !ok || ce.Field != tc.field {
			t.Errorf("New = %v, want a *ConfigError naming %s", err, tc.field)
		}
	}
}
