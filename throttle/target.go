package throttle

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/url"
	"strconv"
	"strings"

	"github.com/tgrelay/tgrelay/internal/jsonscan"
)

// MaxPeekBytes bounds how much of a request body [Transport] reads before
// sending it: a JSON, form or multipart body up to this size is read whole
// (and can be replayed after a 429); of a larger multipart body, the parts
// up to chat_id must fit in it. The rest of a larger body is streamed,
// never buffered.
const MaxPeekBytes = 64 << 10

// maxValueBytes bounds a chat_id or allow_paid_broadcast value read from a
// multipart part.
const maxValueBytes = 256

// target is what a call's parameters say about its limits.
type target struct {
	chat  int64 // the chat key; 0 when none was found
	found bool  // a chat_id was found (chat may still be 0 for "0")
	paid  bool  // allow_paid_broadcast was true
}

// chatKey reads a chat_id value: a decimal integer, or "@username".
func chatKey(raw string) (int64, bool) {
	raw = strings.TrimSpace(raw)
	if len(raw) > 1 && raw[0] == '@' {
		return UsernameKey(raw), true
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id == 0 {
		return 0, false
	}
	return id, true
}

func truthy(raw string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(raw))
	return err == nil && b
}

// set records one parameter; it reports whether the search can stop.
func (t *target) set(name, value string) {
	switch name {
	case "chat_id":
		if id, ok := chatKey(value); ok {
			t.chat, t.found = id, true
		}
	case "allow_paid_broadcast":
		t.paid = truthy(value)
	}
}

// fromQuery reads the parameters of a URL query (Telegram reads them there
// too); a body's parameters, read later, win.
func (t *target) fromQuery(q url.Values) {
	if v, ok := q["chat_id"]; ok && len(v) > 0 {
		t.set("chat_id", v[0])
	}
	if v, ok := q["allow_paid_broadcast"]; ok && len(v) > 0 {
		t.set("allow_paid_broadcast", v[0])
	}
}

// fromJSON reads the top-level chat_id and allow_paid_broadcast of a JSON
// object, or of as much of one as data holds (a truncated body gives what
// was found before the cut). fromJSONDecoded defines the reading;
// scanJSON gives the same answer for the bodies clients send, several times
// faster on a typical call and without allocating.
func (t *target) fromJSON(data []byte) {
	if u, ok := scanJSON(*t, data); ok {
		*t = u
		return
	}
	t.fromJSONDecoded(data)
}

// scanJSON is fromJSON's fast path: one validating pass ([json.Valid]) and
// one walk of the top-level members, where fromJSONDecoded decodes every
// value. It returns t as fromJSONDecoded would leave it, or ok false (and
// t as given) when only fromJSONDecoded answers rightly: data that is not
// valid JSON (a truncated or malformed body), a top-level key with an
// escape or a non-ASCII byte (the decoder matches the key it decodes), or
// a chat_id or allow_paid_broadcast string with one (its content is what
// the decoder makes of it).
func scanJSON(t target, data []byte) (target, bool) {
	if !json.Valid(data) {
		return t, false
	}
	// The walk sets found; t stays as given, for the decoder to start
	// from when the walk meets what it cannot read.
	found := t
	s := jsonscan.New(data)
	s.Space()
	if !s.Consume('{') {
		return t, true // a value, but not an object: nothing to read
	}
	for key, raw, more := s.Member(); more; key, raw, more = s.Member() {
		if key == nil {
			return t, false
		}
		// switch string(key) compares without copying key; name is the
		// constant, since a string made of key would be a copy (on the
		// heap, for a long key).
		var name string
		switch string(key) {
		case "chat_id":
			name = "chat_id"
		case "allow_paid_broadcast":
			name = "allow_paid_broadcast"
		default:
			continue
		}
		stop, ok := found.scanValue(name, raw)
		if !ok {
			return t, false
		}
		if stop {
			return found, true
		}
	}
	if s.Bad() {
		return t, false
	}
	return found, true
}

// scanValue applies the raw value of a top-level chat_id or
// allow_paid_broadcast member as fromJSONDecoded does with the token it
// decodes: stop true for an object or array (the decoder gives up on the
// body there), ok false for a string that is not plain.
func (t *target) scanValue(name string, raw []byte) (stop, ok bool) {
	if len(raw) == 0 {
		return false, false // not in valid JSON; leave it to the decoder
	}
	switch raw[0] {
	case '{', '[':
		return true, true
	case '"':
		v, ok := jsonscan.PlainString(raw)
		if !ok {
			return false, false
		}
		t.set(name, string(v))
	case 't', 'f': // a bool sets paid; chat_id ignores it
		if name == "allow_paid_broadcast" {
			t.paid = raw[0] == 't'
		}
	case 'n': // null: ignored
	default: // a number: a chat id; allow_paid_broadcast ignores it
		if name == "chat_id" {
			t.set(name, string(raw))
		}
	}
	return false, true
}

// fromJSONDecoded is fromJSON read with encoding/json's Decoder: the
// definition of fromJSON's answer, and its path for the bodies scanJSON
// leaves to it.
func (t *target) fromJSONDecoded(data []byte) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		return
	}
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return
		}
		key, ok := tok.(string)
		if !ok {
			return
		}
		switch key {
		case "chat_id":
			v, err := d.Token()
			if err != nil {
				return
			}
			switch v := v.(type) {
			case json.Number:
				t.set(key, v.String())
			case string:
				t.set(key, v)
			case json.Delim: // an object or array: not a chat id
				return
			}
		case "allow_paid_broadcast":
			v, err := d.Token()
			if err != nil {
				return
			}
			switch v := v.(type) {
			case bool:
				t.paid = v
			case string:
				t.set(key, v)
			case json.Delim:
				return
			}
		default:
			var skip json.RawMessage
			if err := d.Decode(&skip); err != nil {
				return
			}
		}
	}
}

// fromForm reads an application/x-www-form-urlencoded body, or a prefix
// of one (a pair cut at the end is ignored).
func (t *target) fromForm(data []byte, whole bool) {
	s := string(data)
	if !whole {
		if i := strings.LastIndexByte(s, '&'); i >= 0 {
			s = s[:i]
		} else {
			return
		}
	}
	for pair := range strings.SplitSeq(s, "&") {
		k, v, _ := strings.Cut(pair, "=")
		k, err1 := url.QueryUnescape(k)
		v, err2 := url.QueryUnescape(v)
		if err1 != nil || err2 != nil {
			continue
		}
		if k == "chat_id" || k == "allow_paid_broadcast" {
			t.set(k, v)
		}
	}
}

// errPeekLimit stops a multipart search that read MaxPeekBytes.
var errPeekLimit = errors.New("throttle: chat_id not within the peek limit")

// recorder keeps every byte read through it, up to max; then it fails.
type recorder struct {
	r   io.Reader
	buf []byte
	max int
}

func (r *recorder) Read(p []byte) (int, error) {
	room := r.max - len(r.buf)
	if room <= 0 {
		return 0, errPeekLimit
	}
	if len(p) > room {
		p = p[:room]
	}
	n, err := r.r.Read(p)
	r.buf = append(r.buf, p[:n]...)
	return n, err
}

// fromMultipart reads the parts of a multipart/form-data body through rec
// until it finds chat_id (or the body ends, fails or passes rec's limit).
// Parts before chat_id are read and kept in rec; nothing after chat_id's
// value is read beyond what the multipart reader's buffer took in.
func (t *target) fromMultipart(rec *recorder, boundary string) {
	mr := multipart.NewReader(rec, boundary)
	for {
		part, err := mr.NextPart()
		if err != nil {
			return
		}
		name := part.FormName()
		if name != "chat_id" && name != "allow_paid_broadcast" {
			continue // NextPart skips the rest of this part
		}
		v, err := io.ReadAll(io.LimitReader(part, maxValueBytes+1))
		if err != nil || len(v) > maxValueBytes {
			return
		}
		t.set(name, string(v))
		if name == "chat_id" {
			return
		}
	}
}
