package gateway_test

import (
	"strings"
	"testing"
)

// A call whose method is the bot token's secret half (a valid method name
// by its characters) never shows it to the Observer, whose method feeds a
// metric label: it is "invalid", as any method that is no method name.
func TestObserverNeverSeesTheTokenAsAMethod(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	_, half, _ := strings.Cut(f.tg.Token, ":")
	f.post(t, "/bot"+f.tg.Token+"/"+half, nil, map[string]any{"chat_id": f.chat.ID})
	e := <-f.events
	if e.Method != "invalid" {
		t.Errorf("direct call: the Observer saw method %q", e.Method)
	}
	id := f.claim(t, 1)
	f.gw.Reply(t.Context(), id, half, []byte(`{}`))
	e = <-f.events
	if e.Method != "invalid" {
		t.Errorf("webhook reply: the Observer saw method %q", e.Method)
	}
}
