package dashboard

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/tgrelay/tgrelay/botapi"
)

// chatOf returns the chat an update body belongs to, as the intake's chat
// lines see it: the id of the first payload's chat, message.chat, from,
// user or voter_chat, in that order, as decimal text (or the string id as
// given). It returns "" for a body that is not a JSON object or names no
// chat. Payload keys are tried in sorted order; an update has one.
func chatOf(body []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return ""
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		if k != "update_id" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if c := payloadChat(top[k]); c != "" {
			return c
		}
	}
	return ""
}

func payloadChat(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var p struct {
		Chat      json.RawMessage `json:"chat"`
		Message   json.RawMessage `json:"message"`
		From      json.RawMessage `json:"from"`
		User      json.RawMessage `json:"user"`
		VoterChat json.RawMessage `json:"voter_chat"`
	}
	if json.Unmarshal(raw, &p) != nil {
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
		if id := holderID(c); id != "" {
			return id
		}
	}
	return ""
}

// holderID returns the id of an object holding one: an integer as decimal
// text, or a non-empty string.
func holderID(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	var h struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(raw, &h) != nil || len(h.ID) == 0 {
		return ""
	}
	if h.ID[0] == '"' {
		var s string
		if json.Unmarshal(h.ID, &s) != nil {
			return ""
		}
		return s
	}
	n, err := strconv.ParseInt(string(h.ID), 10, 64)
	if err != nil {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

// FormattedBody is an update body ready to show, masked.
type FormattedBody struct {
	Text      string // indented JSON (or the raw text), redacted, cut
	Valid     bool   // the body is JSON
	Size      int    // the stored body's size in bytes
	Truncated bool   // Text was cut at the bound
}

// FormatBody indents body as JSON (or keeps it raw when it is not JSON),
// masks secrets with red ([botapi.Redactor.Redact]: its registered values,
// and anything shaped like a bot token; a nil red masks by shape only), and
// cuts the result at max bytes on a rune boundary (max below 1: no cut).
// It is the one masking of an update body: the update page and `tgrelay
// updates show` both show a body through it.
func FormatBody(body []byte, max int, red *botapi.Redactor) FormattedBody {
	return formatBody(body, max, red.Redact)
}

// formatBody indents body as JSON (or keeps it raw when it is not JSON),
// masks secrets with redact, and cuts the result at max bytes on a rune
// boundary (max below 1: no cut).
func formatBody(body []byte, max int, redact func(string) string) FormattedBody {
	f := FormattedBody{Size: len(body)}
	var buf bytes.Buffer
	if json.Indent(&buf, body, "", "  ") == nil {
		f.Valid = true
	} else {
		buf.Reset()
		buf.Write(body)
	}
	// Redact before cutting, so a cut cannot split a secret into an
	// unrecognisable half.
	s := redact(string(bytes.ToValidUTF8(buf.Bytes(), []byte("\uFFFD"))))
	if max > 0 && len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s, f.Truncated = s[:cut], true
	}
	f.Text = s
	return f
}
