package throttle_test

import (
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/throttle"
)

// sendMessage is a typical call's body, about 150 bytes.
const sendMessage = `{"chat_id":-1001234567890,"text":"Order 1234 has shipped",` +
	`"reply_markup":{"inline_keyboard":[[{"text":"Track","url":"https://example.com/t/1234"}]]}}`

// longText is a sendMessage body with a 4 KB text.
var longText = `{"chat_id":"@channel_name","text":"` + strings.Repeat("lorem ipsum dolor sit amet, ", 4096/28) + `","allow_paid_broadcast":true}`

// jsonCases are bodies on and off fromJSON's fast path.
var jsonCases = []string{
	sendMessage,
	`{"text":"x","reply_markup":{"chat_id":1,"x":[1,{"chat_id":2}]},"chat_id":42}`,
	`{"chat_id":"-1001234567890","text":"hi"}`,
	`{"chat_id":"@channel_name","text":"hi","allow_paid_broadcast":true}`,
	" \n{ \"chat_id\" :\t 77 ,\r\n \"allow_paid_broadcast\" : \"1\" }\n",
	`{"chat_id":1,"chat_id":2}`, `{"chat_id":1,"chat_id":"x"}`, `{"chat_id":1,"chat_id":0}`,
	`{"chat_id":null,"allow_paid_broadcast":null}`, `{"chat_id":null,"chat_id":7}`,
	`{"chat_id":true,"allow_paid_broadcast":false}`, `{"allow_paid_broadcast":true,"chat_id":false}`, `{"chat_id":true}`,
	`{"chat_id":{"id":5},"allow_paid_broadcast":true}`, `{"allow_paid_broadcast":true,"chat_id":[5]}`,
	`{"chat_id":3,"allow_paid_broadcast":{"a":1},"chat_id":5}`,
	`{"chat_id":1.5}`, `{"chat_id":1e3}`, `{"chat_id":-0}`, `{"chat_id":99999999999999999999}`,
	`{"chat_id":" 12 "}`, `{"chat_id":"@"}`, `{"chat_id":""}`,
	`{"allow_paid_broadcast":1}`, `{"allow_paid_broadcast":"TRUE"}`, `{"allow_paid_broadcast":"t"}`,
	`{"allow_paid_broadcast":true,"allow_paid_broadcast":false}`, `{"allow_paid_broadcast":"yes"}`,
	`{"Chat_ID":5,"chat_ID":6}`, `{}`, `[{"chat_id":1}]`, `"chat_id"`, `42`, `null`, `true`,
	// Off the fast path: escapes and non-ASCII bytes where they matter,
	// and bodies that are not one valid JSON value.
	`{"ch\u0061t_id":5}`, `{"chat_id\u0000":5,"chat_id":6}`, `{"é":1,"chat_id":3}`,
	`{"chat_id":"\u0031\u0032"}`, `{"chat_id":"12\"","allow_paid_broadcast":"tru\u0065"}`,
	`{"chat_id":"` + "\u00a0" + `12"}`, "{\"chat_id\":\"@\xff\"}", `{"chat_id":"@café"}`,
	`{"chat_id":5,"text":"hel`, `{"text":"a","chat_id":`, `{"chat_id":5`, `{"chat_id":"@na`,
	`{"chat_id":5}{"chat_id":6}`, `{"chat_id":5,}`, `{"chat_id":5 "x":1}`, ``, `   `, `{`,
	longText,
}

// matches checks that fromJSON, and its fast path when it answers, find
// what the decoder finds in body over start. It reports whether the fast
// path answered.
func matches(t *testing.T, start throttle.JSONTarget, body []byte) (fast bool) {
	t.Helper()
	want := throttle.DecodeJSON(start, body)
	if got := throttle.FromJSON(start, body); got != want {
		t.Fatalf("fromJSON(%q) over %+v = %+v, the decoder %+v", body, start, got, want)
	}
	got, ok := throttle.ScanJSON(start, body)
	if !ok {
		if got != start {
			t.Fatalf("the fast path left %q to the decoder but changed %+v to %+v", body, start, got)
		}
		return false
	}
	if got != want {
		t.Fatalf("the fast path's reading of %q over %+v = %+v, the decoder's %+v", body, start, got, want)
	}
	return true
}

func TestFromJSONFastMatchesDecoder(t *testing.T) {
	t.Parallel()
	starts := []throttle.JSONTarget{{}, {Chat: 9, Found: true, Paid: true}}
	for _, c := range jsonCases {
		for _, start := range starts {
			matches(t, start, []byte(c))
		}
	}
	// The bodies clients send take the fast path.
	for _, c := range append(jsonCases[:5:5], longText) {
		if !matches(t, throttle.JSONTarget{}, []byte(c)) {
			t.Errorf("fromJSON left %.80q to the decoder", c)
		}
	}
	// Bodies whose reading needs encoding/json's decoding do not.
	for _, c := range []string{
		`{"ch\u0061t_id":5}`, `{"chat_id":"\u0031\u0032"}`, `{"chat_id":"` + "\u00a0" + `12"}`,
		`{"chat_id":5,"text":"hel`,
	} {
		if matches(t, throttle.JSONTarget{}, []byte(c)) {
			t.Errorf("the fast path read %q, which only the decoder reads rightly", c)
		}
	}
}

// TestFromJSON pins what fromJSON finds: the rules the fast path
// must keep.
func TestFromJSON(t *testing.T) {
	t.Parallel()
	at := throttle.UsernameKey("@channel_name")
	for _, tc := range []struct {
		name, body string
		want       throttle.JSONTarget
	}{
		{"number", sendMessage, throttle.JSONTarget{Chat: -1001234567890, Found: true}},
		{"string", `{"chat_id":"-100"}`, throttle.JSONTarget{Chat: -100, Found: true}},
		{"username and paid", longText, throttle.JSONTarget{Chat: at, Found: true, Paid: true}},
		{"nested chat_id skipped", `{"reply_markup":{"chat_id":1},"chat_id":2}`, throttle.JSONTarget{Chat: 2, Found: true}},
		{"an object stops the read", `{"chat_id":{"id":5},"allow_paid_broadcast":true}`, throttle.JSONTarget{}},
		{"an array stops the read", `{"allow_paid_broadcast":[true],"chat_id":5}`, throttle.JSONTarget{}},
		{"null goes on", `{"chat_id":null,"chat_id":7}`, throttle.JSONTarget{Chat: 7, Found: true}},
		{"repeated: in order", `{"chat_id":7,"chat_id":"x","allow_paid_broadcast":true,"allow_paid_broadcast":"0"}`,
			throttle.JSONTarget{Chat: 7, Found: true}},
		{"a bool chat_id ignored", `{"chat_id":true,"chat_id":3,"chat_id":false}`, throttle.JSONTarget{Chat: 3, Found: true}},
		{"paid string", `{"allow_paid_broadcast":"1"}`, throttle.JSONTarget{Paid: true}},
		{"paid number ignored", `{"allow_paid_broadcast":1}`, throttle.JSONTarget{}},
		{"keys match exactly", `{"Chat_id":5}`, throttle.JSONTarget{}},
		{"escaped key", `{"ch\u0061t_id":5}`, throttle.JSONTarget{Chat: 5, Found: true}},
		{"truncated", `{"chat_id":5,"text":"hel`, throttle.JSONTarget{Chat: 5, Found: true}},
		{"not an object", `[{"chat_id":1}]`, throttle.JSONTarget{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := throttle.FromJSON(throttle.JSONTarget{}, []byte(tc.body)); got != tc.want {
				t.Errorf("fromJSON(%.80q) = %+v, want %+v", tc.body, got, tc.want)
			}
		})
	}
}

// FuzzFromJSONFastMatchesDecoder checks that fromJSON's fast path,
// whenever it answers, answers as the decoder does, over any target a
// query may have set first.
func FuzzFromJSONFastMatchesDecoder(f *testing.F) {
	for _, c := range jsonCases {
		f.Add([]byte(c), int64(0), false, false)
	}
	f.Add([]byte(`{"allow_paid_broadcast":false}`), int64(9), true, true)
	f.Add([]byte(`{"chat_id":"x"}`), int64(-5), true, false)
	f.Fuzz(func(t *testing.T, body []byte, chat int64, found, paid bool) {
		matches(t, throttle.JSONTarget{Chat: chat, Found: found, Paid: paid}, body)
	})
}

func BenchmarkFromJSON(b *testing.B) {
	for _, body := range []struct{ name, body string }{
		{"sendMessage", sendMessage},
		{"text4KB", longText},
	} {
		data := []byte(body.body)
		if _, ok := throttle.ScanJSON(throttle.JSONTarget{}, data); !ok {
			b.Fatalf("%s: the fast path left the body to the decoder", body.name)
		}
		b.Run(body.name+"/fast", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				throttle.FromJSON(throttle.JSONTarget{}, data)
			}
		})
		b.Run(body.name+"/decoder", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				throttle.DecodeJSON(throttle.JSONTarget{}, data)
			}
		})
	}
}
