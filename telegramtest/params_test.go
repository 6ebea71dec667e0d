package telegramtest

import (
	"bytes"
	"mime/multipart"
	"strings"
	"testing"
)

func TestParseParams(t *testing.T) {
	t.Parallel()
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	mw.WriteField("chat_id", "42")
	fw, _ := mw.CreateFormFile("photo", "cat.jpg")
	fw.Write([]byte("JPEGDATA"))
	mw.Close()

	tests := []struct {
		name, ct, query, body string
		want                  map[string]string
		wantFile              string
		wantErr               bool
	}{
		{name: "json", ct: "application/json", body: `{"chat_id":42,"text":"hi","reply_markup":{"a":1},"x":null}`,
			want: map[string]string{"chat_id": "42", "text": "hi", "reply_markup": `{"a":1}`}},
		{name: "json charset", ct: "application/json; charset=utf-8", body: `{"chat_id":"@chan"}`, want: map[string]string{"chat_id": "@chan"}},
		{name: "form", ct: "application/x-www-form-urlencoded", body: "chat_id=42&text=a+b", want: map[string]string{"chat_id": "42", "text": "a b"}},
		{name: "query", query: "chat_id=7&text=q", want: map[string]string{"chat_id": "7", "text": "q"}},
		{name: "no content type is json", body: `{"a":"b"}`, want: map[string]string{"a": "b"}},
		{name: "multipart", ct: mw.FormDataContentType(), body: mp.String(), want: map[string]string{"chat_id": "42"}, wantFile: "cat.jpg"},
		{name: "json array", ct: "application/json", body: `[1,2]`, wantErr: true},
		{name: "json null", ct: "application/json", body: `null`, want: map[string]string{}},
		{name: "broken json", ct: "application/json", body: `{"a":`, wantErr: true},
		{name: "multipart without boundary", ct: "multipart/form-data", body: "x", wantErr: true},
		{name: "bad query", query: "a=%zz", wantErr: true},
		{name: "too many params", ct: "application/x-www-form-urlencoded", body: manyParams(maxParams + 1), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parseParams(tt.ct, tt.query, []byte(tt.body))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseParams = %v, want an error", p.v)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.want {
				if p.v[k] != v {
					t.Errorf("%s = %q, want %q", k, p.v[k], v)
				}
			}
			if len(p.v) != len(tt.want) {
				t.Errorf("params = %v, want %v", p.v, tt.want)
			}
			if tt.wantFile != "" && p.files["photo"].Name != tt.wantFile {
				t.Errorf("files = %v, want photo %s", p.files, tt.wantFile)
			}
		})
	}
}

func manyParams(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString("p")
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(strings.Repeat("y", i/26))
		b.WriteString("=1")
	}
	return b.String()
}

func FuzzParseParams(f *testing.F) {
	f.Add("application/json", "", []byte(`{"chat_id":1,"text":"x"}`))
	f.Add("application/x-www-form-urlencoded", "a=1", []byte("chat_id=1&text=%20"))
	f.Add("multipart/form-data; boundary=X", "", []byte("--X\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nb\r\n--X--\r\n"))
	f.Add("", "offset=-1", []byte(""))
	f.Add("text/plain", "", []byte(`{"a":[1,{"b":null}]}`))
	f.Fuzz(func(t *testing.T, ct, query string, body []byte) {
		p, err := parseParams(ct, query, body)
		if err != nil {
			return
		}
		if len(p.v)+len(p.files) > maxParams {
			t.Fatalf("%d params, over the bound %d", len(p.v)+len(p.files), maxParams)
		}
		for k := range p.v {
			p.int64(k) // must not panic
			p.bool(k)
		}
	})
}
