package forward_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
)

// FuzzDecodeExhaustion: any body either decodes to a payload that
// re-encodes to an equivalent delivery, or is refused; never a panic.
func FuzzDecodeExhaustion(f *testing.F) {
	for _, seed := range []string{
		`{"tgrelay_exhaustion":{"update_id":1,"attempt":2,"claim_id":"c","exhausted_at":"2026-01-01T00:00:00Z","error":"boom","update":{"update_id":1}}}`,
		`{"update_id":1,"message":{}}`, `{"tgrelay_exhaustion":null}`, `[]`, `"x"`, ``, `{"tgrelay_exhaustion":{"update":"not json"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := forward.DecodeExhaustion(bytes.NewReader(body))
		if err != nil {
			return
		}
		again, err := json.Marshal(forward.ExhaustionBody{Exhaustion: &p})
		if err != nil {
			t.Fatalf("re-encode %+v: %v", p, err)
		}
		q, err := forward.DecodeExhaustion(bytes.NewReader(again))
		if err != nil || q.UpdateID != p.UpdateID || q.ClaimID != p.ClaimID || q.Attempt != p.Attempt {
			t.Fatalf("round trip %+v -> %+v, %v", p, q, err)
		}
	})
}

// FuzzReplyIn: the webhook-reply detector never panics; a method it names
// is the first call's of a body that parses, and what it calls no reply
// neither parses as an object with a "method" nor names one unparsed.
func FuzzReplyIn(f *testing.F) {
	for _, seed := range []string{`{"method":"sendMessage","chat_id":1}`, `OK`, `{}`, `{"method":""}`, `{"method":5}`, ` {"method":"x"} `, `{method`,
		`{"method":"x",}`, "\ufeff{\"method\":\"x\"}", `[{"method":"x"}]`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, ok := forward.ReplyIn(body)
		trimmed := bytes.TrimSpace(bytes.TrimPrefix(bytes.TrimSpace(body), []byte("\ufeff")))
		var obj map[string]json.RawMessage
		parsed := json.Unmarshal(trimmed, &obj) == nil
		if !ok {
			if _, has := obj["method"]; parsed && has {
				t.Fatalf("ReplyIn(%q) missed an object with a method", body)
			}
			var v any
			if json.Unmarshal(trimmed, &v) != nil && len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') &&
				bytes.Contains(trimmed, []byte(`"method"`)) {
				t.Fatalf("ReplyIn(%q) missed an unparsable body that names a method", body)
			}
			return
		}
		if parsed && r.Method != "" {
			var m string
			if json.Unmarshal(obj["method"], &m) != nil || m != r.Method {
				t.Fatalf("ReplyIn(%q) = %+v, but its method is %q", body, r, obj["method"])
			}
		}
		if r.Reason == "" {
			t.Fatalf("ReplyIn(%q) = %+v: no reason", body, r)
		}
	})
}
