package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTelegramsAnswerIsVerbatim: Telegram's own JSON reaches the app as it
// came, though it holds text shaped like a bot token (a user may send
// one, a bot may echo it): only an answer that is not Telegram's JSON (a
// page that may quote the request's URL) is masked.
func TestTelegramsAnswerIsVerbatim(t *testing.T) {
	t.Parallel()
	f := newFixture(t, fixtureOpts{})
	text := "your token is 1234567890:" + strings.Repeat("Ab3_", 9)
	id := f.claim(t, 25)
	for name, r := range map[string]reply{"unfenced": f.send(t, nil, text), "fenced": f.send(t, &id, text)} {
		var msg struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(r.env.Result, &msg); r.status != 200 || err != nil || msg.Text != text {
			t.Errorf("%s: answer %d %s; want Telegram's answer with the text %q as sent", name, r.status, r.body, text)
		}
	}
}
