package throttle_test

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/throttle"
)

// inspect runs the transport's reading of a body and checks that the body
// it would send is byte for byte the one it got.
func inspect(t *testing.T, contentType string, body []byte) (chat int64, found, paid bool) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://x/bot1:t/sendMessage", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	chat, found, paid, out, _, err := throttle.Inspect(req)
	if err != nil {
		t.Fatalf("inspect: %v", err)
	}
	got, err := io.ReadAll(out)
	if err != nil {
		t.Fatalf("reading the body to send: %v", err)
	}
	out.Close()
	if !bytes.Equal(got, body) {
		t.Fatalf("body changed: sent %d bytes, got %d", len(got), len(body))
	}
	return chat, found, paid
}

// encode builds a sendMessage body naming chat (a number, or "@name") in
// one of the three encodings, with a filler parameter before chat_id.
func encode(t *testing.T, enc uint8, chat string, asString bool, filler string, paid bool) (string, []byte) {
	t.Helper()
	switch enc % 3 {
	case 0:
		var b bytes.Buffer
		b.WriteString(`{"text":`)
		f, _ := json.Marshal(filler)
		b.Write(f)
		b.WriteString(`,"reply_markup":{"chat_id":1,"x":[1,{"chat_id":2}]},"chat_id":`)
		if asString || strings.HasPrefix(chat, "@") {
			c, _ := json.Marshal(chat)
			b.Write(c)
		} else {
			b.WriteString(chat)
		}
		if paid {
			b.WriteString(`,"allow_paid_broadcast":true`)
		}
		b.WriteString("}")
		return "application/json", b.Bytes()
	case 1:
		v := url.Values{"text": {filler}}
		s := v.Encode() + "&chat_id=" + url.QueryEscape(chat)
		if paid {
			s += "&allow_paid_broadcast=true"
		}
		return "application/x-www-form-urlencoded", []byte(s)
	default:
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		if paid {
			mw.WriteField("allow_paid_broadcast", "true")
		}
		mw.WriteField("caption", filler)
		mw.WriteField("chat_id", chat)
		fw, _ := mw.CreateFormFile("photo", "p.jpg")
		fw.Write(bytes.Repeat([]byte(filler+"x"), 100))
		mw.Close()
		return mw.FormDataContentType(), b.Bytes()
	}
}

// FuzzChatID checks that the chat_id of a JSON, form or multipart body is
// found, whatever else the body holds, and that the body goes on unchanged.
func FuzzChatID(f *testing.F) {
	f.Add(int64(12345), "", uint8(0), false, "hello", false)
	f.Add(int64(-1001234567890), "", uint8(1), true, "a&b=c", true)
	f.Add(int64(0), "@channel_name", uint8(2), false, "\r\n--x\r\n", false)
	f.Add(int64(-5), "", uint8(2), false, strings.Repeat("z", 70000), true)
	f.Fuzz(func(t *testing.T, id int64, username string, enc uint8, asString bool, filler string, paid bool) {
		if !utf8Valid(filler) || len(filler) > 1<<17 {
			return
		}
		chat := strconv.FormatInt(id, 10)
		want, ok := id, id != 0
		if username != "" {
			if strings.ContainsAny(username, "\r\n\"\\") || strings.TrimSpace(username) != username || len(username) > 32 {
				return
			}
			chat = "@" + username
			want, ok = throttle.UsernameKey(chat), true
		}
		ct, body := encode(t, enc, chat, asString, filler, paid)
		got, found, gotPaid := inspect(t, ct, body)
		if len(body) > throttle.MaxPeekBytes && enc%3 != 0 {
			return // beyond the peek bound a chat may not be found; the body still passes unchanged
		}
		if len(body) > throttle.MaxPeekBytes && enc%3 == 0 && len(filler) > throttle.MaxPeekBytes/2 {
			return
		}
		if found != ok || (ok && got != want) {
			t.Fatalf("%s body %.200q: chat %d found %v, want %d %v", ct, body, got, found, want, ok)
		}
		if ok && gotPaid != paid && enc%3 != 2 {
			t.Fatalf("%s: paid %v, want %v", ct, gotPaid, paid)
		}
	})
}

// FuzzInspect feeds arbitrary bodies under every content type: no panic,
// and the body to send is the body received.
func FuzzInspect(f *testing.F) {
	f.Add("application/json", []byte(`{"chat_id":-100123,"text":"x"}`))
	f.Add("application/json", []byte(`{"chat_id":{"x":1}}`))
	f.Add("application/x-www-form-urlencoded", []byte(`chat_id=%ZZ&chat_id=5`))
	f.Add("multipart/form-data; boundary=b", []byte("--b\r\nContent-Disposition: form-data; name=\"chat_id\"\r\n\r\n42\r\n--b--\r\n"))
	f.Add("text/plain", []byte("chat_id=1"))
	f.Fuzz(func(t *testing.T, ct string, body []byte) {
		inspect(t, ct, body)
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

func TestUsernameKey(t *testing.T) {
	t.Parallel()
	a, b := throttle.UsernameKey("@Channel"), throttle.UsernameKey("channel")
	if a != b || a >= -(1<<59) {
		t.Fatalf("UsernameKey: %d, %d: want equal, far below real ids", a, b)
	}
	if throttle.UsernameKey("@other") == a {
		t.Fatal("two names, one key")
	}
}
