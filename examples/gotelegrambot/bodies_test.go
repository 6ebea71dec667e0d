package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// capture is an http.RoundTripper that keeps every request body a library
// sends before passing the request on.
type capture struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []capturedRequest
}

// capturedRequest is one Bot API call as it went over the wire.
type capturedRequest struct {
	Method      string // the Bot API method, from the URL path
	ContentType string
	Body        string
}

func (c *capture) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	c.mu.Lock()
	c.reqs = append(c.reqs, capturedRequest{
		Method:      r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:],
		ContentType: r.Header.Get("Content-Type"),
		Body:        string(body),
	})
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

func (c *capture) last() capturedRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.reqs) == 0 {
		return capturedRequest{}
	}
	return c.reqs[len(c.reqs)-1]
}

// bodiesFixture is a fresh telegramtest server, a go-telegram/bot client
// whose requests are captured, a chat, a message of the bot's with an
// inline keyboard, and a callback query on it.
type bodiesFixture struct {
	tg       *telegramtest.Server
	b        *bot.Bot
	cap      *capture
	chat     int64
	msg      int // the bot's message with the keyboard
	callback string
}

func newBodiesFixture(t *testing.T) *bodiesFixture {
	t.Helper()
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}})
	t.Cleanup(tg.Close)
	f := &bodiesFixture{tg: tg, cap: &capture{next: tg.Client().Transport}}
	b, err := bot.New(tg.Token, bot.WithServerURL(tg.URL), bot.WithSkipGetMe(),
		bot.WithHTTPClient(time.Minute, &http.Client{Transport: f.cap, Timeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	user := tg.NewUser("Ada")
	chat, err := tg.NewPrivateChat(user)
	if err != nil {
		t.Fatal(err)
	}
	f.chat = chat.ID
	m, err := b.SendMessage(t.Context(), &bot.SendMessageParams{ChatID: chat.ID, Text: "Sure?", ReplyMarkup: yesNo()})
	if err != nil {
		t.Fatalf("the fixture's keyboard message was refused: %v", err)
	}
	f.msg = m.ID
	upd, err := tg.PressButton(chat, user, int64(m.ID), "yes")
	if err != nil {
		t.Fatal(err)
	}
	f.callback = upd.CallbackQueryID
	return f
}

// yesNo is a stock go-telegram/bot inline keyboard: every button carries
// "copy_text":{"text":""}, which telegramtest used to count as a second
// action.
func yesNo() *models.InlineKeyboardMarkup {
	return &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{
		{{Text: "Yes", CallbackData: "yes"}, {Text: "No", CallbackData: "no"}},
		{{Text: "Site", URL: "https://example.com"}, {Text: "Search", SwitchInlineQueryCurrentChat: "q"}},
	}}
}

// TestLibraryBodies sends the common methods with go-telegram/bot's own
// request building (multipart bodies with every non-omitempty field,
// empty ones included) to telegramtest and asserts that each is accepted,
// as Telegram accepts them. Run with -v to read the bodies; the
// telegramtest package's TestLibraryBodies replays samples of them.
func TestLibraryBodies(t *testing.T) {
	t.Parallel()
	photo := func() io.Reader { return strings.NewReader("\xff\xd8\xff\xe0 a tiny jpeg") }
	cases := []struct {
		name string
		call func(ctx context.Context, f *bodiesFixture) error
		// contains is a fragment the body must hold, so the case keeps
		// testing the shape it was written for.
		contains string
	}{
		{"sendMessage inline keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "pick", ReplyMarkup: yesNo()})
			return err
		}, `"copy_text":{"text":""}`},
		{"sendMessage reply keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "pick", ReplyMarkup: &models.ReplyKeyboardMarkup{
				Keyboard:       [][]models.KeyboardButton{{{Text: "Tea"}, {Text: "Coffee"}}, {{Text: "Share phone", RequestContact: true}}},
				ResizeKeyboard: true, OneTimeKeyboard: true, InputFieldPlaceholder: "Choose",
			}})
			return err
		}, `"keyboard":[[{"text":"Tea"}`},
		{"sendMessage remove keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "done", ReplyMarkup: &models.ReplyKeyboardRemove{RemoveKeyboard: true}})
			return err
		}, `"remove_keyboard":true`},
		{"sendMessage force reply", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "name?", ReplyMarkup: &models.ForceReply{ForceReply: true}})
			return err
		}, `"force_reply":true`},
		{"sendMessage HTML without preview", func(ctx context.Context, f *bodiesFixture) error {
			off := true
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "<b>bold</b> https://example.com", ParseMode: models.ParseModeHTML,
				LinkPreviewOptions: &models.LinkPreviewOptions{IsDisabled: &off}})
			return err
		}, `"is_disabled":true`},
		{"sendMessage MarkdownV2", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "*bold* and " + bot.EscapeMarkdown("1.5 (x)"), ParseMode: models.ParseModeMarkdown})
			return err
		}, "MarkdownV2"},
		{"sendMessage entities", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "bold",
				Entities: []models.MessageEntity{{Type: models.MessageEntityTypeBold, Offset: 0, Length: 4}}})
			return err
		}, `"type":"bold"`},
		{"sendMessage reply_parameters", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, &bot.SendMessageParams{ChatID: f.chat, Text: "reply",
				ReplyParameters: &models.ReplyParameters{MessageID: f.msg}})
			return err
		}, `{"message_id":`},
		{"sendPhoto upload with caption and keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: f.chat, Photo: &models.InputFileUpload{Filename: "p.jpg", Data: photo()},
				Caption: "<i>photo</i>", ParseMode: models.ParseModeHTML, ReplyMarkup: yesNo()})
			return err
		}, `filename="p.jpg"`},
		{"sendPhoto by URL", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: f.chat, Photo: &models.InputFileString{Data: "https://example.com/p.jpg"}})
			return err
		}, "https://example.com/p.jpg"},
		{"sendDocument upload", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendDocument(ctx, &bot.SendDocumentParams{ChatID: f.chat, Document: &models.InputFileUpload{Filename: "notes.txt", Data: strings.NewReader("notes")},
				Caption: "notes", ReplyParameters: &models.ReplyParameters{MessageID: f.msg}})
			return err
		}, `filename="notes.txt"`},
		{"sendMediaGroup uploads", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMediaGroup(ctx, &bot.SendMediaGroupParams{ChatID: f.chat, Media: []models.InputMedia{
				&models.InputMediaPhoto{Media: "attach://one.jpg", MediaAttachment: photo(), Caption: "*one*", ParseMode: models.ParseModeMarkdown},
				&models.InputMediaPhoto{Media: "attach://two.jpg", MediaAttachment: photo()},
			}})
			return err
		}, "attach://two.jpg"},
		{"editMessageText with keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.EditMessageText(ctx, &bot.EditMessageTextParams{ChatID: f.chat, MessageID: f.msg, Text: "<b>Confirmed</b>", ParseMode: models.ParseModeHTML,
				ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "Undo", CallbackData: "undo"}}}}})
			return err
		}, `"copy_text":{"text":""}`},
		{"editMessageReplyMarkup", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.EditMessageReplyMarkup(ctx, &bot.EditMessageReplyMarkupParams{ChatID: f.chat, MessageID: f.msg,
				ReplyMarkup: &models.InlineKeyboardMarkup{InlineKeyboard: [][]models.InlineKeyboardButton{{{Text: "Undo", CallbackData: "undo"}}}}})
			return err
		}, `"copy_text":{"text":""}`},
		{"answerCallbackQuery", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.AnswerCallbackQuery(ctx, &bot.AnswerCallbackQueryParams{CallbackQueryID: f.callback, Text: "Done"})
			return err
		}, "callback_query_id"},
		{"deleteMessage", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.DeleteMessage(ctx, &bot.DeleteMessageParams{ChatID: f.chat, MessageID: f.msg})
			return err
		}, "message_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newBodiesFixture(t)
			err := tc.call(t.Context(), f)
			sent := f.cap.last()
			t.Logf("%s %s\n%s", sent.Method, sent.ContentType, sent.Body)
			if err != nil {
				t.Fatalf("telegramtest refused go-telegram/bot's request: %v", err)
			}
			if !strings.Contains(sent.Body, tc.contains) {
				t.Errorf("the body no longer holds %q: the case does not test what it was written for", tc.contains)
			}
		})
	}
}
