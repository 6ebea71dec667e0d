package telegramtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// A libraryBody is one request as a bot library sends it. Body holds
// placeholders the test replaces with the fixture's values: $CHAT (a
// private chat), $MSG (a message of the bot's with an inline keyboard),
// $MSG2 (another of the bot's messages) and $CALLBACK (a callback query
// on $MSG's button).
type libraryBody struct {
	lib, name   string
	method      string
	contentType string // "json", "form", or a multipart type with its boundary
	body        string
	// form is the fields of a "form" body, name then value, before
	// encoding.
	form []string
	// refused is the description telegramtest must answer with; empty
	// means the call must be accepted.
	refused string
	check   func(t *testing.T, result json.RawMessage)
}

// mp is a multipart content type with the boundary the multipart rows use.
const mp = "multipart/form-data; boundary=b0undary"

// crlf turns a multipart body written with \n line ends into the wire
// form.
func crlf(s string) string { return strings.ReplaceAll(s, "\n", "\r\n") }

// form lists a form body's fields, name then value.
func form(kv ...string) []string { return kv }

// libraryBodies are what real libraries send for the common methods.
//
// The go-telegram/bot (v1.19.0), telego (v1.6.0), grammY (1.46.0) and
// Telegraf (4.16.3) rows were captured on the wire from the libraries
// themselves by the TestLibraryBodies tests of examples/gotelegrambot,
// examples/telego and interop (run them with -v to see every body), with
// ids replaced by placeholders and file contents shortened. Those tests
// keep running the libraries; these rows keep the shapes in this package's
// own tests.
//
// The python-telegram-bot (v21) rows were written from its documented
// serialisation, as PyPI is not reachable here: parameters whose value is
// None are omitted, objects are serialised by to_dict (which omits None
// fields too), a request without files is form-urlencoded with every
// non-string value JSON-encoded (RequestData.json_parameters), a request
// with files is multipart/form-data with the same fields plus a part per
// file, named after the parameter (sendPhoto's "photo") or after the
// attach:// name it gives the file in a media group. reply_to_message_id
// is sent as reply_parameters since v20.8.
var libraryBodies = []libraryBody{
	// go-telegram/bot: multipart for every call, and "copy_text":{"text":""}
	// in every inline button.
	{lib: "go-telegram/bot", name: "inline keyboard", method: "sendMessage", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="text"

pick
--b0undary
Content-Disposition: form-data; name="reply_markup"

{"inline_keyboard":[[{"text":"Yes","callback_data":"yes","copy_text":{"text":""}},{"text":"No","callback_data":"no","copy_text":{"text":""}}],[{"text":"Site","url":"https://example.com","copy_text":{"text":""}},{"text":"Search","switch_inline_query_current_chat":"q","copy_text":{"text":""}}]]}
--b0undary--
`), check: func(t *testing.T, result json.RawMessage) {
		if m := decode[struct {
			ReplyMarkup json.RawMessage `json:"reply_markup"`
		}](t, result); !bytes.Contains(m.ReplyMarkup, []byte(`"callback_data":"yes"`)) {
			t.Errorf("the sent message does not keep the inline keyboard: %s", m.ReplyMarkup)
		}
	}},
	{lib: "go-telegram/bot", name: "edit reply markup", method: "editMessageReplyMarkup", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="message_id"

$MSG
--b0undary
Content-Disposition: form-data; name="reply_markup"

{"inline_keyboard":[[{"text":"Undo","callback_data":"undo","copy_text":{"text":""}}]]}
--b0undary--
`)},
	{lib: "go-telegram/bot", name: "document with reply_parameters", method: "sendDocument", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="document"; filename="notes.txt"
Content-Type: application/octet-stream

notes
--b0undary
Content-Disposition: form-data; name="caption"

notes
--b0undary
Content-Disposition: form-data; name="reply_parameters"

{"message_id":$MSG}
--b0undary--
`), check: wantReplyTo},
	{lib: "go-telegram/bot", name: "media group uploads", method: "sendMediaGroup", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="one.jpg"; filename="one.jpg"
Content-Type: application/octet-stream

tiny jpeg
--b0undary
Content-Disposition: form-data; name="two.jpg"; filename="two.jpg"
Content-Type: application/octet-stream

tiny jpeg
--b0undary
Content-Disposition: form-data; name="media"

[{"type":"photo","media":"attach://one.jpg","caption":"*one*","parse_mode":"MarkdownV2"},{"type":"photo","media":"attach://two.jpg"}]
--b0undary--
`)},

	// telego: JSON, with "chat_id":"" in reply_parameters and a
	// switch_inline_query "" button (only the bot's username is inserted).
	{lib: "telego", name: "inline keyboard with switch_inline_query \"\"", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"pick","reply_markup":{"inline_keyboard":[[{"text":"Yes","callback_data":"yes"},{"text":"No","callback_data":"no"}],[{"text":"Site","url":"https://example.com"},{"text":"Mention me","switch_inline_query":""}]]}}`},
	{lib: "telego", name: "reply_parameters with empty chat_id", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"reply","reply_parameters":{"message_id":$MSG,"chat_id":""}}`, check: wantReplyTo},
	{lib: "telego", name: "reply keyboard", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"pick","reply_markup":{"keyboard":[[{"text":"Tea"},{"text":"Coffee"}],[{"text":"Share phone","request_contact":true}]],"resize_keyboard":true,"one_time_keyboard":true,"input_field_placeholder":"Choose"}}`},
	{lib: "telego", name: "photo upload", method: "sendPhoto", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="caption"

<i>photo</i>
--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="parse_mode"

HTML
--b0undary
Content-Disposition: form-data; name="photo"; filename="p.jpg"
Content-Type: application/octet-stream

tiny jpeg
--b0undary--
`)},

	// grammY: JSON, and uploads as attach:// names with a part each.
	{lib: "grammY", name: "HTML without preview", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"<b>bold</b> https://example.com","parse_mode":"HTML","link_preview_options":{"is_disabled":true}}`},
	{lib: "grammY", name: "photo upload with keyboard", method: "sendPhoto", contentType: mp, body: crlf(`--b0undary
content-disposition:form-data;name="chat_id"

$CHAT
--b0undary
content-disposition:form-data;name="photo"

attach://aq2pfyhwavqpfjuz
--b0undary
content-disposition:form-data;name="caption"

<i>photo</i>
--b0undary
content-disposition:form-data;name="parse_mode"

HTML
--b0undary
content-disposition:form-data;name="reply_markup"

{"inline_keyboard":[[{"text":"Yes","callback_data":"yes"},{"text":"No","callback_data":"no"}]]}
--b0undary
content-disposition:form-data;name="aq2pfyhwavqpfjuz";filename=p.jpg
content-type:application/octet-stream

tiny jpeg
--b0undary--
`)},
	{lib: "grammY", name: "answer callback query", method: "answerCallbackQuery", contentType: "json",
		body: `{"callback_query_id":"$CALLBACK","text":"Done"}`},

	// Telegraf: JSON with "hide":false in every button, string buttons in
	// reply keyboards, and a "method" part in multipart bodies.
	{lib: "Telegraf", name: "inline keyboard with hide false", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"reply_markup":{"inline_keyboard":[[{"text":"Yes","callback_data":"yes","hide":false},{"text":"No","callback_data":"no","hide":false}],[{"text":"Site","url":"https://example.com","hide":false},{"text":"Search","switch_inline_query_current_chat":"q","hide":false}]]},"text":"pick"}`},
	{lib: "Telegraf", name: "reply keyboard of strings", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"reply_markup":{"keyboard":[["Tea","Coffee"],[{"text":"Share phone","request_contact":true,"hide":false}]],"resize_keyboard":true,"one_time_keyboard":true,"input_field_placeholder":"Choose"},"text":"pick"}`},
	{lib: "Telegraf", name: "edit text with keyboard", method: "editMessageText", contentType: "json",
		body: `{"chat_id":$CHAT,"message_id":$MSG,"parse_mode":"HTML","reply_markup":{"inline_keyboard":[[{"text":"Undo","callback_data":"undo","hide":false}]]},"text":"<b>Confirmed</b>"}`},
	{lib: "Telegraf", name: "media group uploads", method: "sendMediaGroup", contentType: mp, body: crlf(`--b0undary
content-disposition:form-data; name="method"

sendMediaGroup
--b0undary
content-disposition:form-data; name="chat_id"

$CHAT
--b0undary
content-disposition:form-data; name="881d201162d9d766f0ed9d6f5119695e"; filename="one.jpg"

tiny jpeg
--b0undary
content-disposition:form-data; name="29719de6ab8b4c696d8a1125e7a49f44"; filename="two.jpg"

tiny jpeg
--b0undary
content-disposition:form-data; name="media"

[{"type":"photo","media":"attach://881d201162d9d766f0ed9d6f5119695e","caption":"*one*","parse_mode":"MarkdownV2"},{"type":"photo","media":"attach://29719de6ab8b4c696d8a1125e7a49f44"}]
--b0undary--
`)},
	{lib: "Telegraf", name: "delete message", method: "deleteMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"message_id":$MSG2}`},

	// python-telegram-bot, from its documented serialisation (see above).
	{lib: "python-telegram-bot", name: "inline keyboard, HTML", method: "sendMessage", contentType: "form",
		form: form("chat_id", "$CHAT", "text", "<b>pick</b>", "parse_mode", "HTML",
			"reply_markup", `{"inline_keyboard": [[{"text": "Yes", "callback_data": "yes"}, {"text": "Share", "switch_inline_query": ""}]]}`)},
	{lib: "python-telegram-bot", name: "reply keyboard", method: "sendMessage", contentType: "form",
		form: form("chat_id", "$CHAT", "text", "pick",
			"reply_markup", `{"keyboard": [[{"text": "Tea"}, {"text": "Coffee"}], [{"text": "Where am I", "request_location": true}]], "resize_keyboard": true, "one_time_keyboard": true}`)},
	{lib: "python-telegram-bot", name: "reply_to_message_id as reply_parameters, no preview", method: "sendMessage", contentType: "form",
		form: form("chat_id", "$CHAT", "text", "reply https://example.com",
			"reply_parameters", `{"message_id": $MSG, "allow_sending_without_reply": true}`, "link_preview_options", `{"is_disabled": true}`), check: wantReplyTo},
	{lib: "python-telegram-bot", name: "reply_to_message_id (before v20.8)", method: "sendMessage", contentType: "form",
		form: form("chat_id", "$CHAT", "text", "reply", "reply_to_message_id", "$MSG", "allow_sending_without_reply", "false"), check: wantReplyTo},
	{lib: "python-telegram-bot", name: "document upload replying", method: "sendDocument", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="reply_parameters"

{"message_id": $MSG}
--b0undary
Content-Disposition: form-data; name="disable_notification"

true
--b0undary
Content-Disposition: form-data; name="document"; filename="notes.txt"
Content-Type: text/plain

notes
--b0undary--
`), check: wantReplyTo},
	{lib: "python-telegram-bot", name: "entities", method: "sendMessage", contentType: "form",
		form: form("chat_id", "$CHAT", "text", "bold", "entities", `[{"type": "bold", "offset": 0, "length": 4}]`)},
	{lib: "python-telegram-bot", name: "photo upload", method: "sendPhoto", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="caption"

*photo*
--b0undary
Content-Disposition: form-data; name="parse_mode"

MarkdownV2
--b0undary
Content-Disposition: form-data; name="photo"; filename="p.jpg"
Content-Type: image/jpeg

tiny jpeg
--b0undary--
`)},
	{lib: "python-telegram-bot", name: "media group uploads", method: "sendMediaGroup", contentType: mp, body: crlf(`--b0undary
Content-Disposition: form-data; name="chat_id"

$CHAT
--b0undary
Content-Disposition: form-data; name="media"

[{"type": "photo", "media": "attach://6f1ed002ab5595859014ebf0951522d9", "caption": "one"}, {"type": "document", "media": "https://example.com/a.pdf"}]
--b0undary
Content-Disposition: form-data; name="6f1ed002ab5595859014ebf0951522d9"; filename="one.jpg"
Content-Type: image/jpeg

tiny jpeg
--b0undary--
`), refused: "Bad Request: document and audio can't be mixed with other media types"},
	{lib: "python-telegram-bot", name: "edit text", method: "editMessageText", contentType: "form",
		form: form("chat_id", "$CHAT", "message_id", "$MSG", "text", "Confirmed", "reply_markup", `{"inline_keyboard": [[{"text": "Undo", "callback_data": "undo"}]]}`)},
	{lib: "python-telegram-bot", name: "answer callback query", method: "answerCallbackQuery", contentType: "form",
		form: form("callback_query_id", "$CALLBACK", "text", "Done", "show_alert", "false")},
	{lib: "python-telegram-bot", name: "delete message", method: "deleteMessage", contentType: "form",
		form: form("chat_id", "$CHAT", "message_id", "$MSG2")},

	// Empty optional fields, as a library that sends every field does.
	{lib: "any", name: "every inline field empty but callback_data", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"pick","reply_markup":{"inline_keyboard":[[{"text":"Yes","icon_custom_emoji_id":"","style":"","url":"","callback_data":"yes","web_app":null,"login_url":null,"switch_inline_query_chosen_chat":{"query":"","allow_user_chats":false},"copy_text":{"text":""},"callback_game":null,"pay":false}]]}}`},
	{lib: "any", name: "every keyboard field empty", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"pick","reply_markup":{"keyboard":[[{"text":"Tea","request_contact":false,"request_location":false,"request_poll":null,"web_app":{"url":""},"request_users":null,"request_chat":null}]],"is_persistent":false,"resize_keyboard":false,"one_time_keyboard":false,"input_field_placeholder":"","selective":false}}`},
	{lib: "any", name: "empty top-level fields", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"message_thread_id":0,"text":"hi","parse_mode":"","entities":[],"link_preview_options":{},"disable_notification":false,"protect_content":false,"message_effect_id":"","reply_parameters":{},"reply_markup":{}}`,
		check: func(t *testing.T, result json.RawMessage) {
			if m := decode[map[string]json.RawMessage](t, result); m["reply_to_message"] != nil || m["reply_markup"] != nil {
				t.Errorf("empty reply_parameters or reply_markup had an effect: %s", result)
			}
		}},
	{lib: "any", name: "reply_parameters with message_id 0", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"hi","reply_parameters":{"message_id":0,"allow_sending_without_reply":false}}`},
	{lib: "any", name: "parse_mode None", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"<b>as is</b>","parse_mode":"None"}`},
	{lib: "any", name: "empty caption fields in a media group", method: "sendMediaGroup", contentType: "json",
		body: `{"chat_id":$CHAT,"media":[{"type":"photo","media":"https://example.com/1.jpg","caption":"","parse_mode":"","caption_entities":[],"has_spoiler":false},{"type":"photo","media":"https://example.com/2.jpg","caption_entities":null}]}`},
	{lib: "any", name: "game button", method: "sendMessage", contentType: "json",
		body: `{"chat_id":$CHAT,"text":"play","reply_markup":{"inline_keyboard":[[{"text":"Play","callback_game":{}}]]}}`},
	{lib: "any", name: "empty inline keyboard removes it", method: "editMessageReplyMarkup", contentType: "json",
		body: `{"chat_id":$CHAT,"message_id":$MSG,"reply_markup":{"inline_keyboard":[]}}`,
		check: func(t *testing.T, result json.RawMessage) {
			if m := decode[map[string]json.RawMessage](t, result); m["reply_markup"] != nil {
				t.Errorf("the keyboard was not removed: %s", result)
			}
		}},

	// What Telegram refuses stays refused.
	{lib: "any", name: "two used inline fields", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"pick","reply_markup":{"inline_keyboard":[[{"text":"Both","url":"https://example.com","callback_data":"x","copy_text":{"text":""}}]]}}`,
		refused: "Bad Request: can't parse inline keyboard button: only one of the optional fields must be used (url, callback_data)"},
	{lib: "any", name: "only empty inline fields", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"pick","reply_markup":{"inline_keyboard":[[{"text":"Nothing","url":"","callback_data":"","pay":false,"copy_text":{"text":""}}]]}}`,
		refused: "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard"},
	{lib: "any", name: "inline button without text", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"pick","reply_markup":{"inline_keyboard":[[{"text":"","callback_data":"x"}]]}}`,
		refused: "Bad Request: can't parse inline keyboard button: Text is empty"},
	{lib: "any", name: "callback_data over 64 bytes", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"pick","reply_markup":{"inline_keyboard":[[{"text":"Long","callback_data":"` + strings.Repeat("x", 65) + `"}]]}}`,
		refused: "Bad Request: BUTTON_DATA_INVALID"},
	{lib: "any", name: "keyboard button without text", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"pick","reply_markup":{"keyboard":[[{"text":"","request_contact":true}]]}}`,
		refused: "Bad Request: can't parse keyboard button: Text is empty"},
	{lib: "any", name: "two used keyboard fields", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"pick","reply_markup":{"keyboard":[[{"text":"Both","request_contact":true,"request_location":true}]]}}`,
		refused: "Bad Request: can't parse keyboard button: only one of the optional fields must be used (request_contact, request_location)"},
	{lib: "any", name: "reply_parameters without message_id", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"hi","reply_parameters":{"allow_sending_without_reply":true}}`,
		refused: `Bad Request: can't parse reply parameters: Can't find field "message_id"`},
	{lib: "any", name: "reply_parameters not an object", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"hi","reply_parameters":[1]}`,
		refused: "Bad Request: can't parse reply parameters JSON object"},
	{lib: "any", name: "link_preview_options not an object", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"hi","link_preview_options":[true]}`,
		refused: "Bad Request: can't parse link preview options JSON object"},
	{lib: "any", name: "unknown parse_mode", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"hi","parse_mode":"BBCode"}`,
		refused: "Bad Request: unsupported parse_mode"},
	{lib: "any", name: "empty text", method: "sendMessage", contentType: "json",
		body:    `{"chat_id":$CHAT,"text":"","parse_mode":"HTML"}`,
		refused: "Bad Request: message text is empty"},
}

// wantReplyTo checks that a sent message replies to $MSG (message 1).
func wantReplyTo(t *testing.T, result json.RawMessage) {
	t.Helper()
	m := decode[struct {
		ReplyTo *struct {
			MessageID int64 `json:"message_id"`
		} `json:"reply_to_message"`
	}](t, result)
	if m.ReplyTo == nil || m.ReplyTo.MessageID != 1 {
		t.Errorf("the message does not reply to message 1: %s", result)
	}
}

// TestLibraryBodies posts each library's body to a fresh server and
// checks that Telegram's answer is given: accepted when Telegram accepts
// it (empty optional fields count as absent), refused with Telegram's
// words when Telegram refuses it.
func TestLibraryBodies(t *testing.T) {
	t.Parallel()
	for _, tc := range libraryBodies {
		t.Run(tc.lib+"/"+tc.method+"/"+tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, noLimits())
			keyboard := `{"inline_keyboard":[[{"text":"Yes","callback_data":"yes"}]]}`
			msg := decode[sentMessage](t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "Sure?", "reply_markup": json.RawMessage(keyboard)}).Result)
			msg2 := decode[sentMessage](t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "bye"}).Result)
			upd, err := f.srv.PressButton(f.chat, f.user, msg.MessageID, "yes")
			if err != nil {
				t.Fatal(err)
			}
			ids := strings.NewReplacer("$CHAT", itoa(f.chat.ID), "$MSG2", itoa(msg2.MessageID), "$MSG", itoa(msg.MessageID),
				"$CALLBACK", upd.CallbackQueryID)
			body := ids.Replace(tc.body)
			if tc.form != nil {
				v := url.Values{}
				for i := 0; i+1 < len(tc.form); i += 2 {
					v.Set(tc.form[i], ids.Replace(tc.form[i+1]))
				}
				body = v.Encode()
			}
			ct := tc.contentType
			switch ct {
			case "json":
				ct = "application/json"
			case "form":
				ct = "application/x-www-form-urlencoded"
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, f.srv.URL+"/bot"+f.srv.Token+"/"+tc.method, strings.NewReader(body))
			req.Header.Set("Content-Type", ct)
			a, err := do(f.srv.Client(), req)
			if err != nil {
				t.Fatal(err)
			}
			if tc.refused != "" {
				wantError(t, a, 400, tc.refused)
				return
			}
			if !a.OK {
				t.Fatalf("%s's %s was refused: %d %q\nbody: %s", tc.lib, tc.method, a.Status, a.Description, body)
			}
			if tc.check != nil {
				tc.check(t, a.Result)
			}
		})
	}
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
