package gateway_test

import (
	"net/http"
	"testing"

	"github.com/tgrelay/tgrelay/wire"
)

// TestWebhookReplyOfAnIntakeMethodIsRefused: with Config.OwnsIntake, a
// webhook reply of getUpdates, setWebhook or deleteWebhook (any case) is
// refused 409, as the same call over HTTP is, and never reaches Telegram:
// it would take the bot's updates from the relay.
func TestWebhookReplyOfAnIntakeMethodIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	id := f.claim(t, 29)
	for _, m := range []string{"deleteWebhook", "setwebhook", "getUpdates"} {
		status, outcome, replayed := f.gw.Reply(t.Context(), id, m, []byte(`{"url":"https://elsewhere.example/hook"}`))
		if status != http.StatusConflict || outcome != string(wire.OutcomeRefused) || replayed {
			t.Errorf("Reply(%s) = %d %q replayed %v; want 409 refused", m, status, outcome, replayed)
		}
	}
	if calls := f.tg.Calls(); calls["getUpdates"]+calls["setWebhook"]+calls["deleteWebhook"] != 0 {
		t.Errorf("refused webhook replies reached Telegram: %v", calls)
	}
}
