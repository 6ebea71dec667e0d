package telegramtest

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// Telegram ignores an optional field whose value is empty: "", false, 0,
// null, [] or an object whose own fields are all empty. Libraries rely on
// it: go-telegram/bot sends "copy_text":{"text":""} in every inline
// button, and others send "parse_mode":"", "entities":[] or
// "reply_parameters":{}. The checks in this file count a field as used
// only when its value is not empty, except where Telegram gives an empty
// value a meaning of its own (see [fieldUse]).

// emptyJSON reports whether raw is an empty JSON value: nothing, null,
// "", false, a zero number, [] or an object whose fields are all empty.
// Invalid JSON is not empty, so that the check that parses it refuses it.
func emptyJSON(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return true
	}
	switch raw[0] {
	case 'n':
		return string(raw) == "null"
	case 'f':
		return string(raw) == "false"
	case '"':
		return string(raw) == `""`
	case '[':
		var a []json.RawMessage
		return json.Unmarshal(raw, &a) == nil && len(a) == 0
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return false
		}
		for _, v := range m {
			if !emptyJSON(v) {
				return false
			}
		}
		return true
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		f, err := strconv.ParseFloat(string(raw), 64)
		return err == nil && f == 0
	}
	return false
}

// nullJSON reports whether raw is absent or null.
func nullJSON(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

// fieldUse says when an optional field of a button counts as used.
type fieldUse int

const (
	// usedUnlessEmpty: the field is used when its value is not empty
	// (url, callback_data, pay, copy_text, web_app, login_url, …).
	usedUnlessEmpty fieldUse = iota
	// usedUnlessNull: an empty object is the field's meaning, so it is
	// used unless null (callback_game, a placeholder; request_poll, where
	// {} asks for a poll of any type; request_users and request_chat,
	// whose request_id may be 0).
	usedUnlessNull
	// usedWeakly: "" has a meaning of its own, but a weak one
	// (switch_inline_query "" inserts only the bot's username). An empty
	// value is the button's action only when no other field is used, so a
	// library that sends the field empty beside a callback_data still
	// makes a callback button, as Telegram does.
	usedWeakly
)

// buttonField is an optional field that gives a button its action.
type buttonField struct {
	name string
	use  fieldUse
}

// inlineButtonFields are the fields of which an inline keyboard button
// must use exactly one.
var inlineButtonFields = []buttonField{
	{"url", usedUnlessEmpty}, {"callback_data", usedUnlessEmpty}, {"web_app", usedUnlessEmpty},
	{"login_url", usedUnlessEmpty}, {"switch_inline_query", usedWeakly},
	{"switch_inline_query_current_chat", usedWeakly}, {"switch_inline_query_chosen_chat", usedUnlessEmpty},
	{"copy_text", usedUnlessEmpty}, {"callback_game", usedUnlessNull}, {"pay", usedUnlessEmpty},
}

// keyboardButtonFields are the fields of which a reply keyboard button
// may use at most one.
var keyboardButtonFields = []buttonField{
	{"request_users", usedUnlessNull}, {"request_user", usedUnlessNull}, {"request_chat", usedUnlessNull},
	{"request_contact", usedUnlessEmpty}, {"request_location", usedUnlessEmpty},
	{"request_poll", usedUnlessNull}, {"web_app", usedUnlessEmpty},
}

// usedFields returns the names of the fields of b that fields lists and b
// uses, strong first, and how many of them are strong (not [usedWeakly]
// with an empty value).
func usedFields(b map[string]json.RawMessage, fields []buttonField) (used []string, strong int) {
	var weak []string
	for _, f := range fields {
		raw, ok := b[f.name]
		if !ok || nullJSON(raw) {
			continue
		}
		switch {
		case f.use == usedUnlessNull:
		case emptyJSON(raw) && f.use == usedWeakly:
			weak = append(weak, f.name)
			continue
		case emptyJSON(raw):
			continue
		}
		used = append(used, f.name)
	}
	return append(used, weak...), len(used)
}

// checkMarkup validates reply_markup. It returns the markup as sent, and
// the markup a sent message keeps: an inline keyboard is kept, a reply
// keyboard, its removal or a force reply is not echoed back (as Telegram
// does not). An empty markup ({}, {"inline_keyboard":[]}) is no markup,
// so an edit with one removes the keyboard.
func checkMarkup(p params) (raw, kept json.RawMessage, e *apiError) {
	s := strings.TrimSpace(p.get("reply_markup"))
	if s == "" {
		return nil, nil, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &obj); err != nil || obj == nil {
		return nil, nil, badRequest("can't parse reply keyboard markup JSON object")
	}
	if emptyJSON(json.RawMessage(s)) {
		return nil, nil, nil
	}
	raw = json.RawMessage(s)
	if kb, ok := obj["keyboard"]; ok && !nullJSON(kb) {
		if e := checkKeyboard(kb); e != nil {
			return nil, nil, e
		}
	}
	ik, ok := obj["inline_keyboard"]
	if !ok || nullJSON(ik) {
		return raw, nil, nil
	}
	var rows [][]map[string]json.RawMessage
	if err := json.Unmarshal(ik, &rows); err != nil {
		return nil, nil, badRequest("field \"inline_keyboard\" of the InlineKeyboardMarkup must be an Array of Arrays")
	}
	for _, row := range rows {
		for _, b := range row {
			if e := checkInlineButton(b); e != nil {
				return nil, nil, e
			}
		}
	}
	if len(rows) == 0 {
		return raw, nil, nil // an empty inline keyboard next to a used field: nothing to keep
	}
	return raw, raw, nil
}

// checkInlineButton applies Telegram's refusals of one inline keyboard
// button: its text must not be empty, and exactly one optional field must
// be used. Telegram itself takes the first used field in its own order;
// the fake refuses a second one, which the Bot API documentation forbids
// and which is always a mistake in the bot.
func checkInlineButton(b map[string]json.RawMessage) *apiError {
	var text string
	if json.Unmarshal(b["text"], &text) != nil || text == "" {
		return badRequest("can't parse inline keyboard button: Text is empty")
	}
	used, strong := usedFields(b, inlineButtonFields)
	if len(used) == 0 {
		return badRequest("can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")
	}
	if strong > 1 {
		return badRequest("can't parse inline keyboard button: only one of the optional fields must be used (" + strings.Join(used, ", ") + ")")
	}
	if strong == 1 && used[0] == "callback_data" {
		var data string
		if json.Unmarshal(b["callback_data"], &data) != nil || len(data) > 64 {
			return badRequest("BUTTON_DATA_INVALID")
		}
	}
	if strong == 0 {
		return nil // a switch_inline_query "" button
	}
	switch used[0] {
	case "switch_inline_query", "switch_inline_query_current_chat":
		var q string
		if json.Unmarshal(b[used[0]], &q) != nil {
			return badRequest("can't parse inline keyboard button: Field \"" + used[0] + "\" must be of type String")
		}
	case "url", "web_app", "login_url":
		if !buttonURL(b[used[0]], used[0] == "url") {
			return badRequest("can't parse inline keyboard button: Field \"url\" must be a non-empty String")
		}
	}
	return nil
}

// buttonURL reports whether raw is a non-empty string (direct) or an
// object with a non-empty "url" string (web_app, login_url).
func buttonURL(raw json.RawMessage, direct bool) bool {
	var u string
	if direct {
		return json.Unmarshal(raw, &u) == nil && u != ""
	}
	var obj struct {
		URL string `json:"url"`
	}
	return json.Unmarshal(raw, &obj) == nil && obj.URL != ""
}

// checkKeyboard applies Telegram's refusals of a reply keyboard: an array
// of arrays of buttons, each a non-empty string or an object with a
// non-empty text and at most one used optional field (the documentation's
// rule, which the fake enforces as for inline buttons).
func checkKeyboard(kb json.RawMessage) *apiError {
	var rows [][]json.RawMessage
	if json.Unmarshal(kb, &rows) != nil {
		return badRequest("field \"keyboard\" must be an Array of Arrays")
	}
	for _, row := range rows {
		for _, raw := range row {
			var text string
			if json.Unmarshal(raw, &text) == nil {
				if text == "" {
					return badRequest("can't parse keyboard button: Text is empty")
				}
				continue
			}
			var b map[string]json.RawMessage
			if json.Unmarshal(raw, &b) != nil || b == nil {
				return badRequest("can't parse keyboard button: KeyboardButton must be a String or an Object")
			}
			if json.Unmarshal(b["text"], &text) != nil || text == "" {
				return badRequest("can't parse keyboard button: Text is empty")
			}
			used, strong := usedFields(b, keyboardButtonFields)
			if strong > 1 {
				return badRequest("can't parse keyboard button: only one of the optional fields must be used (" + strings.Join(used, ", ") + ")")
			}
			if strong == 1 && used[0] == "web_app" && !buttonURL(b["web_app"], false) {
				return badRequest("can't parse keyboard button: Field \"url\" must be a non-empty String")
			}
		}
	}
	return nil
}

// replyParams is the part of reply_parameters the fake acts on.
type replyParams struct {
	MessageID                int64 `json:"message_id"`
	AllowSendingWithoutReply bool  `json:"allow_sending_without_reply"`
}

// replyParameters reads reply_parameters. set is false when it is absent
// or empty ({}, or a message_id of 0 with nothing else), which Telegram
// treats as no reply. A non-empty object without message_id is refused.
func replyParameters(p params) (rp replyParams, set bool, e *apiError) {
	s := strings.TrimSpace(p.get("reply_parameters"))
	if s == "" {
		return rp, false, nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &obj) != nil || obj == nil || json.Unmarshal([]byte(s), &rp) != nil {
		return rp, false, badRequest("can't parse reply parameters JSON object")
	}
	if emptyJSON(json.RawMessage(s)) {
		return replyParams{}, false, nil
	}
	if _, ok := obj["message_id"]; !ok {
		return rp, false, badRequest("can't parse reply parameters: Can't find field \"message_id\"")
	}
	return rp, rp.MessageID != 0, nil
}

// checkLinkPreview applies Telegram's one refusal of
// link_preview_options: it must be a JSON object. Its fields, all
// optional, change nothing in the fake.
func checkLinkPreview(p params) *apiError {
	s := strings.TrimSpace(p.get("link_preview_options"))
	if s == "" {
		return nil
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(s), &obj) != nil || obj == nil {
		return badRequest("can't parse link preview options JSON object")
	}
	return nil
}
