package sqlschema

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// EncodeHeader turns the header of an attempt record (one value per name)
// into the text the SQL stores keep: a JSON object of names and values,
// or "" for none.
func EncodeHeader(h http.Header) string {
	if len(h) == 0 {
		return ""
	}
	m := make(map[string]string, len(h))
	for k, vs := range h {
		if len(vs) > 0 {
			m[k] = vs[0]
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "" // a map of strings always marshals
	}
	return string(b)
}

// DecodeHeader reads what EncodeHeader wrote; "" is a nil header.
func DecodeHeader(s string) (http.Header, error) {
	if s == "" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode attempt header: %w", err)
	}
	h := make(http.Header, len(m))
	for k, v := range m {
		h[k] = []string{v}
	}
	return h, nil
}
