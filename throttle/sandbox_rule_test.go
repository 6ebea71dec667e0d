package throttle_test

import (
	"testing"

	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/throttle"
)

// TestDefaultsKeepTheSandboxRule: the limiter's default per-chat, group and
// bot limits are the ones telegramtest enforces by default, window for
// window. Two rules of the same average but different windows disagree: 3
// in any 3 s lets 6 sends into some 5 s windows, which 5 in any 5 s
// refuses, and each such refusal pauses the whole bot for its retry_after.
func TestDefaultsKeepTheSandboxRule(t *testing.T) {
	for _, tc := range []struct {
		name string
		ours throttle.Limit
		fake telegramtest.Limit
	}{
		{"chat", throttle.Limit{Count: throttle.DefaultChatCount, Per: throttle.DefaultChatPer},
			telegramtest.Limit{Count: telegramtest.DefaultChatLimitCount, Per: telegramtest.DefaultChatLimitPer}},
		{"group", throttle.Limit{Count: throttle.DefaultGroupCount, Per: throttle.DefaultGroupPer},
			telegramtest.Limit{Count: telegramtest.DefaultGroupLimitCount, Per: telegramtest.DefaultGroupLimitPer}},
	} {
		if tc.ours.Count != tc.fake.Count || tc.ours.Per != tc.fake.Per {
			t.Errorf("%s: throttle keeps %d per %v, telegramtest enforces %d per %v",
				tc.name, tc.ours.Count, tc.ours.Per, tc.fake.Count, tc.fake.Per)
		}
	}
	// The bot-wide limit may be stricter than the fake's, never looser.
	if float64(throttle.DefaultBotCount)/throttle.DefaultBotPer.Seconds() >
		float64(telegramtest.DefaultBotLimitCount)/telegramtest.DefaultBotLimitPer.Seconds() {
		t.Errorf("throttle's bot limit %d per %v is looser than telegramtest's %d per %v",
			throttle.DefaultBotCount, throttle.DefaultBotPer, telegramtest.DefaultBotLimitCount, telegramtest.DefaultBotLimitPer)
	}
}
