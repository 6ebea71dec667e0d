package intake

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tgrelay/tgrelay/internal/jsonscan"
)

// scanUpdate is parseUpdate's fast path: one validating pass
// ([json.Valid]) and one allocation-free walk of the routing fields, where
// decodeUpdate decodes every top-level value and each payload again. It
// answers exactly as decodeUpdate does, or ok false when the body is
// unusual enough that only decodeUpdate answers it rightly: not valid
// JSON, an update_id that is not an id or not the only one, or a key of
// the walked objects with an escape or a non-ASCII byte, or one that
// differs in case from a field name (encoding/json matches field names
// case-insensitively), or a string id or type with an escape or a
// non-ASCII byte. Telegram sends none of these.
func scanUpdate(body []byte) (p parsedUpdate, ok bool) {
	if !json.Valid(body) {
		return parsedUpdate{}, false
	}
	s := jsonscan.New(body)
	s.Space()
	if !s.Consume('{') {
		return parsedUpdate{}, false
	}
	var (
		id       int64 = -1
		line     string
		chat     chatRef
		kind     string
		kindSeen bool
	)
	for key, raw, more := s.Member(); more; key, raw, more = s.Member() {
		if key == nil {
			return parsedUpdate{}, false
		}
		if isUpdateIDKey(string(key)) {
			// Another update_id, or one in another case: decodeUpdate
			// refuses it, saying why.
			if id >= 0 || string(key) != updateIDKey {
				return parsedUpdate{}, false
			}
			var err error
			if id, err = parseID(raw); err != nil {
				return parsedUpdate{}, false
			}
			continue
		}
		if !kindSeen {
			kindSeen = true
			if len(key) <= MaxKind {
				kind = knownKind(key)
			}
		}
		if line == "" {
			if line, chat, ok = scanLine(raw); !ok {
				return parsedUpdate{}, false
			}
		}
	}
	if s.Bad() || id < 0 {
		return parsedUpdate{}, false
	}
	if line == "" {
		line = "update:" + strconv.FormatInt(id, 10)
	}
	return parsedUpdate{id: id, kind: kind, line: line, key: storedChatKey(line), chatID: chat.id, chatType: chat.typ}, true
}

// kinds are the update types Telegram sends, so that a kind is one shared
// string rather than an allocation per update.
var kinds = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"message", "edited_message", "channel_post", "edited_channel_post",
		"business_connection", "business_message", "edited_business_message", "deleted_business_messages",
		"message_reaction", "message_reaction_count", "inline_query", "chosen_inline_result",
		"callback_query", "shipping_query", "pre_checkout_query", "purchased_paid_media", "poll",
		"poll_answer", "my_chat_member", "chat_member", "chat_join_request", "chat_boost",
		"removed_chat_boost"} {
		m[k] = k
	}
	return m
}()

// KnownKind reports whether kind is an update type Telegram sends, a field
// of its Update object such as "message" or "callback_query", as far as
// this version of tgrelay knows them: a type Telegram adds later is unknown
// here until tgrelay learns it.
func KnownKind(kind string) bool {
	_, ok := kinds[kind]
	return ok
}

// knownKind returns key as a string, shared when it is a known kind.
func knownKind(key []byte) string {
	if k, ok := kinds[string(key)]; ok {
		return k
	}
	return string(key)
}

// The fields scanLine reads, as encoding/json matches them in lineOf.
var (
	payloadFields = []string{"chat", "message", "from", "user", "voter_chat"}
	messageFields = []string{"chat"}
	holderFields  = []string{"id", "type"}
)

// scanLine is lineOf on valid JSON: ok false when lineOf's answer may
// differ from a plain reading (see scanUpdate).
func scanLine(payload []byte) (string, chatRef, bool) {
	var f [5][]byte // payloadFields' values, the last of each
	if !scanFields(payload, payloadFields, f[:]) {
		return "", chatRef{}, false
	}
	var msgChat [1][]byte
	if !scanFields(f[1], messageFields, msgChat[:]) {
		return "", chatRef{}, false
	}
	for i, c := range [][]byte{f[0], msgChat[0], f[2], f[3], f[4]} {
		k, ref, ok := scanHolder(c, i < 2)
		if !ok {
			return "", chatRef{}, false
		}
		if k != "" {
			return k, ref, true
		}
	}
	return "", chatRef{}, true
}

// scanHolder is holderKey (and, with isChat, chatOf) on valid JSON.
func scanHolder(raw []byte, isChat bool) (string, chatRef, bool) {
	var h [2][]byte // id, type
	if !scanFields(raw, holderFields, h[:]) {
		return "", chatRef{}, false
	}
	id, typ := h[0], h[1]
	if len(id) == 0 {
		return "", chatRef{}, true
	}
	var key string
	switch c := id[0]; {
	case c == '"':
		s, ok := plainString(id)
		if !ok {
			return "", chatRef{}, false
		}
		key = "chat:" + s
	case c == '-' || (c >= '0' && c <= '9'):
		key = "chat:" + string(id)
	default:
		return "", chatRef{}, true
	}
	if !isChat {
		return key, chatRef{}, true
	}
	n, err := strconv.ParseInt(string(id), 10, 64)
	if err != nil {
		return key, chatRef{}, true
	}
	var t string
	if len(typ) > 0 && typ[0] == '"' {
		s, ok := plainString(typ)
		if !ok {
			return "", chatRef{}, false
		}
		if len(s) <= maxChatType {
			t = s
		}
	}
	return key, chatRef{id: n, typ: t}, true
}

// chatTypes are Telegram's chat types, shared rather than allocated.
var chatTypes = map[string]string{"private": "private", "group": "group", "supergroup": "supergroup", "channel": "channel", "sender": "sender"}

// plainString returns the content of a JSON string literal without
// escapes or non-ASCII bytes (whose decoding encoding/json may change);
// ok false for any other.
func plainString(lit []byte) (string, bool) {
	in, ok := jsonscan.PlainString(lit)
	if !ok {
		return "", false
	}
	if t, ok := chatTypes[string(in)]; ok {
		return t, true
	}
	return string(in), true
}

// scanFields stores in vals[i] the raw value of the last member of the
// object obj named names[i]; obj that is not an object has none. ok is
// false when a key has an escape or a non-ASCII byte, or equals a name
// only when case is ignored.
func scanFields(obj []byte, names []string, vals [][]byte) bool {
	if len(obj) == 0 || obj[0] != '{' {
		return true
	}
	s := jsonscan.New(obj)
	s.Consume('{') // obj[0], checked above
	for key, raw, more := s.Member(); more; key, raw, more = s.Member() {
		if key == nil {
			return false
		}
		for i, n := range names {
			if string(key) == n {
				vals[i] = raw
			} else if len(key) == len(n) && strings.EqualFold(string(key), n) {
				return false
			}
		}
	}
	return !s.Bad()
}
