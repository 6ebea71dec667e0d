package intake_test

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/intake"
)

func TestParseUpdate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		body string
		id   int64 // -1: invalid
	}{
		{`{"update_id":0}`, 0},
		{`{"update_id":42,"message":{"chat":{"id":1}}}`, 42},
		{` {"message":{},"update_id": 9007199254740991 } `, intake.MaxUpdateID},
		// Above 2^53-1 a JavaScript handler reads the id rounded, so two
		// updates could read as one there.
		{`{"update_id":9007199254740992}`, -1},
		{`{"update_id":9007199254740993}`, -1},
		{`{"update_id":10000000000000000}`, -1},
		{`{"update_id":9223372036854775807}`, -1},
		{`{"update_id":9223372036854775808}`, -1},
		{`{"update_id":99999999999999999999}`, -1},
		{`{"update_id":"42"}`, -1},
		{`{"update_id":1.5}`, -1},
		{`{"update_id":1.0}`, -1},
		{`{"update_id":1e3}`, -1},
		{`{"update_id":-1}`, -1},
		{`{"update_id":-0}`, -1},
		{`{"update_id":01}`, -1},
		{`{"update_id":null}`, -1},
		{`{"update_id":true}`, -1},
		{`{"message":{}}`, -1},
		{`[{"update_id":1}]`, -1},
		{`null`, -1},
		{`42`, -1},
		{``, -1},
		{`{"update_id":1`, -1},
		{`{"update_id":1}}`, -1},
		{`{"update_id":1} {"update_id":2}`, -1},
		{`{"update_id":1,}`, -1},
		{"{\"update_id\":1,\"text\":\"\xff\"}", 1}, // invalid UTF-8 inside a string is tolerated, as encoding/json does
		// update_id held twice, in any letter case: handlers would read
		// different ids from it.
		{`{"update_id":5,"update_id":9}`, -1},
		{`{"update_id":5,"update_id":5}`, -1},
		{`{"update_id":5,"Update_ID":9}`, -1},
		{`{"Update_ID":9,"update_id":5}`, -1},
		{`{"update_id":5,"message":{},"UPDATE_ID":"x"}`, -1},
		{`{"update_id":5,"update\u005fid":9}`, -1},
		{`{"update_id":5,"update\u005FID":9}`, -1},
		{`{"Update_ID":9}`, -1},
		{`{"update_id":5,"message":{"update_id":9,"Update_ID":9}}`, 5},
		{`{"update_id":5,"update_ids":9,"update_i":9,"pdate_id":9}`, 5},
	} {
		t.Run(tc.body, func(t *testing.T) {
			id, err := intake.ParseUpdate([]byte(tc.body))
			if tc.id < 0 {
				if err == nil {
					t.Fatalf("ParseUpdate = %d, want an error", id)
				}
				return
			}
			if err != nil || id != tc.id {
				t.Fatalf("ParseUpdate = %d, %v; want %d", id, err, tc.id)
			}
		})
	}
}

func TestLineKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"update_id":1,"message":{"chat":{"id":-100123},"from":{"id":7}}}`, "chat:-100123"},
		{`{"update_id":1,"callback_query":{"from":{"id":7},"message":{"chat":{"id":55}}}}`, "chat:55"},
		{`{"update_id":1,"inline_query":{"from":{"id":7}}}`, "chat:7"},
		{`{"update_id":1,"my_chat_member":{"chat":{"id":"@channel"}}}`, "chat:@channel"},
		{`{"update_id":1,"poll_answer":{"voter_chat":{"id":3}}}`, "chat:3"},
		{`{"update_id":1,"message_reaction_count":{"user":{"id":4}}}`, "chat:4"},
		{`{"update_id":8,"poll":{"id":"p1"}}`, "update:8"},
		{`{"update_id":8,"message":{"chat":{"id":true}}}`, "update:8"},
		{`{"update_id":8,"x":1,"message":{"chat":{"id":2}},"edited_message":{"chat":{"id":3}}}`, "chat:2"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := intake.LineKey([]byte(tc.body)); got != tc.want {
				t.Fatalf("line of %s = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
}

func TestChatKey(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", intake.MaxChatKey)
	for _, tc := range []struct{ body, want string }{
		{`{"update_id":1,"message":{"chat":{"id":-100123},"from":{"id":7}}}`, "-100123"},
		{`{"update_id":1,"inline_query":{"from":{"id":7}}}`, "7"},
		{`{"update_id":1,"my_chat_member":{"chat":{"id":"@channel"}}}`, "@channel"},
		{`{"update_id":8,"poll":{"id":"p1"}}`, ""},
		{`{"update_id":8,"message":{"chat":{"id":"` + long + `"}}}`, long},
		{`{"update_id":8,"message":{"chat":{"id":"` + long + `y"}}}`, ""},
		{`{"update_id":"8","message":{"chat":{"id":1}}}`, ""},
		{`{"update_id":8,"message":{"chat":{"id":"a\u0000b"}}}`, ""}, // PostgreSQL's text holds no NUL
		{`{"update_id":8,"message":{"chat":{"id":"a\u0001b"}}}`, "a\x01b"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := intake.ChatKey([]byte(tc.body)); got != tc.want {
				t.Fatalf("ChatKey(%.60s) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
}

func TestAcceptanceString(t *testing.T) {
	t.Parallel()
	for a, want := range map[intake.Acceptance]string{intake.Accepted: "accepted", intake.Duplicate: "duplicate", intake.Invalid: "invalid", 0: "Acceptance(0)"} {
		if a.String() != want {
			t.Errorf("%d.String() = %q, want %q", int(a), a.String(), want)
		}
	}
}

// FuzzParseUpdate checks the parser never panics, and that what it accepts
// is a JSON object whose update_id is the integer it returned.
func FuzzParseUpdate(f *testing.F) {
	for _, s := range []string{
		`{"update_id":1,"message":{"chat":{"id":1},"text":"hi"}}`,
		`{"update_id":"1"}`, `{"update_id":1.5}`, `{"update_id":-1}`, `[]`, `null`,
		`{"update_id":9223372036854775807}`, `{"update_id":9223372036854775808}`,
		`{"update_id":9007199254740991}`, `{"update_id":9007199254740992}`, `{"update_id":0}`,
		`{"callback_query":{"message":{"chat":{"id":"x"}}},"update_id":3}`,
		`{"update_id":4,"message":{"chat":{"id":-1001,"type":"supergroup"}}}`,
		`{"update_id":5,"Update_ID":9}`, `{"update_id":5,"update_id":9}`, `{"UPDATE_ID":9,"update_id":5}`,
		`{"update_id":5,"update\u005fid":9}`, `{"update_id":5,"message":{"Update_ID":9}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		id, err := intake.ParseUpdate(body)
		line, key := intake.LineKey(body), intake.ChatKey(body)
		if len(key) > intake.MaxChatKey || strings.IndexByte(key, 0) >= 0 || (key != "" && line != "chat:"+key) {
			t.Fatalf("chat key %q of %q does not match its line %q", key, body, line)
		}
		if chat, typ := intake.ChatOf(body); (err != nil && (chat != 0 || typ != "")) || len(typ) > 32 {
			t.Fatalf("chat %d %q of %q (parse error %v)", chat, typ, body, err)
		}
		if err != nil {
			return
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil || m == nil {
			t.Fatalf("accepted %q, which is not a JSON object: %v", body, err)
		}
		raw, ok := m["update_id"]
		if !ok {
			t.Fatalf("accepted %q without update_id", body)
		}
		n, perr := strconv.ParseInt(string(raw), 10, 64)
		if id < 0 || perr != nil || n != id {
			t.Fatalf("accepted %q as %d, update_id is %s", body, id, raw)
		}
		if id > intake.MaxUpdateID {
			t.Fatalf("accepted %q as %d, above 2^53-1: a JavaScript reader rounds it", body, id)
		}
		// The top-level object holds update_id once, in any letter case,
		// so every reader agrees on it: encoding/json's case-insensitive
		// match into a struct field reads the same id.
		if keys := updateIDKeys(t, body); keys != 1 {
			t.Fatalf("accepted %q as %d, with %d update_id keys in some letter case", body, id, keys)
		}
		var head struct {
			UpdateID int64 `json:"update_id"`
		}
		if err := json.Unmarshal(body, &head); err != nil || head.UpdateID != id {
			t.Fatalf("accepted %q as %d; encoding/json reads %d (%v)", body, id, head.UpdateID, err)
		}
	})
}

// updateIDKeys counts the keys of body's top-level object that equal
// "update_id" in some letter case, as encoding/json matches field names.
func updateIDKeys(t *testing.T, body []byte) int {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("%q is not an object: %v %v", body, tok, err)
	}
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("key of %q: %v", body, err)
		}
		if strings.EqualFold(tok.(string), "update_id") {
			n++
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("value of %q: %v", body, err)
		}
	}
	return n
}
