package dashboard

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestChatOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ body, want string }{
		{`{"update_id":1,"message":{"chat":{"id":-100123},"from":{"id":5}}}`, "-100123"},
		{`{"update_id":1,"callback_query":{"from":{"id":5},"message":{"chat":{"id":77}}}}`, "77"},
		{`{"update_id":1,"callback_query":{"from":{"id":5}}}`, "5"},
		{`{"update_id":1,"my_chat_member":{"chat":{"id":9},"from":{"id":5}}}`, "9"},
		{`{"update_id":1,"poll_answer":{"user":{"id":8}}}`, "8"},
		{`{"update_id":1,"poll_answer":{"voter_chat":{"id":-4}}}`, "-4"},
		{`{"update_id":1,"message":{"chat":{"id":"@chan"}}}`, "@chan"},
		{`{"update_id":1,"message":{"chat":{"id":1.5}}}`, ""},
		{`{"update_id":1,"inline_query":{"query":"x"}}`, ""},
		{`{"update_id":1}`, ""},
		{`[1,2]`, ""},
		{`not json`, ""},
		{``, ""},
	} {
		if got := chatOf([]byte(tc.body)); got != tc.want {
			t.Errorf("chatOf(%s) = %q, want %q", tc.body, got, tc.want)
		}
	}
}

func TestFormatBody(t *testing.T) {
	t.Parallel()
	id := func(s string) string { return s }
	f := formatBody([]byte(`{"a":1}`), 100, id)
	if !f.Valid || f.Text != "{\n  \"a\": 1\n}" || f.Truncated {
		t.Errorf("indent: %+v", f)
	}
	f = formatBody([]byte("not json \xff"), 100, id)
	if f.Valid || !utf8.ValidString(f.Text) {
		t.Errorf("raw: %+v", f)
	}
	f = formatBody([]byte(`"`+strings.Repeat("é", 100)+`"`), 11, id)
	if !f.Truncated || len(f.Text) > 11 || !utf8.ValidString(f.Text) {
		t.Errorf("cut: %q", f.Text)
	}
}

// FuzzChatOf: any body is handled without a panic, and a chat found is an
// id that a body names.
func FuzzChatOf(f *testing.F) {
	for _, s := range []string{
		`{"update_id":1,"message":{"chat":{"id":-100123}}}`,
		`{"update_id":1,"callback_query":{"from":{"id":5},"message":{"chat":{"id":77}}}}`,
		`{"update_id":1,"poll_answer":{"voter_chat":{"id":-4}}}`,
		`{"a":{"chat":{"id":"x"}}}`, `{}`, `[]`, `null`, `{"a":{"chat":{"id":99999999999999999999}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c := chatOf(body)
		if c != "" && !strings.Contains(string(body), strings.TrimPrefix(c, "-")) && utf8.Valid(body) && !strings.Contains(string(body), `\`) {
			t.Errorf("chatOf found %q, which the body does not name", c)
		}
	})
}

// FuzzFormatBody: the shown text is valid UTF-8, within the bound, and
// never carries a secret that the body held whole.
func FuzzFormatBody(f *testing.F) {
	f.Add([]byte(`{"update_id":1,"message":{"text":"SECRET-TOKEN"}}`), 40)
	f.Add([]byte("\xff\xfeSECRET-TOKEN"), 1024)
	f.Add([]byte(`"SECRET-TOKENSECRET-TOKEN"`), 5)
	f.Fuzz(func(t *testing.T, body []byte, max int) {
		if max < 1 || max > 1<<16 {
			return
		}
		red := func(s string) string { return strings.ReplaceAll(s, "SECRET-TOKEN", "[redacted]") }
		fb := formatBody(body, max, red)
		if len(fb.Text) > max || !utf8.ValidString(fb.Text) || strings.Contains(fb.Text, "SECRET-TOKEN") {
			t.Errorf("formatBody(%q, %d) = %q", body, max, fb.Text)
		}
	})
}

// A young recorder is charted from its start (five minutes at least), an
// old one over the whole window.
func TestChartSpan(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	for _, tc := range []struct {
		age  time.Duration
		want int
	}{
		{0, minChartBuckets},
		{time.Minute, minChartBuckets},
		{10 * time.Minute, 62},
		{Window - time.Second, numBuckets},
		{3 * Window, numBuckets},
	} {
		if got := chartSpan(Snapshot{Started: start, Taken: start.Add(tc.age)}); got != tc.want {
			t.Errorf("age %v: span %d buckets, want %d", tc.age, got, tc.want)
		}
	}
}
