package telegramtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
)

type entity struct {
	Type     string `json:"type"`
	Offset   int    `json:"offset"`
	Length   int    `json:"length"`
	URL      string `json:"url,omitempty"`
	Language string `json:"language,omitempty"`
}

type fullMessage struct {
	MessageID       int64           `json:"message_id"`
	Text            string          `json:"text"`
	Entities        []entity        `json:"entities"`
	Caption         string          `json:"caption"`
	CaptionEntities []entity        `json:"caption_entities"`
	ReplyMarkup     json.RawMessage `json:"reply_markup"`
	ReplyToMessage  *struct {
		MessageID int64  `json:"message_id"`
		Text      string `json:"text"`
	} `json:"reply_to_message"`
	MediaGroupID string `json:"media_group_id"`
	Photo        []struct {
		FileID string `json:"file_id"`
	} `json:"photo"`
	Document *struct {
		FileID   string `json:"file_id"`
		FileName string `json:"file_name"`
	} `json:"document"`
	Location *struct {
		Latitude float64 `json:"latitude"`
	} `json:"location"`
	Dice *struct {
		Emoji string `json:"emoji"`
		Value int    `json:"value"`
	} `json:"dice"`
	Poll *struct {
		Question string `json:"question"`
		Options  []struct {
			Text string `json:"text"`
		} `json:"options"`
	} `json:"poll"`
	Sticker *struct {
		FileID string `json:"file_id"`
		Type   string `json:"type"`
	} `json:"sticker"`
}

func TestFormattedTextBecomesEntities(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	for _, tc := range []struct {
		name, mode, text string
		plain            string
		ents             []entity
	}{
		{"HTML", "HTML", `<b>bold <i>both</i></b> <a href="https://example.com">link</a> <code>x</code>`,
			"bold both link x", []entity{{Type: "bold", Offset: 0, Length: 9}, {Type: "italic", Offset: 5, Length: 4}, {Type: "text_link", Offset: 10, Length: 4, URL: "https://example.com"}, {Type: "code", Offset: 15, Length: 1}}},
		{"HTML pre with language", "HTML", `<pre><code class="language-go">x := 1</code></pre>`,
			"x := 1", []entity{{Type: "pre", Offset: 0, Length: 6, Language: "go"}}},
		{"HTML UTF-16 offsets", "HTML", `😀 <b>é</b>`, "😀 é", []entity{{Type: "bold", Offset: 3, Length: 1}}},
		{"MarkdownV2", "MarkdownV2", `*bold _both_* __under__ ~gone~ ||secret|| [link](https://example.com/a\)b) \. done`,
			"bold both under gone secret link . done", []entity{
				{Type: "bold", Offset: 0, Length: 9}, {Type: "italic", Offset: 5, Length: 4}, {Type: "underline", Offset: 10, Length: 5},
				{Type: "strikethrough", Offset: 16, Length: 4}, {Type: "spoiler", Offset: 21, Length: 6}, {Type: "text_link", Offset: 28, Length: 4, URL: "https://example.com/a)b"}}},
		{"MarkdownV2 code and pre", "MarkdownV2", "`a*b` and\n```python\nprint(1)```",
			"a*b and\nprint(1)", []entity{{Type: "code", Offset: 0, Length: 3}, {Type: "pre", Offset: 8, Length: 8, Language: "python"}}},
		{"MarkdownV2 blockquote", "MarkdownV2", ">quoted\n>more\nafter", "quoted\nmore\nafter", []entity{{Type: "blockquote", Offset: 0, Length: 11}}},
		{"Markdown", "Markdown", "*bold* _it_ [l](http://x.y) `c`", "bold it l c", []entity{{Type: "bold", Offset: 0, Length: 4}, {Type: "italic", Offset: 5, Length: 2}, {Type: "text_link", Offset: 8, Length: 1, URL: "http://x.y"}, {Type: "code", Offset: 10, Length: 1}}},
		{"plain with commands and URLs", "", "/start@bot see https://example.com. #tag @someone",
			"/start@bot see https://example.com. #tag @someone", []entity{{Type: "bot_command", Offset: 0, Length: 10}, {Type: "url", Offset: 15, Length: 19}, {Type: "hashtag", Offset: 36, Length: 4}, {Type: "mention", Offset: 41, Length: 8}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": tc.text, "parse_mode": tc.mode})
			wantOK(t, a)
			m := decode[fullMessage](t, a.Result)
			if m.Text != tc.plain {
				t.Errorf("text = %q, want %q", m.Text, tc.plain)
			}
			if !reflect.DeepEqual(m.Entities, tc.ents) {
				t.Errorf("entities = %+v\nwant       %+v", m.Entities, tc.ents)
			}
		})
	}
	t.Run("explicit entities are echoed", func(t *testing.T) {
		ents := []entity{{Type: "bold", Offset: 0, Length: 2}}
		m := decode[fullMessage](t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "hi there", "entities": ents}).Result)
		if !reflect.DeepEqual(m.Entities, ents) {
			t.Errorf("entities = %+v", m.Entities)
		}
		wantError(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "hi", "entities": []entity{{Type: "bold", Offset: 1, Length: 5}}}),
			400, "Bad Request: can't parse entities: entity is out of the text")
	})
	t.Run("caption entities", func(t *testing.T) {
		m := decode[fullMessage](t, call(t, f.srv, "sendPhoto", map[string]any{"chat_id": f.chat.ID, "photo": "https://example.com/a.jpg", "caption": "<b>cap</b>", "parse_mode": "HTML"}).Result)
		if m.Caption != "cap" || !reflect.DeepEqual(m.CaptionEntities, []entity{{Type: "bold", Offset: 0, Length: 3}}) || m.Text != "" {
			t.Errorf("photo = %+v", m)
		}
	})
	t.Run("the ledger has the plain text and entities", func(t *testing.T) {
		msgs := f.srv.MessagesTo(f.chat.ID)
		last := msgs[len(msgs)-1]
		if last.Text != "<b>cap</b>" || last.PlainText != "cap" || len(last.Entities) != 1 || last.Entities[0].Type != "bold" {
			t.Errorf("ledger = %+v", last)
		}
	})
}

func TestMalformedMarkdownV2IsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	for _, tc := range []struct{ text, desc string }{
		{"Hello.", `Character '.' is reserved and must be escaped with the preceding '\'`},
		{"1-2", `Character '-' is reserved and must be escaped with the preceding '\'`},
		{"*bold", "Can't find end of Bold entity at byte offset 0"},
		{"ok _it", "Can't find end of Italic entity at byte offset 3"},
		{"`code", "Can't find end of Code entity at byte offset 0"},
		{"```\npre", "Can't find end of Pre entity at byte offset 0"},
		{"[link](http://x", "Can't find end of a URL at byte offset 6"},
		{"a | b", `Character '|' is reserved and must be escaped with the preceding '\'`},
	} {
		a := call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": tc.text, "parse_mode": "MarkdownV2"})
		wantError(t, a, 400, "Bad Request: can't parse entities: "+tc.desc)
	}
	wantError(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "ok *open", "parse_mode": "Markdown"}),
		400, "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 3")
	wantError(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "x", "parse_mode": "BBCode"}),
		400, "Bad Request: unsupported parse_mode")
	if n := len(f.srv.Messages()); n != 0 {
		t.Errorf("%d refused messages reached the ledger", n)
	}
}

func TestRepliesAndReplyMarkup(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	first := decode[fullMessage](t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "first"}).Result)

	inline := `{"inline_keyboard":[[{"text":"Go","callback_data":"go"},{"text":"Site","url":"https://example.com"}]]}`
	m := decode[fullMessage](t, call(t, f.srv, "sendMessage", map[string]any{
		"chat_id": f.chat.ID, "text": "second", "reply_parameters": map[string]any{"message_id": first.MessageID},
		"reply_markup": json.RawMessage(inline),
	}).Result)
	if m.ReplyToMessage == nil || m.ReplyToMessage.MessageID != first.MessageID || m.ReplyToMessage.Text != "first" {
		t.Errorf("reply_to_message = %+v", m.ReplyToMessage)
	}
	if string(m.ReplyMarkup) != inline {
		t.Errorf("inline keyboard not kept: %s", m.ReplyMarkup)
	}
	old := decode[fullMessage](t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "third", "reply_to_message_id": first.MessageID}).Result)
	if old.ReplyToMessage == nil || old.ReplyToMessage.MessageID != first.MessageID {
		t.Errorf("reply_to_message_id: %+v", old.ReplyToMessage)
	}

	keyboard := `{"keyboard":[["Yes","No"]],"resize_keyboard":true}`
	k := decode[fullMessage](t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "pick", "reply_markup": json.RawMessage(keyboard)}).Result)
	if k.ReplyMarkup != nil {
		t.Errorf("a reply keyboard was echoed: %s", k.ReplyMarkup)
	}
	ledger := f.srv.MessagesTo(f.chat.ID)
	if got := string(ledger[len(ledger)-1].ReplyMarkup); got != keyboard {
		t.Errorf("ledger reply markup = %s, want the keyboard as sent", got)
	}
	if ledger[1].ReplyTo != first.MessageID {
		t.Errorf("ledger reply_to = %d", ledger[1].ReplyTo)
	}

	wantError(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "x", "reply_to_message_id": 999}),
		400, "Bad Request: message to be replied not found")
	wantOK(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "x", "reply_parameters": map[string]any{"message_id": 999, "allow_sending_without_reply": true}}))
	wantError(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "x", "reply_markup": json.RawMessage(`{"inline_keyboard":[[{"text":"plain"}]]}`)}),
		400, "Bad Request: can't parse inline keyboard button: Text buttons are unallowed in the inline keyboard")

	// editMessageReplyMarkup changes the keyboard, and the ledger records it.
	edited := decode[fullMessage](t, call(t, f.srv, "editMessageReplyMarkup", map[string]any{"chat_id": f.chat.ID, "message_id": m.MessageID,
		"reply_markup": json.RawMessage(`{"inline_keyboard":[[{"text":"Done","callback_data":"done"}]]}`)}).Result)
	if !strings.Contains(string(edited.ReplyMarkup), "done") || edited.Text != "second" {
		t.Errorf("edited = %+v", edited)
	}
	wantError(t, call(t, f.srv, "editMessageReplyMarkup", map[string]any{"chat_id": f.chat.ID, "message_id": m.MessageID,
		"reply_markup": json.RawMessage(`{"inline_keyboard":[[{"text":"Done","callback_data":"done"}]]}`)}), 400,
		"Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
}

func TestMethodsRealBotsCall(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	srv, chat := f.srv, f.chat.ID
	g, err := srv.NewSupergroup("Team", f.user)
	if err != nil {
		t.Fatal(err)
	}
	text := decode[fullMessage](t, call(t, srv, "sendMessage", map[string]any{"chat_id": chat, "text": "hello"}).Result)
	photo := decode[fullMessage](t, call(t, srv, "sendPhoto", map[string]any{"chat_id": chat, "photo": "https://example.com/p.jpg", "caption": "old"}).Result)
	doomed := decode[fullMessage](t, call(t, srv, "sendMessage", map[string]any{"chat_id": chat, "text": "doomed"}).Result)

	ok := []struct {
		method string
		params map[string]any
		want   string // a fragment of the result
	}{
		{"sendChatAction", map[string]any{"chat_id": chat, "action": "typing"}, "true"},
		{"setMyCommands", map[string]any{"commands": []map[string]string{{"command": "start", "description": "Start"}}}, "true"},
		{"getMyCommands", nil, `[{"command":"start","description":"Start"}]`},
		{"getMyCommands", map[string]any{"scope": map[string]string{"type": "all_private_chats"}}, `[]`},
		{"deleteMyCommands", nil, "true"},
		{"getMyCommands", nil, `[]`},
		{"editMessageCaption", map[string]any{"chat_id": chat, "message_id": photo.MessageID, "caption": "new"}, `"caption":"new"`},
		{"sendMediaGroup", map[string]any{"chat_id": chat, "media": []map[string]string{{"type": "photo", "media": "https://example.com/1.jpg", "caption": "one"}, {"type": "photo", "media": "https://example.com/2.jpg"}}}, `"media_group_id"`},
		{"getChat", map[string]any{"chat_id": chat}, `"accent_color_id"`},
		{"getChat", map[string]any{"chat_id": g.ID}, `"title":"Team"`},
		{"getChatMember", map[string]any{"chat_id": g.ID, "user_id": f.user.ID}, `"status":"creator"`},
		{"getChatMemberCount", map[string]any{"chat_id": g.ID}, "2"},
		{"getChatAdministrators", map[string]any{"chat_id": g.ID}, `"status":"creator"`},
		{"pinChatMessage", map[string]any{"chat_id": chat, "message_id": text.MessageID}, "true"},
		{"getChat", map[string]any{"chat_id": chat}, `"pinned_message"`},
		{"unpinChatMessage", map[string]any{"chat_id": chat, "message_id": text.MessageID}, "true"},
		{"sendLocation", map[string]any{"chat_id": chat, "latitude": 52.5, "longitude": 13.4}, `"location":{"latitude":52.5,"longitude":13.4}`},
		{"sendDice", map[string]any{"chat_id": chat}, `"emoji":"🎲"`},
		{"sendPoll", map[string]any{"chat_id": chat, "question": "Tea?", "options": []string{"Yes", "No"}}, `"question":"Tea?"`},
		{"sendSticker", map[string]any{"chat_id": chat, "sticker": "https://example.com/s.webp"}, `"sticker":{`},
		{"setMessageReaction", map[string]any{"chat_id": chat, "message_id": text.MessageID, "reaction": []map[string]string{{"type": "emoji", "emoji": "👍"}}}, "true"},
		{"setChatMenuButton", map[string]any{"menu_button": map[string]string{"type": "commands"}}, "true"},
		{"getChatMenuButton", nil, `{"type":"commands"}`},
		{"getMyName", nil, `{"name":"Test Bot"}`},
		{"getMe", nil, `"can_connect_to_business":false`},
		{"sendVoice", map[string]any{"chat_id": chat, "voice": "https://example.com/v.ogg", "caption": "hear"}, `"voice":{`},
		{"sendAnimation", map[string]any{"chat_id": chat, "animation": "https://example.com/a.gif"}, `"animation":{`},
		{"sendContact", map[string]any{"chat_id": chat, "phone_number": "+100", "first_name": "Ada"}, `"contact":{"phone_number":"+100","first_name":"Ada"}`},
		{"sendVenue", map[string]any{"chat_id": chat, "latitude": 1, "longitude": 2, "title": "Café", "address": "Main St"}, `"venue":{"location":{"latitude":1,"longitude":2},"title":"Café","address":"Main St"}`},
		{"getUserProfilePhotos", map[string]any{"user_id": f.user.ID}, `{"photos":[],"total_count":0}`},
		{"deleteMessages", map[string]any{"chat_id": chat, "message_ids": []int64{doomed.MessageID, 999}}, "true"},
	}
	for _, tc := range ok {
		a := call(t, srv, tc.method, tc.params)
		if !a.OK || !strings.Contains(string(a.Result), tc.want) {
			t.Errorf("%s(%v) = %d %s %s, want a result with %s", tc.method, tc.params, a.Status, a.Description, a.Result, tc.want)
		}
	}

	refused := []struct {
		method string
		params map[string]any
		desc   string
	}{
		{"sendChatAction", map[string]any{"chat_id": chat, "action": "dancing"}, "Bad Request: wrong parameter action in request"},
		{"setMyCommands", map[string]any{"commands": []map[string]string{{"command": "Start!", "description": "x"}}}, "Bad Request: BOT_COMMAND_INVALID"},
		{"editMessageCaption", map[string]any{"chat_id": chat, "message_id": text.MessageID, "caption": "x"}, "Bad Request: there is no caption in the message to edit"},
		{"sendMediaGroup", map[string]any{"chat_id": chat, "media": []map[string]string{{"type": "photo", "media": "https://example.com/1.jpg"}}}, "Bad Request: media must include 2-10 items"},
		{"getChat", map[string]any{"chat_id": 12345}, "Bad Request: chat not found"},
		{"getChatAdministrators", map[string]any{"chat_id": chat}, "Bad Request: there are no administrators in the private chat"},
		{"pinChatMessage", map[string]any{"chat_id": chat, "message_id": 999}, "Bad Request: message to pin not found"},
		{"getFile", map[string]any{"file_id": "nope"}, "Bad Request: invalid file_id"},
		{"sendLocation", map[string]any{"chat_id": chat, "latitude": 91, "longitude": 0}, "Bad Request: wrong latitude specified"},
		{"sendDice", map[string]any{"chat_id": chat, "emoji": "🍕"}, "Bad Request: invalid dice emoji specified"},
		{"sendPoll", map[string]any{"chat_id": chat, "question": "Tea?", "options": []string{"Yes"}}, "Bad Request: poll must have 2-12 options"},
		{"sendSticker", map[string]any{"chat_id": chat, "sticker": "no-such-file"}, "Bad Request: wrong file identifier/HTTP URL specified"},
		{"sendContact", map[string]any{"chat_id": chat, "first_name": "Ada"}, "Bad Request: phone number is empty"},
		{"sendVenue", map[string]any{"chat_id": chat, "latitude": 1, "longitude": 200, "title": "x", "address": "y"}, "Bad Request: wrong longitude specified"},
		{"setMessageReaction", map[string]any{"chat_id": chat, "message_id": photo.MessageID, "reaction": []map[string]string{{"type": "emoji", "emoji": "🍕"}}}, "Bad Request: REACTION_INVALID"},
		{"answerInlineQuery", map[string]any{"inline_query_id": "1", "results": []any{}}, "Bad Request: query is too old and response timeout expired or query ID is invalid"},
	}
	for _, tc := range refused {
		wantError(t, call(t, srv, tc.method, tc.params), 400, tc.desc)
	}
	a := call(t, srv, "getChatMember", map[string]any{"chat_id": g.ID, "user_id": srv.NewUser("Bob").ID})
	if !strings.Contains(string(a.Result), `"status":"left"`) {
		t.Errorf("a stranger's membership = %s", a.Result)
	}
	if err := srv.SetBlocked(f.user, true); err != nil {
		t.Fatal(err)
	}
	wantError(t, call(t, srv, "sendChatAction", map[string]any{"chat_id": chat, "action": "typing"}), 403, "Forbidden: bot was blocked by the user")
}

func TestFilesUpAndDown(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("chat_id", jsonString(f.chat.ID))
	fw, _ := mw.CreateFormFile("document", "report.txt")
	fw.Write([]byte("quarterly numbers"))
	mw.Close()
	resp, err := f.srv.Client().Post(f.srv.URL+"/bot"+f.srv.Token+"/sendDocument", mw.FormDataContentType(), &body)
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	a.Status = resp.StatusCode
	wantOK(t, a)
	doc := decode[fullMessage](t, a.Result)
	if doc.Document == nil || doc.Document.FileName != "report.txt" {
		t.Fatalf("document = %s", a.Result)
	}
	if got := download(t, f.srv, doc.Document.FileID); got != "quarterly numbers" {
		t.Errorf("download = %q", got)
	}

	// A user's photo: the bot downloads what the user sent.
	u, err := f.srv.Send(f.chat, f.user, telegramtest.UserMessage{Text: "look", Photo: &telegramtest.UserFile{Name: "cat.jpg", Data: []byte("meow")}})
	if err != nil {
		t.Fatal(err)
	}
	var upd struct {
		Message fullMessage `json:"message"`
	}
	json.Unmarshal(u.JSON, &upd)
	if upd.Message.Caption != "look" || len(upd.Message.Photo) == 0 {
		t.Fatalf("user photo update = %s", u.JSON)
	}
	if got := download(t, f.srv, upd.Message.Photo[0].FileID); got != "meow" {
		t.Errorf("download = %q", got)
	}
	// A file_id can be sent again.
	wantOK(t, call(t, f.srv, "sendPhoto", map[string]any{"chat_id": f.chat.ID, "photo": upd.Message.Photo[0].FileID}))

	r, err := f.srv.Client().Get(f.srv.URL + "/file/bot123:wrong/photos/file_1.jpg")
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 401 {
		t.Errorf("download with a wrong token = %d", r.StatusCode)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}

func download(t *testing.T, srv *telegramtest.Server, fileID string) string {
	t.Helper()
	a := call(t, srv, "getFile", map[string]any{"file_id": fileID})
	wantOK(t, a)
	file := decode[struct {
		FilePath string `json:"file_path"`
	}](t, a.Result)
	resp, err := srv.Client().Get(srv.URL + "/file/bot" + srv.Token + "/" + file.FilePath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("download %s = %d %s", file.FilePath, resp.StatusCode, b)
	}
	return string(b)
}

func TestUsersDoWhatUsersDo(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	srv := f.srv
	sent := decode[fullMessage](t, call(t, srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "Where are you?"}).Result)

	loc, err := srv.Send(f.chat, f.user, telegramtest.UserMessage{ReplyTo: sent.MessageID, Location: &telegramtest.Location{Latitude: 48.85, Longitude: 2.35}})
	if err != nil {
		t.Fatal(err)
	}
	var upd struct {
		Message fullMessage `json:"message"`
	}
	json.Unmarshal(loc.JSON, &upd)
	if upd.Message.Location == nil || upd.Message.ReplyToMessage == nil || upd.Message.ReplyToMessage.MessageID != sent.MessageID {
		t.Errorf("location reply = %s", loc.JSON)
	}
	doc, err := srv.Send(f.chat, f.user, telegramtest.UserMessage{Document: &telegramtest.UserFile{Name: "cv.pdf", Data: []byte("%PDF")}})
	if err != nil || !strings.Contains(string(doc.JSON), `"file_name":"cv.pdf"`) {
		t.Errorf("document = %s, %v", doc.JSON, err)
	}
	if _, err := srv.Send(f.chat, f.user, telegramtest.UserMessage{ReplyTo: 999, Text: "x"}); !errors.Is(err, telegramtest.ErrUnknownMessage) {
		t.Errorf("reply to nothing = %v", err)
	}
	if _, err := srv.Send(f.chat, f.user, telegramtest.UserMessage{}); !errors.Is(err, telegramtest.ErrBadMessage) {
		t.Errorf("empty message = %v", err)
	}

	typed, _ := srv.SendText(f.chat, f.user, "helo")
	ed, err := srv.EditText(f.chat, f.user, typed.MessageID, "hello")
	if err != nil || ed.Kind != "edited_message" || !strings.Contains(string(ed.JSON), `"edited_message":{`) || !strings.Contains(string(ed.JSON), `"edit_date"`) {
		t.Errorf("edit = %+v %s, %v", ed, ed.JSON, err)
	}
	if _, err := srv.EditText(f.chat, f.user, sent.MessageID, "mine now"); !errors.Is(err, telegramtest.ErrUnknownMessage) {
		t.Errorf("editing the bot's message = %v", err)
	}

	iq, err := srv.InlineQuery(f.user, "cats")
	if err != nil || iq.Kind != "inline_query" || iq.InlineQueryID == "" || !strings.Contains(string(iq.JSON), `"query":"cats"`) {
		t.Fatalf("inline query = %+v %s, %v", iq, iq.JSON, err)
	}
	results := []map[string]any{{"type": "article", "id": "1", "title": "Cat", "input_message_content": map[string]string{"message_text": "meow"}}}
	wantError(t, call(t, srv, "answerInlineQuery", map[string]any{"inline_query_id": iq.InlineQueryID, "results": append(results, results[0])}), 400, "Bad Request: RESULT_ID_DUPLICATE")
	wantOK(t, call(t, srv, "answerInlineQuery", map[string]any{"inline_query_id": iq.InlineQueryID, "results": results, "cache_time": 5}))
	wantError(t, call(t, srv, "answerInlineQuery", map[string]any{"inline_query_id": iq.InlineQueryID, "results": results}), 400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
	ans := srv.InlineAnswers()
	if len(ans) != 1 || ans[0].UserID != f.user.ID || ans[0].Count != 1 || ans[0].CacheTime != 5 {
		t.Errorf("inline answers = %+v", ans)
	}

	button := decode[fullMessage](t, call(t, srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "Sure?", "reply_markup": json.RawMessage(`{"inline_keyboard":[[{"text":"Yes","callback_data":"yes"}]]}`)}).Result)
	press, err := srv.PressButton(f.chat, f.user, button.MessageID, "yes")
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, call(t, srv, "answerCallbackQuery", map[string]any{"callback_query_id": press.CallbackQueryID, "text": "Done", "show_alert": true}))
	cbs := srv.CallbackAnswers()
	if len(cbs) != 1 || cbs[0].Text != "Done" || !cbs[0].ShowAlert || cbs[0].MessageID != button.MessageID || cbs[0].ChatID != f.chat.ID {
		t.Errorf("callback answers = %+v", cbs)
	}
}

func TestWaitMessagesWakesOnSends(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	got := make(chan []telegramtest.Message, 1)
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		msgs, err := f.srv.WaitMessages(ctx, f.chat.ID, 2)
		got <- msgs
		errc <- err
	}()
	call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "one"})
	call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "two"})
	msgs := recv(t, got, "WaitMessages")
	if err := recv(t, errc, "WaitMessages error"); err != nil || len(msgs) != 2 || msgs[1].Text != "two" {
		t.Fatalf("WaitMessages = %+v, %v", msgs, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if msgs, err := f.srv.WaitMessages(ctx, f.chat.ID, 3); !errors.Is(err, context.Canceled) || len(msgs) != 2 {
		t.Errorf("WaitMessages(cancelled) = %d, %v", len(msgs), err)
	}
}

func TestWaitSettledCoversRetryAfter(t *testing.T) {
	t.Parallel()
	f := setup(t, telegramtest.Config{Limits: telegramtest.Limits{Disabled: true},
		Faults: []telegramtest.Fault{{Method: "sendMessage", Kind: telegramtest.FaultTooManyRequests, RetryAfter: 2}}})
	wantError(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "x"}), 429, "Too Many Requests: retry after 2")
	// Nothing is pending and nothing is in flight, but the bot was told to
	// come back in 2 s: the conversation has not settled before that.
	if err := f.srv.WaitIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := f.srv.WaitSettled(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitSettled inside the retry window = %v, want a deadline error", err)
	}
	ctx, cancel2 := context.WithTimeout(t.Context(), waitLimit)
	defer cancel2()
	if err := f.srv.WaitSettled(ctx); err != nil {
		t.Fatalf("WaitSettled = %v", err)
	}
}

func TestUnreachableIsNotDispatched(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	client, err := transport.NewClient(transport.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.CloseIdleConnections)
	post := func() error {
		body, _ := json.Marshal(map[string]any{"chat_id": f.chat.ID, "text": "hi"})
		resp, err := client.Post(f.srv.URL+"/bot"+f.srv.Token+"/sendMessage", "application/json", bytes.NewReader(body))
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return err
	}
	if err := post(); err != nil { // leaves an idle keep-alive connection
		t.Fatal(err)
	}
	if err := f.srv.Arm(telegramtest.Fault{Kind: telegramtest.FaultUnreachable, Duration: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		err := post()
		if nd, ok := errors.AsType[*transport.NotDispatchedError](err); !ok {
			t.Fatalf("call %d during the outage = %v, want *transport.NotDispatchedError", i, err)
		} else if nd.Stage != transport.StageConnect {
			t.Errorf("stage = %s, want connect", nd.Stage)
		}
	}
	if _, err := net.Dial("tcp", strings.TrimPrefix(f.srv.URL, "http://")); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("dial during the outage = %v, want connection refused", err)
	}
	if n := len(f.srv.Messages()); n != 1 {
		t.Errorf("ledger has %d messages, want 1", n)
	}
	// Disarm ends the outage at once; the next call goes through.
	f.srv.Disarm()
	if err := post(); err != nil {
		t.Fatalf("after Disarm: %v", err)
	}
	if err := f.srv.Arm(telegramtest.Fault{Kind: telegramtest.FaultUnreachable, Method: "getMe"}); err == nil {
		t.Error("an unreachable fault with a Method was accepted")
	}
}

func TestUnreachableEnds(t *testing.T) {
	t.Parallel()
	f := setup(t, telegramtest.Config{Limits: telegramtest.Limits{Disabled: true},
		Faults: []telegramtest.Fault{{Kind: telegramtest.FaultUnreachable, Duration: 100 * time.Millisecond}}})
	c := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(c.CloseIdleConnections)
	var last error
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		resp, err := c.Get(f.srv.URL + "/bot" + f.srv.Token + "/getMe")
		if err == nil {
			resp.Body.Close()
			return // listening again
		}
		last = err
		time.Sleep(20 * time.Millisecond) // the outage ends on a timer the test cannot observe
	}
	t.Fatalf("still unreachable after %v: %v", waitLimit, last)
}

func TestFileContentIsBounded(t *testing.T) {
	t.Parallel()
	f := setup(t, telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}, MaxFileBytes: 6})
	small, err := f.srv.Send(f.chat, f.user, telegramtest.UserMessage{Photo: &telegramtest.UserFile{Name: "a.jpg", Data: []byte("1234")}})
	if err != nil {
		t.Fatal(err)
	}
	big, err := f.srv.Send(f.chat, f.user, telegramtest.UserMessage{Photo: &telegramtest.UserFile{Name: "b.jpg", Data: []byte("5678")}})
	if err != nil {
		t.Fatal(err)
	}
	fileOf := func(u telegramtest.Update) string {
		var upd struct {
			Message fullMessage `json:"message"`
		}
		json.Unmarshal(u.JSON, &upd)
		return upd.Message.Photo[0].FileID
	}
	if got := download(t, f.srv, fileOf(small)); got != "1234" {
		t.Errorf("download within the bound = %q", got)
	}
	// Past Config.MaxFileBytes the file is known but its content was not kept.
	a := call(t, f.srv, "getFile", map[string]any{"file_id": fileOf(big)})
	wantOK(t, a)
	path := decode[struct {
		FilePath string `json:"file_path"`
	}](t, a.Result).FilePath
	resp, err := f.srv.Client().Get(f.srv.URL + "/file/bot" + f.srv.Token + "/" + path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(b), "MaxFileBytes") {
		t.Errorf("download past the bound = %d %s", resp.StatusCode, b)
	}
}
