package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"testing"

	"github.com/tgrelay/tgrelay/internal/jsonscan"
)

// members walks the object body holds and returns its members as
// "key=raw", with "?" for a key that is not plain.
func members(t *testing.T, body string) (got []string, bad bool) {
	t.Helper()
	s := jsonscan.New([]byte(body))
	s.Space()
	if !s.Consume('{') {
		t.Fatalf("%q: no object", body)
	}
	for key, raw, more := s.Member(); more; key, raw, more = s.Member() {
		k := string(key)
		if key == nil {
			k = "?"
		}
		got = append(got, k+"="+string(raw))
	}
	return got, s.Bad()
}

func TestMember(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"empty", `{}`, nil},
		{"scalars", `{"a":1,"b":-2.5e3,"c":true,"d":false,"e":null,"f":"x"}`,
			[]string{"a=1", "b=-2.5e3", "c=true", "d=false", "e=null", "f=\"x\""}},
		{"nested", `{"a":{"b":{"c":[1,[2,{"d":3}]]}},"e":[],"f":{}}`,
			[]string{`a={"b":{"c":[1,[2,{"d":3}]]}}`, "e=[]", "f={}"}},
		{"brackets in strings", `{"a":{"s":"}]{["},"b":["]","}"],"c":"{"}`,
			[]string{`a={"s":"}]{["}`, `b=["]","}"]`, `c="{"`}},
		{"escapes in values", `{"a":"q\"uote","b":"back\\","c":{"k\"}":"\u007d"},"d":1}`,
			[]string{`a="q\"uote"`, `b="back\\"`, `c={"k\"}":"\u007d"}`, "d=1"}},
		{"escaped keys", `{"ch\u0061t_id":1,"q\"":2,"b\\":3,"plain":4}`,
			[]string{"?=1", "?=2", "?=3", "plain=4"}},
		{"non-ASCII key", `{"café":1,"x":"é"}`, []string{"?=1", `x="é"`}},
		{"white space", " \t\n\r{ \"a\" :\n1 ,\r\n\t\"b\"\t:\t[ 1 , 2 ] ,\"c\": \"s\" \n}\n ",
			[]string{"a=1", "b=[ 1 , 2 ]", `c="s"`}},
		{"repeated keys", `{"a":1,"a":2}`, []string{"a=1", "a=2"}},
		{"empty key", `{"":0}`, []string{"=0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if !json.Valid([]byte(tc.body)) {
				t.Fatalf("test body %q is not valid JSON", tc.body)
			}
			got, bad := members(t, tc.body)
			if bad || !slices.Equal(got, tc.want) {
				t.Errorf("members of %s = %q (bad %v), want %q", tc.body, got, bad, tc.want)
			}
		})
	}
}

// TestBad feeds the walk what valid JSON cannot hold where it stands; it
// sets Bad and ends the object, and Bad stays set.
func TestBad(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{1:2}`, `{"a" 1}`, `{"a":1,,"b":2}`, `{"a":1 "b"}`} {
		got, bad := members(t, body)
		if !bad {
			t.Errorf("members of %s = %q, Bad false, want true", body, got)
		}
	}
	s := jsonscan.New([]byte(`{x}`))
	s.Consume('{')
	s.Member()
	if _, _, more := s.Member(); more || !s.Bad() {
		t.Errorf("after a bad member: more %v, Bad %v; want false, true", more, s.Bad())
	}
}

func TestSpaceAndConsume(t *testing.T) {
	t.Parallel()
	s := jsonscan.New([]byte(" \t\r\n[x"))
	if s.Consume('[') {
		t.Error("Consume skipped white space")
	}
	s.Space()
	if s.Consume('{') || !s.Consume('[') || s.Consume('[') {
		t.Error(`Consume after Space: want only "[" consumed`)
	}
	end := jsonscan.New(nil)
	end.Space()
	if end.Consume('{') {
		t.Error("Consume at the end of the input reported true")
	}
	if _, _, more := end.Member(); more || end.Bad() {
		t.Error("Member at the end of the input: want no member and no Bad")
	}
}

func TestPlainString(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lit, want string
		ok        bool
	}{
		{`"abc"`, "abc", true},
		{`""`, "", true},
		{`"@name_1 "`, "@name_1 ", true},
		{`"a\"b"`, "", false},
		{`"\u0041"`, "", false},
		{`"\\"`, "", false},
		{`"é"`, "", false},
		{"\"\xff\"", "", false},
		{`123`, "", false},
		{`"`, "", false},
		{``, "", false},
		{`{"a":"b"}`, "", false},
	} {
		got, ok := jsonscan.PlainString([]byte(tc.lit))
		if string(got) != tc.want || ok != tc.ok {
			t.Errorf("PlainString(%s) = %q, %v; want %q, %v", tc.lit, got, ok, tc.want, tc.ok)
		}
	}
}

// TestNoAllocations is not parallel: AllocsPerRun counts the whole
// process's allocations.
func TestNoAllocations(t *testing.T) {
	body := []byte(`{"chat_id":-100123,"text":"hi","reply_markup":{"inline_keyboard":[[{"text":"a","callback_data":"b"}]]}}`)
	n := testing.AllocsPerRun(100, func() {
		s := jsonscan.New(body)
		s.Space()
		s.Consume('{')
		for _, raw, more := s.Member(); more; _, raw, more = s.Member() {
			jsonscan.PlainString(raw)
		}
	})
	if n != 0 {
		t.Errorf("a walk allocates %v times, want 0", n)
	}
}

// decoded returns the members of the object body holds as encoding/json
// reads them: each key decoded, each value raw.
func decoded(body []byte) (keys []string, raws []string, err error) {
	d := json.NewDecoder(bytes.NewReader(body))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("no object: %v %v", tok, err)
	}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, nil, err
		}
		var raw json.RawMessage
		if err := d.Decode(&raw); err != nil {
			return nil, nil, err
		}
		keys = append(keys, tok.(string))
		raws = append(raws, string(raw))
	}
	if _, err := d.Token(); err != nil && err != io.EOF {
		return nil, nil, err
	}
	return keys, raws, nil
}

// FuzzMemberMatchesDecoder checks the walk of any valid JSON object
// against encoding/json's reading: the same members in the same order,
// each raw value byte for byte, each plain key as decoded.
func FuzzMemberMatchesDecoder(f *testing.F) {
	for _, body := range []string{
		`{"chat_id":-100123,"text":"hi","reply_markup":{"chat_id":1,"x":[1,{"chat_id":2}]}}`,
		" {\"a\" : \"}\\\"]\" , \"b\\u0062\":[{},[]] ,\"é\":null}\n",
		`{"a":1e5,"a":true,"":false}`,
		`[1,2]`, `"x"`, `{}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !json.Valid(body) {
			return
		}
		keys, raws, err := decoded(body)
		if err != nil {
			return // not an object
		}
		s := jsonscan.New(body)
		s.Space()
		if !s.Consume('{') {
			t.Fatalf("%q: encoding/json read an object, the walk found none", body)
		}
		i := 0
		for key, raw, more := s.Member(); more; key, raw, more = s.Member() {
			if i >= len(keys) {
				t.Fatalf("%q: the walk found member %d (%q), encoding/json %d members", body, i, raw, len(keys))
			}
			if key != nil && string(key) != keys[i] {
				t.Errorf("%q: member %d: key %q, encoding/json %q", body, i, key, keys[i])
			}
			if key == nil && !bytes.ContainsAny(body, "\\") && isASCII(keys[i]) {
				t.Errorf("%q: member %d: plain key %q reported as not plain", body, i, keys[i])
			}
			if string(raw) != raws[i] {
				t.Errorf("%q: member %d: value %q, encoding/json %q", body, i, raw, raws[i])
			}
			i++
		}
		if s.Bad() || i != len(keys) {
			t.Errorf("%q: the walk found %d members (bad %v), encoding/json %d", body, i, s.Bad(), len(keys))
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// FuzzWalkAnyInput walks any bytes, valid JSON or not, as a careless
// caller would: the answers mean nothing, but the walk must neither panic
// nor loop, and every slice it returns lies within the input.
func FuzzWalkAnyInput(f *testing.F) {
	for _, body := range []string{
		`{"`, `{"a`, `{"a\`, `{"a":"\`, `{"a":{"b":[`, `{"a":`, `{"a"}`, `{,`, `{"a":1,,}`,
		`{"a":]`, `{"a":"x"`, "{\"\xff\":1}", `{"chat_id":-1}`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s := jsonscan.New(body)
		s.Space()
		if !s.Consume('{') {
			return
		}
		for n, key, raw, more := 0, []byte(nil), []byte(nil), true; more; n++ {
			if n > len(body) {
				t.Fatalf("%q: more members than bytes", body)
			}
			key, raw, more = s.Member()
			for _, b := range [][]byte{key, raw} {
				if len(b) > 0 && !bytes.Contains(body, b) {
					t.Fatalf("%q: %q is not part of the input", body, b)
				}
			}
			jsonscan.PlainString(raw)
		}
	})
}
