package gateway_test

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/gateway"
)

// FuzzCanonicalHash: the hash never panics, is deterministic, and a JSON
// object of string fields hashes like its form encoding, its multipart
// encoding and its keys in another order.
func FuzzCanonicalHash(f *testing.F) {
	f.Add("application/json", []byte(`{"chat_id":1,"text":"hi"}`), "a", "b")
	f.Add("application/x-www-form-urlencoded", []byte(`chat_id=1&text=hi%20there`), "text", "x")
	f.Add("multipart/form-data; boundary=zz", []byte("--zz\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--zz--\r\n"), "", "")
	f.Add("", []byte(`{"a":{"y":1,"x":[1,2,null]}}`), "k", "\x00")
	f.Add("text/plain", []byte("\xff\xfe"), "é", "ü")
	f.Fuzz(func(t *testing.T, contentType string, body []byte, k, v string) {
		for _, complete := range []bool{true, false} {
			h1 := gateway.CanonicalHash(contentType, nil, body, complete)
			if h2 := gateway.CanonicalHash(contentType, nil, bytes.Clone(body), complete); h1 != h2 || len(h1) != 64 {
				t.Fatalf("hash not deterministic: %q vs %q", h1, h2)
			}
		}
		if k == "" || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r == '"' || r == 0x7f }) || !utf8ish(k) || !utf8ish(v) {
			return
		}
		other := "zz" + k
		obj := map[string]string{k: v, other: "1"}
		js, _ := json.Marshal(obj)
		rev := []byte(`{` + mustQuote(other) + `:"1",` + mustQuote(k) + `:` + mustQuote(v) + `}`)
		form := url.Values{k: {v}, other: {"1"}}.Encode()
		var mp bytes.Buffer
		mw := multipart.NewWriter(&mp)
		_ = mw.WriteField(other, "1")
		_ = mw.WriteField(k, v)
		mw.Close()
		want := gateway.CanonicalHash("application/json", nil, js, true)
		for name, got := range map[string]string{
			"reordered JSON": gateway.CanonicalHash("application/json", nil, rev, true),
			"form":           gateway.CanonicalHash("application/x-www-form-urlencoded", nil, []byte(form), true),
			"multipart":      gateway.CanonicalHash(mw.FormDataContentType(), nil, mp.Bytes(), true),
			"query":          gateway.CanonicalHash("", url.Values{k: {v}, other: {"1"}}, nil, true),
		} {
			if got != want {
				t.Errorf("%s of {%q: %q} hashes differently from JSON", name, k, v)
			}
		}
		if gateway.CanonicalHash("application/json", nil, []byte(`{`+mustQuote(k)+`:`+mustQuote(v+"x")+`}`), true) ==
			gateway.CanonicalHash("application/json", nil, []byte(`{`+mustQuote(k)+`:`+mustQuote(v)+`}`), true) {
			t.Errorf("different values hash alike")
		}
	})
}

// FuzzJSONParams: walking a JSON body member by member gives the
// canonical parameters that decoding it whole gives, for every input.
func FuzzJSONParams(f *testing.F) {
	for _, seed := range []string{
		`{"chat_id":12345,"text":"hello there"}`,
		`{"chat_id":-1001234567890,"text":"Привет, мир 👋","parse_mode":"HTML"}`,
		`{"chat_id":1,"text":"a\"b\u00e9\ud83d\ude00","reply_markup":{"inline_keyboard":[[{"text":"x","callback_data":"y"}]]}}`,
		`{"a":1,"a":2}`,
		`{"a":1,"a":null}`,
		`{"a":null,"b":true,"c":false,"d":1.5e+10,"e":-0,"f":[1,2.50,null,{"z":1,"a":"<&>"}]}`,
		`{"k\u0065y":"v"}`,
		`{"ключ":"v"}`,
		` { "a" : "b" } `,
		`{}`, `[]`, `null`, `"x"`, `1`, ``, `{"a":1}x`, `{"a":"ÿ"}`, `{"a":"\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gotOK := gateway.JSONParams(body)
		want, wantOK := gateway.JSONParamsDecoded(body)
		if gotOK != wantOK || (gotOK && !slices.Equal(got, want)) {
			t.Fatalf("body %q: walked %q, %v; decoded %q, %v", body, got, gotOK, want, wantOK)
		}
	})
}

func mustQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// utf8ish reports whether s survives a JSON round trip unchanged.
func utf8ish(s string) bool {
	b, _ := json.Marshal(s)
	var back string
	return json.Unmarshal(b, &back) == nil && back == s
}

// FuzzIdentityAndMethod: the URL parsers never panic and accept only what
// they document.
func FuzzIdentityAndMethod(f *testing.F) {
	f.Add("12", "1", "0b6c1f2e-aaaa-bbbb-cccc-000000000000", "/bot1:x/sendMessage")
	f.Add("-1", "0", "", "/botsendMessage")
	f.Add("99999999999999999999", "x", "a/b", "/a/1/1/c/bot1:t/getMe/extra")
	f.Fuzz(func(t *testing.T, u, a, c, path string) {
		id, err := gateway.ParseIdentity(u, a, c)
		if err == nil && (id.UpdateID < 0 || id.Attempt < 1 || id.ClaimID != c || strings.ContainsAny(c, "/?#")) {
			t.Errorf("ParseIdentity(%q, %q, %q) = %+v", u, a, c, id)
		}
		if m := gateway.MethodOf(path); m != "" && (len(m) > 64 || strings.ContainsAny(m, "/?#. ")) {
			t.Errorf("MethodOf(%q) = %q", path, m)
		}
	})
}

// FuzzRoutePath: whatever the token and method, every way a library joins
// the announced root's tail ("/bot") with a call reads as Telegram's
// /bot<token>/<method>, and no path comes out with a doubled slash.
func FuzzRoutePath(f *testing.F) {
	f.Add("123:abc", "sendMessage", "/bot//x")
	f.Add("1:_-", "getMe", "")
	f.Fuzz(func(t *testing.T, token, method, other string) {
		if out := gateway.RoutePath(other); strings.Contains(out, "//") {
			t.Errorf("RoutePath(%q) = %q: a doubled slash", other, out)
		}
		if !tokenLike(token) || method == "" || strings.ContainsAny(method, "/?#") {
			return
		}
		want := "/bot" + token + "/" + method
		for _, p := range []string{
			"/bot/bot" + token + "/" + method,  // root + "/bot<token>/<method>"
			"/bot" + token + "/" + method,      // root + "<token>/<method>", or Telegraf's resolution
			"/bot//bot" + token + "/" + method, // a trailing slash added by hand
			"//bot/bot" + token + "/" + method,
			"/bot/" + token + "/" + method, // python-telegram-bot's base_url with a trailing slash
		} {
			if got := gateway.RoutePath(p); got != want {
				t.Errorf("RoutePath(%q) = %q; want %q", p, got, want)
			}
		}
		if got, want := gateway.RoutePath("/bot/file/bot"+token+"/"+method), "/file/bot"+token+"/"+method; got != want {
			t.Errorf("a file under the root: %q; want %q", got, want)
		}
	})
}

// tokenLike reports whether s has a bot token's shape: digits, a colon,
// then letters, digits, _ and -.
func tokenLike(s string) bool {
	id, secret, ok := strings.Cut(s, ":")
	if !ok || id == "" || secret == "" {
		return false
	}
	for _, r := range id {
		if r < '0' || r > '9' {
			return false
		}
	}
	for _, r := range secret {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}
