package intake

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Update is one stored update as a handler receives it.
type Update struct {
	// ID is Telegram's update_id.
	ID int64
	// Body is the raw webhook body, byte for byte as recorded. The handler
	// may read it but must not modify it.
	Body []byte
	// ChatID is the id of the chat the update belongs to: the chat of its
	// payload, or of the payload's message (a callback query's). Zero when
	// the update has no chat (an inline query, a poll, a chat whose id is
	// not a number). Parsed once, when the update was accepted or swept.
	ChatID int64
	// ChatType is that chat's type as Telegram names it ("private",
	// "group", "supergroup", "channel"), or "" when unknown.
	ChatType string
	// Kind is the update's type: the name of its payload field, such as
	// "message", "callback_query" or "pre_checkout_query" (the first
	// field other than update_id; Telegram sends one). Empty when the
	// body has none, or the name is longer than [MaxKind] bytes.
	Kind string
	// ReceivedAt is when the update arrived (its [Incoming.ReceivedAt]),
	// or the zero time when the store did not report it.
	ReceivedAt time.Time
	// Deadline is when Telegram stops waiting for an answer to the update
	// (see [Deadlines]), or the zero time when it has none. The handler's
	// context ends then.
	Deadline time.Time
}

// MaxKind bounds the length of [Update.Kind].
const MaxKind = 64

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

// MaxUpdateID is the largest update_id accepted: 2^53−1, the largest
// integer every JSON reader holds exactly. A JavaScript (or any
// IEEE-754 double) reader rounds a larger id, so two updates could read as
// one there, while tgrelay keeps them apart. Telegram's ids are far below
// it.
const MaxUpdateID = 1<<53 - 1

// errNotUpdate is the internal parse failure; callers see Invalid. The
// errors below wrap it, saying why.
var errNotUpdate = errors.New("intake: not a Telegram update")

var (
	// errAmbiguousID: the top-level object holds update_id more than once,
	// counting keys equal in any letter case. encoding/json matches a key
	// to a field case-insensitively and keeps the last, JavaScript and
	// Python keep the last exact key, others the first or none: handlers
	// would disagree on the id, and so on what is a duplicate.
	errAmbiguousID = fmt.Errorf("%w: update_id appears more than once (keys compared in any letter case)", errNotUpdate)
	// errIDRange: update_id is an integer above MaxUpdateID.
	errIDRange = fmt.Errorf("%w: update_id is above 2^53-1 (%d)", errNotUpdate, MaxUpdateID)
)

// updateIDKey is the key of the update id, and isUpdateIDKey reports
// whether a decoded key is it in some letter case, as encoding/json
// matches keys to field names ([strings.EqualFold], the same folding).
const updateIDKey = "update_id"

func isUpdateIDKey(key string) bool {
	return len(key) == len(updateIDKey) && strings.EqualFold(key, updateIDKey)
}

// parsedUpdate is what the runner needs from a body: its id, the key of
// the chat line it runs on, the chat key a store keeps ([Incoming.Chat]),
// and its chat.
type parsedUpdate struct {
	id       int64
	kind     string
	line     string
	key      string
	chatID   int64
	chatType string
}

// ParseUpdate checks that body is a Telegram update — a JSON object whose
// update_id is a non-negative integer literal (not a string, not a fraction
// or exponent, at most [MaxUpdateID]) — and returns that update_id. The
// object must hold update_id once: a body with a second update_id key, or
// one equal to it in another letter case ("Update_ID", which
// encoding/json reads into an update_id field), is refused, since
// handlers in different languages would read different ids from it.
func ParseUpdate(body []byte) (int64, error) {
	p, err := parseUpdate(body)
	return p.id, err
}

// ChatKey returns the chat key of an update's body, as the runner records
// it in [Incoming.Chat]: empty when body is not an update, has no chat, or
// its key is longer than [MaxChatKey] or holds a NUL byte. Callers that add rows to a store
// themselves use it to keep them in strict chat order.
func ChatKey(body []byte) string {
	p, err := parseUpdate(body)
	if err != nil {
		return ""
	}
	return p.key
}

// parseUpdate validates body and derives the line key from its top-level
// payloads in object order: the first payload with a chat, message.chat,
// from, user or voter_chat object carrying a numeric or string id gives
// "chat:<id>"; an update with none runs alone on "update:<update_id>".
// Telegram's updates take scanUpdate's fast path; any other body is
// answered by decodeUpdate, the definition.
func parseUpdate(body []byte) (parsedUpdate, error) {
	if p, ok := scanUpdate(body); ok {
		return p, nil
	}
	return decodeUpdate(body)
}

// decodeUpdate is parseUpdate with encoding/json throughout: each
// top-level value decoded, each payload unmarshalled again.
func decodeUpdate(body []byte) (parsedUpdate, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return parsedUpdate{}, errNotUpdate
	}
	var (
		id       int64 = -1
		line     string
		chat     chatRef
		payload  json.RawMessage
		kind     string
		kindSeen bool
		idKeys   int
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
		if isUpdateIDKey(key) {
			if idKeys++; idKeys > 1 {
				return parsedUpdate{}, errAmbiguousID
			}
		}
		if key == updateIDKey {
			if id, err = parseID(payload); err != nil {
				return parsedUpdate{}, err
			}
			continue
		}
		if !kindSeen {
			kindSeen = true
			if len(key) <= MaxKind {
				kind = key
			}
		}
		if line == "" {
			line, chat = lineOf(payload)
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
	return parsedUpdate{id: id, kind: kind, line: line, key: storedChatKey(line), chatID: chat.id, chatType: chat.typ}, nil
}

// storedChatKey returns the chat key a store keeps for an update on line
// ([Incoming.Chat]): the id of a "chat:" line, or empty for any other line
// and for a key no store need keep: one longer than [MaxChatKey] bytes, or
// one holding a NUL, which a PostgreSQL text cannot (a string id's
// \u0000 decodes to one; Telegram's ids never hold it). Without its key
// the update still runs in order on its line within the process.
func storedChatKey(line string) string {
	k, ok := strings.CutPrefix(line, "chat:")
	if !ok || len(k) > MaxChatKey || strings.IndexByte(k, 0) >= 0 {
		return ""
	}
	return k
}

// parseID returns the value of a non-negative JSON integer literal of at
// most MaxUpdateID, or an error wrapping errNotUpdate.
func parseID(raw []byte) (int64, error) {
	if len(raw) == 0 {
		return -1, errNotUpdate
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			return -1, errNotUpdate
		}
	}
	if len(raw) > 1 && raw[0] == '0' {
		return -1, errNotUpdate // JSON forbids leading zeros; the decoder already refuses them
	}
	if len(raw) > 16 { // MaxUpdateID has 16 digits
		return -1, errIDRange
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > MaxUpdateID {
		return -1, errIDRange
	}
	return n, nil
}

// holder is an object that may carry an id (and, for a chat, a type).
type holder struct {
	ID   json.RawMessage `json:"id"`
	Type json.RawMessage `json:"type"`
}

// maxChatType bounds the chat type a job keeps.
const maxChatType = 32

// chatRef is the chat an update belongs to; the zero value is none.
type chatRef struct {
	id  int64
	typ string
}

// lineOf returns "chat:<id>" for a payload object, or "" when it names no
// holder, and the payload's chat (its chat, or its message's chat).
func lineOf(payload json.RawMessage) (string, chatRef) {
	if len(payload) == 0 || payload[0] != '{' {
		return "", chatRef{}
	}
	var p struct {
		Chat      json.RawMessage `json:"chat"`
		Message   json.RawMessage `json:"message"`
		From      json.RawMessage `json:"from"`
		User      json.RawMessage `json:"user"`
		VoterChat json.RawMessage `json:"voter_chat"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return "", chatRef{}
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
	for i, c := range []json.RawMessage{p.Chat, msgChat, p.From, p.User, p.VoterChat} {
		if k, h := holderKey(c); k != "" {
			var ref chatRef
			if i < 2 { // a chat, not a user
				ref = chatOf(h)
			}
			return k, ref
		}
	}
	return "", chatRef{}
}

// chatOf reads a chat holder's numeric id and type.
func chatOf(h holder) chatRef {
	id, err := strconv.ParseInt(string(h.ID), 10, 64)
	if err != nil {
		return chatRef{}
	}
	var typ string
	if len(h.Type) > 0 && (json.Unmarshal(h.Type, &typ) != nil || len(typ) > maxChatType) {
		typ = "" // not a string, or not a type Telegram would send
	}
	return chatRef{id: id, typ: typ}
}

func holderKey(raw json.RawMessage) (string, holder) {
	var h holder
	if len(raw) == 0 || raw[0] != '{' {
		return "", h
	}
	if json.Unmarshal(raw, &h) != nil || len(h.ID) == 0 {
		return "", h
	}
	switch c := h.ID[0]; {
	case c == '"':
		var s string
		if json.Unmarshal(h.ID, &s) != nil {
			return "", h
		}
		return "chat:" + s, h
	case c == '-' || (c >= '0' && c <= '9'):
		return "chat:" + string(h.ID), h
	}
	return "", h
}
