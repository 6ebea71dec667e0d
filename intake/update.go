package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Update is one stored update as a handler receives it.
type Update struct {
	// ID is Telegram's update_id.
	ID int64
	// Body is the raw webhook body, byte for byte as recorded. The handler
	// may read it but must not modify it.
	Body []byte
}

// Decode unmarshals the body into v, typically the update type of a Go bot
// library or a struct of the fields the handler needs.
func (u Update) Decode(v any) error {
	if err := json.Unmarshal(u.Body, v); err != nil {
		return fmt.Errorf("intake: decode update %d: %w", u.ID, err)
	}
	return nil
}

// Acceptance is the outcome of [Runner.Accept]. The zero value is none of
// the outcomes.
type Acceptance int

// The outcomes of [Runner.Accept].
const (
	// Accepted: the update was newly recorded.
	Accepted Acceptance = iota + 1
	// Duplicate: an update with this update_id is already recorded.
	Duplicate
	// Invalid: the body is not a Telegram update; nothing was recorded.
	Invalid
)

// String returns "accepted", "duplicate" or "invalid".
func (a Acceptance) String() string {
	switch a {
	case Accepted:
		return "accepted"
	case Duplicate:
		return "duplicate"
	case Invalid:
		return "invalid"
	}
	return "Acceptance(" + strconv.Itoa(int(a)) + ")"
}

// errNotUpdate is the internal parse failure; callers see Invalid.
var errNotUpdate = errors.New("intake: not a Telegram update")

// parsedUpdate is what the runner needs from a body: its id and the key of
// the chat line it runs on.
type parsedUpdate struct {
	id   int64
	line string
}

// ParseUpdate checks that body is a Telegram update — a JSON object whose
// update_id is a non-negative integer literal (not a string, not a fraction
// or exponent, at most 2^63−1) — and returns that update_id.
func ParseUpdate(body []byte) (int64, error) {
	p, err := parseUpdate(body)
	return p.id, err
}

// parseUpdate validates body and derives the line key from its top-level
// payloads in object order: the first payload with a chat, message.chat,
// from, user or voter_chat object carrying a numeric or string id gives
// "chat:<id>"; an update with none runs alone on "update:<update_id>".
func parseUpdate(body []byte) (parsedUpdate, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return parsedUpdate{}, errNotUpdate
	}
	var (
		id      int64 = -1
		line    string
		payload json.RawMessage
	)
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return parsedUpdate{}, errNotUpdate
		}
		key, ok := kt.(string)
		if !ok {
			return parsedUpdate{}, errNotUpdate
		}
		payload = payload[:0]
		if err := dec.Decode(&payload); err != nil {
			return parsedUpdate{}, errNotUpdate
		}
		if key == "update_id" {
			id = parseID(payload)
			if id < 0 {
				return parsedUpdate{}, errNotUpdate
			}
			continue
		}
		if line == "" {
			line = lineOf(payload)
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return parsedUpdate{}, errNotUpdate
	}
	if _, err := dec.Token(); err != io.EOF {
		return parsedUpdate{}, errNotUpdate // trailing data
	}
	if id < 0 {
		return parsedUpdate{}, errNotUpdate
	}
	if line == "" {
		line = "update:" + strconv.FormatInt(id, 10)
	}
	return parsedUpdate{id: id, line: line}, nil
}

// parseID returns the value of a non-negative JSON integer literal, or -1.
func parseID(raw json.RawMessage) int64 {
	if len(raw) == 0 || len(raw) > 19 {
		return -1
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return -1
		}
	}
	if len(raw) > 1 && raw[0] == '0' {
		return -1 // JSON forbids leading zeros; the decoder already refuses them
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// holder is an object that may carry an id.
type holder struct {
	ID json.RawMessage `json:"id"`
}

// lineOf returns "chat:<id>" for a payload object, or "" when it names no
// holder.
func lineOf(payload json.RawMessage) string {
	if len(payload) == 0 || payload[0] != '{' {
		return ""
	}
	var p struct {
		Chat      json.RawMessage `json:"chat"`
		Message   json.RawMessage `json:"message"`
		From      json.RawMessage `json:"from"`
		User      json.RawMessage `json:"user"`
		VoterChat json.RawMessage `json:"voter_chat"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return ""
	}
	var msgChat json.RawMessage
	if len(p.Message) > 0 && p.Message[0] == '{' {
		var m struct {
			Chat json.RawMessage `json:"chat"`
		}
		if json.Unmarshal(p.Message, &m) == nil {
			msgChat = m.Chat
		}
	}
	for _, c := range []json.RawMessage{p.Chat, msgChat, p.From, p.User, p.VoterChat} {
		if k := holderKey(c); k != "" {
			return k
		}
	}
	return ""
}

func holderKey(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var h holder
	if json.Unmarshal(raw, &h) != nil || len(h.ID) == 0 {
		return ""
	}
	switch c := h.ID[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(h.ID, &s) != nil {
			return ""
		}
		return "chat:" + s
	case c == '-' || (c >= '0' && c <= '9'):
		return "chat:" + string(h.ID)
	}
	return ""
}
