package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"slices"
	"strings"

	"github.com/tgrelay/tgrelay/internal/jsonscan"
)

// Canonical parameters.
//
// A journaled call is keyed by a hash of its canonical parameters, so that
// the same call made again by a later attempt finds its entry whatever the
// encoding details. The canonical form is the set of (name, value) pairs of
// the call, sorted, where:
//
//   - the URL's query parameters count, as Telegram reads them too (and
//     the raw query, when it does not parse whole);
//   - a JSON body must be an object: a string value is its text, a number
//     its literal, true and false their names, an object or array its JSON
//     with object keys sorted; null values are left out (as if absent);
//   - a form body contributes its fields;
//   - a multipart body contributes its fields, and for each file part its
//     field name, file name and the SHA-256 of its content, but only of the
//     parts that lie wholly within the buffered prefix of the body (see
//     [Config.MaxBufferedBody]): the upload itself is streamed, never held
//     whole, so a part that reaches past the prefix contributes its name,
//     its file name and the mark "partial", and the parts after it nothing;
//   - a body that cannot be parsed as its Content-Type says is hashed as raw
//     bytes.
//
// So {"chat_id":1,"text":"hi"}, chat_id=1&text=hi and the same fields in a
// multipart body all hash alike, and key order never matters.

// param is one canonical (name, value) pair.
type param struct{ name, value string }

// Marks in canonical values. They start with a NUL byte, which no text
// parameter of the Bot API contains.
const (
	fileMark    = "\x00file\x00"
	partialMark = "\x00partial"
	rawMark     = "\x00raw\x00"
)

// canonicalHash returns the hex SHA-256 of the canonical parameters of a
// call with this Content-Type, query and body prefix. complete tells
// whether prefix is the whole body.
func canonicalHash(contentType string, query url.Values, prefix []byte, complete bool) string {
	ps := canonicalParams(contentType, query, prefix, complete)
	slices.SortFunc(ps, func(a, b param) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		return strings.Compare(a.value, b.value)
	})
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, p := range ps {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p.name)))])
		h.Write([]byte(p.name))
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(p.value)))])
		h.Write([]byte(p.value))
	}
	return hex.EncodeToString(h.Sum(nil))
}

func canonicalParams(contentType string, query url.Values, prefix []byte, complete bool) []param {
	var ps []param
	for name, vs := range query {
		for _, v := range vs {
			ps = append(ps, param{name, v})
		}
	}
	if len(prefix) == 0 && complete {
		return ps
	}
	mediaType, mparams, err := mime.ParseMediaType(contentType)
	if err != nil {
		mediaType = ""
	}
	var body []param
	ok := false
	switch {
	case mediaType == "multipart/form-data" && mparams["boundary"] != "":
		body, ok = multipartParams(prefix, mparams["boundary"], complete)
	case !complete:
		// Only multipart bodies are streamed; a partial other body is
		// hashed by its prefix.
	case mediaType == "application/json" || (mediaType == "" && json.Valid(prefix)):
		body, ok = jsonParams(prefix)
	case mediaType == "application/x-www-form-urlencoded" || mediaType == "":
		body, ok = formParams(prefix)
	}
	if !ok {
		sum := sha256.Sum256(prefix)
		body = []param{{rawMark, mediaType + "\x00" + hex.EncodeToString(sum[:])}}
		if !complete {
			body[0].value += partialMark
		}
	}
	return append(ps, body...)
}

// queryParams returns the parameters of a call's raw URL query for its
// canonical form. url.ParseQuery drops each pair it cannot read (one with
// a ";" or a bad escape), which Telegram may read all the same: a query
// that does not parse whole also contributes its raw text, so that two
// calls differing only in such pairs never hash alike.
func queryParams(raw string) url.Values {
	q, err := url.ParseQuery(raw)
	if err != nil {
		q.Set(rawMark, raw)
	}
	return q
}

// jsonParams returns the canonical parameters of a JSON body, which must
// be one object: each member whose value is not null, a string by its
// text, a number by its literal, true and false by their names, an object
// or array by its JSON with object keys sorted. ok is false for any other
// body.
//
// It walks the object once (internal/jsonscan) and decodes only what it
// must, each member as encoding/json decodes it: a string with an escape
// or a non-ASCII byte, and a nested value. An object whose keys need
// decoding, or that names a key twice, takes jsonParamsDecoded, which
// decodes it whole; both answer alike (FuzzJSONParams). The walk spares
// the fenced call a map and a value per member (5.8 µs of a call's 236 in
// bench gateway's profile went to the whole decode).
func jsonParams(b []byte) ([]param, bool) {
	if !json.Valid(b) {
		return nil, false
	}
	sc := jsonscan.New(b)
	sc.Space()
	if !sc.Consume('{') {
		return jsonParamsDecoded(b) // not an object
	}
	ps := make([]param, 0, 8)
	// keys holds every member's key, null ones included: a later null
	// drops an earlier value of its key when decoded whole.
	keys := make([]string, 0, 8)
	for key, raw, more := sc.Member(); more; key, raw, more = sc.Member() {
		if key == nil || len(raw) == 0 || len(keys) == maxWalkedMembers {
			return jsonParamsDecoded(b)
		}
		name := string(key)
		if slices.Contains(keys, name) {
			return jsonParamsDecoded(b)
		}
		keys = append(keys, name)
		switch raw[0] {
		case 'n':
			continue // null: as if absent
		case 't':
			ps = append(ps, param{name, "true"})
		case 'f':
			ps = append(ps, param{name, "false"})
		case '"':
			if text, plain := jsonscan.PlainString(raw); plain {
				ps = append(ps, param{name, string(text)})
				continue
			}
			var text string
			if err := json.Unmarshal(raw, &text); err != nil {
				return nil, false
			}
			ps = append(ps, param{name, text})
		case '{', '[':
			enc, ok := canonicalJSON(raw)
			if !ok {
				return nil, false
			}
			ps = append(ps, param{name, enc})
		default:
			ps = append(ps, param{name, string(raw)}) // a number's literal
		}
	}
	if sc.Bad() {
		return jsonParamsDecoded(b)
	}
	return ps, true
}

// maxWalkedMembers bounds the members jsonParams walks, whose check for a
// repeated key reads every key before it; a larger object is decoded
// whole. A Bot API call has a few dozen parameters at most.
const maxWalkedMembers = 64

// canonicalJSON returns the JSON value raw as encoding/json re-encodes it
// when decoded with numbers kept as their literals: object keys sorted.
func canonicalJSON(raw []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", false
	}
	enc, err := json.Marshal(v)
	if err != nil {
		return "", false
	}
	return string(enc), true
}

// jsonParamsDecoded is jsonParams by decoding b whole into a map: the
// form that defines the canonical parameters of a JSON body, for the
// bodies jsonParams does not walk.
func jsonParamsDecoded(b []byte) ([]param, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil || obj == nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data
	}
	ps := make([]param, 0, len(obj))
	for k, v := range obj {
		switch v := v.(type) {
		case nil:
			continue
		case string:
			ps = append(ps, param{k, v})
		case json.Number:
			ps = append(ps, param{k, v.String()})
		case bool:
			if v {
				ps = append(ps, param{k, "true"})
			} else {
				ps = append(ps, param{k, "false"})
			}
		default:
			// Maps marshal with sorted keys; numbers keep their literal.
			enc, err := json.Marshal(v)
			if err != nil {
				return nil, false
			}
			ps = append(ps, param{k, string(enc)})
		}
	}
	return ps, true
}

func formParams(b []byte) ([]param, bool) {
	vals, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, false
	}
	var ps []param
	for k, vs := range vals {
		for _, v := range vs {
			ps = append(ps, param{k, v})
		}
	}
	return ps, true
}

// maxParts bounds the parts of one multipart body the hash looks at.
const maxParts = 1000

func multipartParams(prefix []byte, boundary string, complete bool) ([]param, bool) {
	mr := multipart.NewReader(bytes.NewReader(prefix), boundary)
	var ps []param
	for range maxParts {
		part, err := mr.NextPart()
		if err == io.EOF {
			return ps, true
		}
		if err != nil {
			if !complete {
				return append(ps, param{partialMark, ""}), true
			}
			return nil, false
		}
		name, file := part.FormName(), part.FileName()
		content, err := io.ReadAll(part)
		if err != nil {
			if !complete {
				if file != "" {
					return append(ps, param{name, fileMark + file + partialMark}), true
				}
				return append(ps, param{name, partialMark}), true
			}
			return nil, false
		}
		if file != "" || part.Header.Get("Content-Type") != "" && !isText(part.Header.Get("Content-Type")) {
			sum := sha256.Sum256(content)
			ps = append(ps, param{name, fileMark + file + "\x00" + hex.EncodeToString(sum[:])})
			continue
		}
		ps = append(ps, param{name, string(content)})
	}
	return append(ps, param{partialMark, "parts"}), true
}

func isText(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && strings.HasPrefix(mt, "text/")
}
