package telegramtest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEmptyJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw   string
		empty bool
	}{
		{"", true}, {" ", true}, {"null", true}, {`""`, true}, {"false", true}, {"0", true}, {"-0", true},
		{"0.0", true}, {"0e5", true}, {"[]", true}, {" [ ] ", true}, {"{}", true}, {`{"text":""}`, true},
		{`{"a":{"b":[],"c":null,"d":false}}`, true},
		{`" "`, false}, {"true", false}, {"1", false}, {"-0.5", false}, {"[0]", false}, {`[""]`, false},
		{`{"text":"x"}`, false}, {`{"a":{"b":1}}`, false}, {`{"text":`, false}, {"nul", false}, {"[", false},
		{"fals", false}, {`"\u0000"`, false},
	} {
		if got := emptyJSON(json.RawMessage(tc.raw)); got != tc.empty {
			t.Errorf("emptyJSON(%q) = %v, want %v", tc.raw, got, tc.empty)
		}
	}
}

// FuzzCheckMarkup feeds arbitrary reply_markup to the markup checks: none
// may panic, every refusal is Telegram-shaped, and a kept markup is the
// markup as sent.
func FuzzCheckMarkup(f *testing.F) {
	for _, seed := range []string{
		`{"inline_keyboard":[[{"text":"Yes","callback_data":"yes","copy_text":{"text":""}}]]}`,
		`{"inline_keyboard":[[{"text":"a","url":"","switch_inline_query":""}]]}`,
		`{"inline_keyboard":[[{"text":"g","callback_game":{}}],[]]}`,
		`{"keyboard":[["a",{"text":"b","request_poll":{}}]],"resize_keyboard":true}`,
		`{"keyboard":[[{"text":"w","web_app":{"url":""}}]]}`,
		`{"remove_keyboard":true}`, `{}`, `{"inline_keyboard":null}`, `[1]`, `{"inline_keyboard":[[1]]}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, markup string) {
		p := params{v: map[string]string{"reply_markup": markup}}
		raw, kept, e := checkMarkup(p)
		if e != nil {
			if !strings.HasPrefix(e.desc, "Bad Request: ") || e.code != 400 {
				t.Fatalf("refusal %d %q is not Telegram-shaped", e.code, e.desc)
			}
			return
		}
		if kept != nil && string(kept) != string(raw) {
			t.Fatalf("kept %s, sent %s", kept, raw)
		}
		if raw != nil && !json.Valid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
	})
}
