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

// FuzzReplyIn: the webhook-reply detector never panics, and what it calls
// a reply is a JSON object with a "method" (or a body cut at the read
// limit that starts like one).
func FuzzReplyIn(f *testing.F) {
	for _, seed := range []string{`{"method":"sendMessage","chat_id":1}`, `OK`, `{}`, `{"method":""}`, `{"method":5}`, ` {"method":"x"} `, `{method`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, ok := forward.ReplyIn(body)
		if !ok {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(bytes.TrimSpace(body), &obj) == nil {
			var m string
			if json.Unmarshal(obj["method"], &m) != nil || m == "" || m != r.Method {
				t.Fatalf("ReplyIn(%q) = %+v, but its method is %q", body, r, obj["method"])
			}
		} else if len(body) < forward.DefaultMaxResponseBytes {
			t.Fatalf("ReplyIn(%q) called an unparsable short body a reply", body)
		}
	})
}
