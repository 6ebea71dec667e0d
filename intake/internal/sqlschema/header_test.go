package sqlschema

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range []http.Header{
		nil,
		{},
		{"Retry-After": {"3"}},
		{"Content-Type": {"application/json"}, "X-Odd": {`"quoted" \ and ünïcode`}},
	} {
		s := EncodeHeader(h)
		got, err := DecodeHeader(s)
		if err != nil {
			t.Fatalf("DecodeHeader(EncodeHeader(%v)) = %v", h, err)
		}
		if len(h) == 0 {
			if got != nil {
				t.Fatalf("an empty header came back as %v, want nil", got)
			}
			continue
		}
		if !reflect.DeepEqual(got, h) {
			t.Fatalf("round trip of %v gave %v", h, got)
		}
	}
	// Only each name's first value is kept.
	got, err := DecodeHeader(EncodeHeader(http.Header{"A": {"1", "2"}}))
	if err != nil || !reflect.DeepEqual(got, http.Header{"A": {"1"}}) {
		t.Fatalf("a name with two values came back as %v, %v; want its first", got, err)
	}
}

func TestDecodeHeaderRefusesWhatEncodeNeverWrites(t *testing.T) {
	for _, s := range []string{"{", "[]", `{"a":1}`, `{"a":["x"]}`, "not json"} {
		if h, err := DecodeHeader(s); err == nil {
			t.Errorf("DecodeHeader(%q) = %v, want an error", s, h)
		}
	}
}

// FuzzDecodeHeader: any stored text decodes without panicking, and what
// decodes is written back by EncodeHeader as text that decodes to the
// same header.
func FuzzDecodeHeader(f *testing.F) {
	for _, s := range []string{"", "{}", "null", `{"Retry-After":"3"}`, `{"a":"\u0000"}`, `{"a":"1","a":"2"}`, "{", `{"a":1}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := DecodeHeader(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "decode attempt header: ") {
				t.Fatalf("error %q does not say what failed", err)
			}
			return
		}
		again, err := DecodeHeader(EncodeHeader(h))
		if err != nil {
			t.Fatalf("DecodeHeader(EncodeHeader(%v)): %v", h, err)
		}
		if len(h) == 0 {
			if len(again) != 0 {
				t.Fatalf("an empty header came back as %v", again)
			}
			return
		}
		if !reflect.DeepEqual(again, h) {
			t.Fatalf("%q decoded to %v, which round-trips to %v", s, h, again)
		}
	})
}

// FuzzValidateTable: a name it accepts is safe to put in SQL unquoted.
func FuzzValidateTable(f *testing.F) {
	for _, s := range []string{"telegram_updates", "", "1a", `a"b`, "a;DROP TABLE x", strings.Repeat("a", MaxTableLen+1), "ä"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if ValidateTable(name) != nil {
			return
		}
		if name == "" || len(name) > MaxTableLen || name[0] >= '0' && name[0] <= '9' {
			t.Fatalf("accepted %q", name)
		}
		for _, c := range []byte(name) {
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				t.Fatalf("accepted %q, which holds %q", name, c)
			}
		}
	})
}
