package forward_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/forward"
)

func TestParseReplies(t *testing.T) {
	for _, tc := range []struct {
		body    string
		methods []string
		ok      bool
		err     bool
	}{
		{``, nil, false, false},
		{`OK`, nil, false, false},
		{`{"ok":true}`, nil, false, false},
		{`[1,2]`, nil, false, false},
		{`{"method":"sendMessage","chat_id":1,"text":"a"}`, []string{"sendMessage"}, true, false},
		{`[{"method":"sendMessage","text":"a"},{"method":"sendPhoto"}]`, []string{"sendMessage", "sendPhoto"}, true, false},
		{`[{"method":"sendMessage"},{"text":"no method"}]`, nil, true, true},
		{`{"method":5}`, nil, true, true},
		{"[" + strings.Repeat(`{"method":"m"},`, forward.MaxReplies) + `{"method":"m"}]`, nil, true, true},
	} {
		methods, params, ok, err := forward.ParseReplies([]byte(tc.body))
		if ok != tc.ok || (err != nil) != tc.err || fmt.Sprint(methods) != fmt.Sprint(tc.methods) {
			t.Errorf("ParseReplies(%.40q) = %v, ok %v, err %v; want %v, ok %v, err %v", tc.body, methods, ok, err, tc.methods, tc.ok, tc.err)
		}
		for _, p := range params {
			if bytes.Contains(p, []byte(`"method"`)) || !json.Valid(p) {
				t.Errorf("params %s keep the method or are not JSON", p)
			}
		}
	}
}

func FuzzParseReplies(f *testing.F) {
	f.Add([]byte(`{"method":"sendMessage","chat_id":1}`))
	f.Add([]byte(`[{"method":"a"},{"method":"b","x":[1,{"method":"c"}]}]`))
	f.Add([]byte(`[{"method":""}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		methods, params, ok, err := forward.ParseReplies(body)
		if !ok && (err != nil || len(methods) > 0) {
			t.Fatalf("not a reply, yet %v, %v", methods, err)
		}
		if len(methods) > forward.MaxReplies || len(methods) != len(params) {
			t.Fatalf("%d methods, %d params", len(methods), len(params))
		}
		for i, m := range methods {
			if m == "" || !json.Valid(params[i]) {
				t.Fatalf("call %d: method %q params %s", i, m, params[i])
			}
		}
	})
}
