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

	"github.com/mymmrac/telego"
	tu "github.com/mymmrac/telego/telegoutil"

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

// bodiesFixture is a fresh telegramtest server, a telego client whose
// requests are captured, a chat, a message of the bot's with an inline
// keyboard, and a callback query on it.
type bodiesFixture struct {
	tg       *telegramtest.Server
	b        *telego.Bot
	cap      *capture
	chat     telego.ChatID
	msg      int // the bot's message with the keyboard
	callback string
}

func newBodiesFixture(t *testing.T) *bodiesFixture {
	t.Helper()
	tg := telegramtest.NewServer(telegramtest.Config{Limits: telegramtest.Limits{Disabled: true}})
	t.Cleanup(tg.Close)
	f := &bodiesFixture{tg: tg, cap: &capture{next: tg.Client().Transport}}
	b, err := telego.NewBot(tg.Token, telego.WithAPIServer(tg.URL), telego.WithDiscardLogger(),
		telego.WithHTTPClient(&http.Client{Transport: f.cap, Timeout: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	user := tg.NewUser("Ada")
	chat, err := tg.NewPrivateChat(user)
	if err != nil {
		t.Fatal(err)
	}
	f.chat = tu.ID(chat.ID)
	m, err := b.SendMessage(t.Context(), tu.Message(f.chat, "Sure?").WithReplyMarkup(yesNo()))
	if err != nil {
		t.Fatalf("the fixture's keyboard message was refused: %v", err)
	}
	f.msg = m.MessageID
	upd, err := tg.PressButton(chat, user, int64(m.MessageID), "yes")
	if err != nil {
		t.Fatal(err)
	}
	f.callback = upd.CallbackQueryID
	return f
}

// yesNo is an inline keyboard built with telegoutil, as telego's
// documentation builds them.
func yesNo() *telego.InlineKeyboardMarkup {
	return tu.InlineKeyboard(
		tu.InlineKeyboardRow(tu.InlineKeyboardButton("Yes").WithCallbackData("yes"), tu.InlineKeyboardButton("No").WithCallbackData("no")),
		tu.InlineKeyboardRow(tu.InlineKeyboardButton("Site").WithURL("https://example.com"),
			tu.InlineKeyboardButton("Mention me").WithSwitchInlineQuery("")),
	)
}

// TestLibraryBodies sends the common methods with telego's own request
// building (JSON bodies, multipart for uploads) to telegramtest and
// asserts that each is accepted, as Telegram accepts them. Run with -v to
// read the bodies; the telegramtest package's TestLibraryBodies replays
// samples of them.
func TestLibraryBodies(t *testing.T) {
	t.Parallel()
	photo := func(name string) telego.InputFile {
		return tu.File(tu.NameReader(strings.NewReader("\xff\xd8\xff\xe0 a tiny jpeg"), name))
	}
	cases := []struct {
		name string
		call func(ctx context.Context, f *bodiesFixture) error
		// contains is a fragment the body must hold, so the case keeps
		// testing the shape it was written for.
		contains string
	}{
		{"sendMessage inline keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "pick").WithReplyMarkup(yesNo()))
			return err
		}, `"switch_inline_query":""`},
		{"sendMessage reply keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "pick").WithReplyMarkup(tu.Keyboard(
				tu.KeyboardRow(tu.KeyboardButton("Tea"), tu.KeyboardButton("Coffee")),
				tu.KeyboardRow(tu.KeyboardButton("Share phone").WithRequestContact()),
			).WithResizeKeyboard().WithOneTimeKeyboard().WithInputFieldPlaceholder("Choose")))
			return err
		}, `"request_contact":true`},
		{"sendMessage remove keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "done").WithReplyMarkup(tu.ReplyKeyboardRemove()))
			return err
		}, `"remove_keyboard":true`},
		{"sendMessage force reply", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "name?").WithReplyMarkup(tu.ForceReply()))
			return err
		}, `"force_reply":true`},
		{"sendMessage HTML without preview", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "<b>bold</b> https://example.com").WithParseMode(telego.ModeHTML).
				WithLinkPreviewOptions(&telego.LinkPreviewOptions{IsDisabled: true}))
			return err
		}, `"is_disabled":true`},
		{"sendMessage MarkdownV2", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "*bold* and 1\\.5").WithParseMode(telego.ModeMarkdownV2))
			return err
		}, "MarkdownV2"},
		{"sendMessage entities", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "bold").WithEntities(telego.MessageEntity{Type: telego.EntityTypeBold, Offset: 0, Length: 4}))
			return err
		}, `"type":"bold"`},
		{"sendMessage reply_parameters", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMessage(ctx, tu.Message(f.chat, "reply").WithReplyParameters(&telego.ReplyParameters{MessageID: f.msg}))
			return err
		}, `"reply_parameters":{"message_id":`},
		{"sendPhoto upload with caption and keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendPhoto(ctx, tu.Photo(f.chat, photo("p.jpg")).WithCaption("<i>photo</i>").WithParseMode(telego.ModeHTML).WithReplyMarkup(yesNo()))
			return err
		}, `filename="p.jpg"`},
		{"sendPhoto by URL", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendPhoto(ctx, tu.Photo(f.chat, tu.FileFromURL("https://example.com/p.jpg")))
			return err
		}, "https://example.com/p.jpg"},
		{"sendDocument upload", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendDocument(ctx, tu.Document(f.chat, tu.File(tu.NameReader(strings.NewReader("notes"), "notes.txt"))).
				WithCaption("notes").WithReplyParameters(&telego.ReplyParameters{MessageID: f.msg}))
			return err
		}, `filename="notes.txt"`},
		{"sendMediaGroup uploads", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.SendMediaGroup(ctx, tu.MediaGroup(f.chat,
				tu.MediaPhoto(photo("one.jpg")).WithCaption("*one*").WithParseMode(telego.ModeMarkdownV2),
				tu.MediaPhoto(photo("two.jpg")),
			))
			return err
		}, "attach://"},
		{"editMessageText with keyboard", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.EditMessageText(ctx, tu.EditMessageText(f.chat, f.msg, "<b>Confirmed</b>").WithParseMode(telego.ModeHTML).
				WithReplyMarkup(tu.InlineKeyboard(tu.InlineKeyboardRow(tu.InlineKeyboardButton("Undo").WithCallbackData("undo")))))
			return err
		}, `"callback_data":"undo"`},
		{"editMessageReplyMarkup", func(ctx context.Context, f *bodiesFixture) error {
			_, err := f.b.EditMessageReplyMarkup(ctx, tu.EditMessageReplyMarkup(f.chat, f.msg,
				tu.InlineKeyboard(tu.InlineKeyboardRow(tu.InlineKeyboardButton("Undo").WithCallbackData("undo")))))
			return err
		}, `"callback_data":"undo"`},
		{"answerCallbackQuery", func(ctx context.Context, f *bodiesFixture) error {
			return f.b.AnswerCallbackQuery(ctx, tu.CallbackQuery(f.callback).WithText("Done"))
		}, "callback_query_id"},
		{"deleteMessage", func(ctx context.Context, f *bodiesFixture) error {
			return f.b.DeleteMessage(ctx, tu.Delete(f.chat, f.msg))
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
				t.Fatalf("telegramtest refused telego's request: %v", err)
			}
			if !strings.Contains(sent.Body, tc.contains) {
				t.Errorf("the body no longer holds %q: the case does not test what it was written for", tc.contains)
			}
		})
	}
}
