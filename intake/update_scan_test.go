package intake

import (
	"testing"
)

// scanCases are bodies on and off scanUpdate's fast path.
var scanCases = []string{
	`{"update_id":1,"message":{"message_id":5,"from":{"id":7,"is_bot":false,"first_name":"A"},"chat":{"id":-100123,"type":"supergroup","title":"T"},"date":1,"text":"hi \"there\" \u00e9"}}`,
	`{"update_id":1,"callback_query":{"id":"q","from":{"id":7},"message":{"chat":{"id":55,"type":"private"}},"data":"x"}}`,
	`{"update_id":1,"inline_query":{"from":{"id":7}}}`,
	`{"update_id":1,"my_chat_member":{"chat":{"id":"@channel"}}}`,
	`{"update_id":1,"poll_answer":{"voter_chat":{"id":3}}}`,
	`{"update_id":1,"message_reaction_count":{"user":{"id":4}}}`,
	`{"update_id":8,"poll":{"id":"p1"}}`,
	`{"update_id":8,"message":{"chat":{"id":true}}}`,
	`{"update_id":8,"x":1,"message":{"chat":{"id":2}},"edited_message":{"chat":{"id":3}}}`,
	` {"message":{},"update_id": 9223372036854775807 } `,
	`{"update_id":3,"message":{"chat":{"id":1,"type":"group"},"chat":{"id":2,"type":7}}}`,
	`{"update_id":3,"message":{"chat":{"id":1.5,"type":"group"}}}`,
	`{"update_id":3,"message":{"chat":{"id":"12","type":"group"}}}`,
	`{"update_id":3,"message":{"chat":{"id":12,"type":null}}}`,
	`{"update_id":3,"message":{"chat":{"id":12,"type":"` + "0123456789012345678901234567890123" + `"}}}`,
	`{"update_id":3,"message":{"chat":{"id":null},"from":{"id":9}}}`,
	`{"update_id":3,"message":{"Chat":{"id":1},"from":{"id":9}}}`,
	`{"update_id":3,"message":{"chat":{"ID":1},"from":{"id":9}}}`,
	`{"update_id":3,"message":{"ch\u0061t":{"id":1},"from":{"id":9}}}`,
	`{"update_id":3,"message":{"chat":{"id":"\u0041b"}}}`,
	`{"update_id":3,"message":{"chat":{"id":"é"}}}`,
	`{"update_id":3,"mess\u0061ge":{"chat":{"id":1}}}`,
	`{"update_id":3,"update_id":4,"message":[1,{"chat":2}],"edited_message":"x"}`,
	`{"update_id":"3"}`, `{"update_id":1.5}`, `{"update_id":-1}`, `{"update_id":1,}`, `[]`, `null`, ``,
	`{"update_id":1} {"update_id":2}`, `{}`, `{"message":{"chat":{"id":1}}}`,
	"{\"update_id\":1,\"text\":\"\xff\"}",
	`{"update_id":9,"callback_query":{"message":{"chat":{"id":-5,"type":"channel"}}}}`,
	`{"update_id":9,"weird_new_kind":{"from":{"id":-5,"type":"channel"}}}`,
	`{"update_id":5,"Update_ID":9,"message":{"chat":{"id":1}}}`,
	`{"UPDATE_ID":9,"update_id":5}`,
	`{"update_id":5,"message":{"chat":{"id":1}},"update_id":9}`,
	`{"update_id":5,"update\u005fid":9}`,
	`{"update_id":5,"message":{"chat":{"id":1},"Update_ID":9}}`,
}

// sameAsDecode checks that scanUpdate, when it answers, answers as
// decodeUpdate does.
func sameAsDecode(t *testing.T, body []byte) (fast bool) {
	t.Helper()
	got, ok := scanUpdate(body)
	want, err := decodeUpdate(body)
	if !ok {
		return false
	}
	if err != nil {
		t.Fatalf("scanUpdate(%q) = %+v, decodeUpdate refuses it: %v", body, got, err)
	}
	if got != want {
		t.Fatalf("scanUpdate(%q) = %+v, decodeUpdate = %+v", body, got, want)
	}
	return true
}

func TestScanUpdateMatchesDecode(t *testing.T) {
	t.Parallel()
	fast := 0
	for _, c := range scanCases {
		if sameAsDecode(t, []byte(c)) {
			fast++
		}
	}
	// Telegram-shaped updates take the fast path.
	for _, c := range scanCases[:9] {
		if _, ok := scanUpdate([]byte(c)); !ok {
			t.Errorf("scanUpdate(%s) left it to decodeUpdate", c)
		}
	}
	// Bodies whose reading needs encoding/json's rules do not.
	for _, c := range []string{
		`{"update_id":3,"message":{"Chat":{"id":1},"from":{"id":9}}}`,
		`{"update_id":3,"message":{"ch\u0061t":{"id":1},"from":{"id":9}}}`,
		`{"update_id":3,"message":{"chat":{"id":"\u0041b"}}}`,
		`{"update_id":"3"}`, `{"update_id":1,}`,
		`{"update_id":5,"Update_ID":9,"message":{"chat":{"id":1}}}`,
		`{"update_id":5,"message":{"chat":{"id":1}},"update_id":9}`,
	} {
		if p, ok := scanUpdate([]byte(c)); ok {
			t.Errorf("scanUpdate(%s) = %+v, want it left to decodeUpdate", c, p)
		}
	}
}

// FuzzScanUpdate checks that the fast path, whenever it answers, answers as
// encoding/json's reading does.
func FuzzScanUpdate(f *testing.F) {
	for _, c := range scanCases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, body []byte) { sameAsDecode(t, body) })
}

func BenchmarkParseUpdate(b *testing.B) {
	body := []byte(scanCases[0])
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parseUpdate(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := decodeUpdate(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
