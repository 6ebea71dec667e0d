package telegramtest_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/telegramtest"
)

func TestServerBasics(t *testing.T) {
	t.Parallel()
	srv := newServer(t, telegramtest.Config{BotUsername: "relay_bot"})
	if strings.HasSuffix(srv.URL, "/") || !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Errorf("URL = %q, want http://127.0.0.1:port without a trailing slash", srv.URL)
	}
	if !regexp.MustCompile(`^[0-9]+:[A-Za-z0-9_-]{35}$`).MatchString(srv.Token) {
		t.Errorf("Token = %q, want the shape of a bot token", srv.Token)
	}
	a := call(t, srv, "getMe", nil)
	wantOK(t, a)
	me := decode[struct {
		ID       int64  `json:"id"`
		IsBot    bool   `json:"is_bot"`
		Username string `json:"username"`
	}](t, a.Result)
	if !me.IsBot || me.Username != "relay_bot" || strconv.FormatInt(me.ID, 10) != srv.Token[:strings.IndexByte(srv.Token, ':')] {
		t.Errorf("getMe = %+v", me)
	}
	// Method names are case-insensitive, as in Telegram.
	wantOK(t, call(t, srv, "GETME", nil))

	for _, tc := range []struct {
		name, path string
		code       int
		desc       string
	}{
		{"unknown method", "/bot" + srv.Token + "/sendTelepathy", 404, `Not Found: method \"sendTelepathy\" is not implemented by telegramtest, tgrelay's fake Bot API`},
		{"wrong token", "/bot123:wrong/getMe", 401, "Unauthorized"},
		{"no method", "/bot" + srv.Token + "/", 404, "Not Found"},
		{"not the bot API", "/favicon.ico", 404, "Not Found"},
		{"control API off", "/_sandbox/", 404, "Not Found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := srv.Client().Get(srv.URL + tc.path)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			want := `{"ok":false,"error_code":` + strconv.Itoa(tc.code) + `,"description":"` + tc.desc + `"}`
			if resp.StatusCode != tc.code || string(b) != want {
				t.Errorf("GET %s = %d %s, want %d %s", tc.name, resp.StatusCode, b, tc.code, want)
			}
			if strings.Contains(string(b), srv.Token) {
				t.Error("answer contains the token")
			}
		})
	}
}

func TestStartTLS(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewUnstartedServer(telegramtest.Config{})
	srv.Config.BotName = "Changed before Start"
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "https://") {
		t.Fatalf("URL = %q", srv.URL)
	}
	a := call(t, srv, "getMe", nil)
	wantOK(t, a)
	if !strings.Contains(string(a.Result), "Changed before Start") {
		t.Errorf("getMe = %s; Config changed before Start was ignored", a.Result)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg   telegramtest.Config
		field string
	}{
		{telegramtest.Config{Token: "nope"}, "Token"},
		{telegramtest.Config{MaxPendingUpdates: -1}, "MaxPendingUpdates"},
		{telegramtest.Config{Webhook: telegramtest.WebhookConfig{Timeout: -1}}, "Webhook.Timeout"},
		{telegramtest.Config{Limits: telegramtest.Limits{Chat: telegramtest.Limit{Count: 1}}}, "Limits.Chat.Per"},
		{telegramtest.Config{Faults: []telegramtest.Fault{{Kind: "boom"}}}, "Fault.Kind"},
		{telegramtest.Config{Faults: []telegramtest.Fault{{Kind: telegramtest.FaultHugeBody, Size: telegramtest.MaxFaultSize + 1}}}, "Fault.Size"},
		{telegramtest.Config{Faults: []telegramtest.Fault{{Kind: telegramtest.FaultRefuseConnection, Method: "getMe"}}}, "Fault.Method"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("Validate(%+v) = %v, want an error naming %s", tc.cfg, err, tc.field)
		}
	}
	if err := (telegramtest.Config{Token: "123456:AAbcdefghijklmnopqrstuvwxyz0123456789"}).Validate(); err != nil {
		t.Errorf("valid token refused: %v", err)
	}
}

func TestSendMessageParameterEncodings(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	chat := strconv.FormatInt(f.chat.ID, 10)

	wantOK(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "json"}))
	wantOK(t, postForm(t, f.srv, "sendMessage", url.Values{"chat_id": {chat}, "text": {"form"}}))

	resp, err := f.srv.Client().Get(f.srv.URL + "/bot" + f.srv.Token + "/sendMessage?chat_id=" + chat + "&text=query")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	mw.WriteField("chat_id", chat)
	mw.WriteField("caption", "multipart")
	fw, _ := mw.CreateFormFile("document", "report.pdf")
	fw.Write([]byte("%PDF-1.4"))
	mw.Close()
	req, _ := http.NewRequest(http.MethodPost, f.srv.URL+"/bot"+f.srv.Token+"/sendDocument", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	a, err := do(f.srv.Client(), req)
	if err != nil {
		t.Fatal(err)
	}
	wantOK(t, a)
	if !strings.Contains(string(a.Result), `"file_name":"report.pdf"`) {
		t.Errorf("sendDocument = %s", a.Result)
	}
	wantOK(t, call(t, f.srv, "sendPhoto", map[string]any{"chat_id": f.chat.ID, "photo": "https://example.com/cat.jpg", "caption": "url"}))

	var got []string
	for _, m := range f.srv.Messages() {
		got = append(got, m.Method+":"+m.Text)
	}
	want := []string{"sendMessage:json", "sendMessage:form", "sendMessage:query", "sendDocument:multipart", "sendPhoto:url"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("ledger = %v, want %v", got, want)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	srv := f.srv
	blocked := srv.NewUser("Blocker")
	blockedChat, _ := srv.NewPrivateChat(blocked)
	srv.SetBlocked(blocked, true)
	gone := srv.NewUser("Gone")
	goneChat, _ := srv.NewPrivateChat(gone)
	srv.Deactivate(gone)
	group, _ := srv.NewGroup("Old group", f.user)
	super, err := srv.UpgradeGroup(group)
	if err != nil {
		t.Fatal(err)
	}
	kicked, _ := srv.NewGroup("Kicked", f.user)
	srv.KickBot(kicked)

	long := strings.Repeat("a", telegramtest.MaxTextLength)
	emojiLong := strings.Repeat("😀", telegramtest.MaxTextLength/2) // 2 UTF-16 units each

	for _, tc := range []struct {
		name   string
		params map[string]any
		code   int
		desc   string
	}{
		{"blocked", map[string]any{"chat_id": blockedChat.ID, "text": "hi"}, 403, "Forbidden: bot was blocked by the user"},
		{"deactivated", map[string]any{"chat_id": goneChat.ID, "text": "hi"}, 403, "Forbidden: user is deactivated"},
		{"unknown chat", map[string]any{"chat_id": 999, "text": "hi"}, 400, "Bad Request: chat not found"},
		{"unknown username", map[string]any{"chat_id": "@nobody", "text": "hi"}, 400, "Bad Request: chat not found"},
		{"no chat", map[string]any{"text": "hi"}, 400, "Bad Request: chat_id is empty"},
		{"kicked", map[string]any{"chat_id": kicked.ID, "text": "hi"}, 403, "Forbidden: bot was kicked from the group chat"},
		{"too long", map[string]any{"chat_id": f.chat.ID, "text": long + "a"}, 400, "Bad Request: message is too long"},
		{"too long in UTF-16", map[string]any{"chat_id": f.chat.ID, "text": emojiLong + "a"}, 400, "Bad Request: message is too long"},
		{"empty", map[string]any{"chat_id": f.chat.ID, "text": " "}, 400, "Bad Request: message text is empty"},
		{"bad HTML", map[string]any{"chat_id": f.chat.ID, "text": "<b>bold", "parse_mode": "HTML"}, 400, `Bad Request: can't parse entities: Can't find end tag corresponding to start tag "b"`},
		{"unsupported tag", map[string]any{"chat_id": f.chat.ID, "text": "<blink>x</blink>", "parse_mode": "HTML"}, 400, `Bad Request: can't parse entities: Unsupported start tag "blink" at byte offset 0`},
		{"bad parse mode", map[string]any{"chat_id": f.chat.ID, "text": "x", "parse_mode": "XML"}, 400, "Bad Request: unsupported parse_mode"},
		{"bad markup", map[string]any{"chat_id": f.chat.ID, "text": "x", "reply_markup": "[1]"}, 400, "Bad Request: can't parse reply keyboard markup JSON object"},
		{"no photo", map[string]any{"chat_id": f.chat.ID}, 400, "Bad Request: there is no photo in the request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "sendMessage"
			if tc.name == "no photo" {
				method = "sendPhoto"
			}
			wantError(t, call(t, srv, method, tc.params), tc.code, tc.desc)
		})
	}
	t.Run("upgraded group", func(t *testing.T) {
		a := call(t, srv, "sendMessage", map[string]any{"chat_id": group.ID, "text": "hi"})
		wantError(t, a, 400, "Bad Request: group chat was upgraded to a supergroup chat")
		if a.Parameters.MigrateToChatID != super.ID {
			t.Errorf("migrate_to_chat_id = %d, want %d", a.Parameters.MigrateToChatID, super.ID)
		}
		wantOK(t, call(t, srv, "sendMessage", map[string]any{"chat_id": super.ID, "text": "hi"}))
		wantOK(t, call(t, srv, "sendMessage", map[string]any{"chat_id": "@" + super.Username, "text": "by username"}))
	})
	t.Run("limits are exact", func(t *testing.T) {
		wantOK(t, call(t, srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": long}))
		wantOK(t, call(t, srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": emojiLong}))
		// Markup does not count: only the visible text does.
		wantOK(t, call(t, srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "<b>" + long + "</b>", "parse_mode": "HTML"}))
	})
	t.Run("refusals leave no trace", func(t *testing.T) {
		for _, m := range srv.Messages() {
			if m.ChatID != f.chat.ID && m.ChatID != super.ID {
				t.Errorf("ledger has a refused message: %+v", m)
			}
		}
	})
	t.Run("unblocking by writing", func(t *testing.T) {
		if _, err := srv.SendText(blockedChat, blocked, "/start"); err != nil {
			t.Fatal(err)
		}
		wantOK(t, call(t, srv, "sendMessage", map[string]any{"chat_id": blockedChat.ID, "text": "welcome back"}))
	})
}

func TestEditDeleteCopyForward(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	srv := f.srv
	other := srv.NewUser("Bob")
	otherChat, _ := srv.NewPrivateChat(other)
	sent := decode[sentMessage](t, call(t, srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "v1", "message_thread_id": 7}).Result)

	a := call(t, srv, "editMessageText", map[string]any{"chat_id": f.chat.ID, "message_id": sent.MessageID, "text": "v2"})
	wantOK(t, a)
	if !strings.Contains(string(a.Result), `"edit_date"`) || decode[sentMessage](t, a.Result).Text != "v2" {
		t.Errorf("edit = %s", a.Result)
	}
	wantError(t, call(t, srv, "editMessageText", map[string]any{"chat_id": f.chat.ID, "message_id": sent.MessageID, "text": "v2"}),
		400, "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message")
	wantError(t, call(t, srv, "editMessageText", map[string]any{"chat_id": f.chat.ID, "message_id": 999, "text": "x"}), 400, "Bad Request: message to edit not found")

	cp := call(t, srv, "copyMessage", map[string]any{"chat_id": otherChat.ID, "from_chat_id": f.chat.ID, "message_id": sent.MessageID})
	wantOK(t, cp)
	if decode[struct {
		MessageID int64 `json:"message_id"`
	}](t, cp.Result).MessageID == 0 {
		t.Errorf("copyMessage = %s", cp.Result)
	}
	fw := call(t, srv, "forwardMessage", map[string]any{"chat_id": otherChat.ID, "from_chat_id": f.chat.ID, "message_id": sent.MessageID})
	wantOK(t, fw)
	if !strings.Contains(string(fw.Result), `"forward_origin"`) {
		t.Errorf("forwardMessage = %s", fw.Result)
	}
	wantError(t, call(t, srv, "copyMessage", map[string]any{"chat_id": otherChat.ID, "from_chat_id": f.chat.ID, "message_id": 999}), 400, "Bad Request: message to copy not found")
	wantError(t, call(t, srv, "forwardMessage", map[string]any{"chat_id": otherChat.ID, "from_chat_id": f.chat.ID, "message_id": 999}), 400, "Bad Request: message to forward not found")

	wantOK(t, call(t, srv, "deleteMessage", map[string]any{"chat_id": f.chat.ID, "message_id": sent.MessageID}))
	wantError(t, call(t, srv, "deleteMessage", map[string]any{"chat_id": f.chat.ID, "message_id": sent.MessageID}), 400, "Bad Request: message to delete not found")

	got := srv.Messages()
	want := []telegramtest.Message{
		{ChatID: f.chat.ID, MessageID: sent.MessageID, ThreadID: 7, Method: "sendMessage", Text: "v1", PlainText: "v1"},
		{ChatID: f.chat.ID, MessageID: sent.MessageID, ThreadID: 7, Method: "editMessageText", Text: "v2", PlainText: "v2"},
		{ChatID: otherChat.ID, MessageID: 1, Method: "copyMessage", Text: "v2", PlainText: "v2"},
		{ChatID: otherChat.ID, MessageID: 2, Method: "forwardMessage", Text: "v2", PlainText: "v2"},
	}
	if len(got) != len(want) {
		t.Fatalf("ledger = %+v", got)
	}
	for i := range want {
		got[i].Time = want[i].Time
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("ledger[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestButtonPress(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	srv := f.srv
	markup := `{"inline_keyboard":[[{"text":"Yes","callback_data":"yes"},{"text":"No","callback_data":"no"}]]}`
	sent := decode[sentMessage](t, call(t, srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "Sure?", "reply_markup": json.RawMessage(markup)}).Result)

	if _, err := srv.PressButton(f.chat, f.user, sent.MessageID, "maybe"); !errors.Is(err, telegramtest.ErrUnknownMessage) {
		t.Errorf("PressButton(no such button) = %v, want ErrUnknownMessage", err)
	}
	upd, err := srv.PressButton(f.chat, f.user, sent.MessageID, "yes")
	if err != nil {
		t.Fatal(err)
	}
	if upd.Kind != "callback_query" || upd.CallbackQueryID == "" {
		t.Fatalf("update = %+v", upd)
	}
	ups := call(t, srv, "getUpdates", nil)
	var got []struct {
		UpdateID      int64 `json:"update_id"`
		CallbackQuery struct {
			ID      string      `json:"id"`
			Data    string      `json:"data"`
			Message sentMessage `json:"message"`
		} `json:"callback_query"`
	}
	json.Unmarshal(ups.Result, &got)
	if len(got) != 1 || got[0].CallbackQuery.ID != upd.CallbackQueryID || got[0].CallbackQuery.Data != "yes" || got[0].CallbackQuery.Message.MessageID != sent.MessageID {
		t.Fatalf("getUpdates = %s", ups.Result)
	}
	wantOK(t, call(t, srv, "answerCallbackQuery", map[string]any{"callback_query_id": upd.CallbackQueryID, "text": "Done"}))
	if text, ok := srv.CallbackAnswer(upd.CallbackQueryID); !ok || text != "Done" {
		t.Errorf("CallbackAnswer = %q, %v", text, ok)
	}
	wantError(t, call(t, srv, "answerCallbackQuery", map[string]any{"callback_query_id": upd.CallbackQueryID}),
		400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
}

func TestUserActionErrors(t *testing.T) {
	t.Parallel()
	f := setup(t, telegramtest.Config{MaxPendingUpdates: 2})
	srv := f.srv
	stranger := srv.NewUser("Stranger")
	channel, _ := srv.NewChannel("News")
	if _, err := srv.SendText(f.chat, stranger, "hi"); !errors.Is(err, telegramtest.ErrUnknownUser) {
		t.Errorf("SendText(other user's private chat) = %v", err)
	}
	if _, err := srv.SendText(channel, f.user, "hi"); !errors.Is(err, telegramtest.ErrChannel) {
		t.Errorf("SendText(channel) = %v", err)
	}
	if _, err := srv.SendText(telegramtest.Chat{ID: 5}, f.user, "hi"); !errors.Is(err, telegramtest.ErrUnknownChat) {
		t.Errorf("SendText(unknown chat) = %v", err)
	}
	// The queue bound (Config.MaxPendingUpdates) is hit.
	for i := range 2 {
		if _, err := srv.SendText(f.chat, f.user, "m"+strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := srv.SendText(f.chat, f.user, "one too many"); !errors.Is(err, telegramtest.ErrQueueFull) {
		t.Errorf("SendText over MaxPendingUpdates = %v, want ErrQueueFull", err)
	}
}

func TestBounds(t *testing.T) {
	t.Parallel()
	t.Run("request body", func(t *testing.T) {
		t.Parallel()
		f := setup(t, telegramtest.Config{MaxRequestBytes: 100})
		a := call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": strings.Repeat("x", 100)})
		wantError(t, a, 413, "Request Entity Too Large")
	})
	t.Run("message ledger", func(t *testing.T) {
		t.Parallel()
		cfg := noLimits()
		cfg.MaxMessages = 2
		f := setup(t, cfg)
		wantOK(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "1"}))
		wantOK(t, call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "2"}))
		a := call(t, f.srv, "sendMessage", map[string]any{"chat_id": f.chat.ID, "text": "3"})
		if a.Status != 500 || len(f.srv.Messages()) != 2 {
			t.Errorf("send over MaxMessages = %d %q, ledger %d", a.Status, a.Description, len(f.srv.Messages()))
		}
		if _, err := f.srv.SendText(f.chat, f.user, "user"); !errors.Is(err, telegramtest.ErrLedgerFull) {
			t.Errorf("SendText over MaxMessages = %v", err)
		}
	})
	t.Run("faults", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, telegramtest.Config{})
		for range telegramtest.MaxFaults {
			if err := srv.Arm(telegramtest.Fault{Method: "getMe", Nth: 1000000}); err != nil {
				t.Fatal(err)
			}
		}
		if err := srv.Arm(telegramtest.Fault{}); err == nil {
			t.Error("Arm over MaxFaults succeeded")
		}
	})
	t.Run("poll timeout", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, telegramtest.Config{MaxPollTimeout: 1})
		// timeout=3600 is capped to 1ns: the call returns at once, empty.
		a := call(t, srv, "getUpdates", map[string]any{"timeout": 3600})
		wantOK(t, a)
		if string(a.Result) != "[]" {
			t.Errorf("getUpdates = %s", a.Result)
		}
	})
}

func TestDeliveryLedgerBound(t *testing.T) {
	t.Parallel()
	cfg := noLimits()
	cfg.MaxDeliveries = 2
	f := setup(t, cfg)
	upd, _ := f.srv.SendText(f.chat, f.user, "hi")
	for range 3 {
		getUpdates(t, f.srv, nil) // never confirmed: offered again each time
	}
	d := f.srv.Deliveries()
	if len(d) != 2 || f.srv.DroppedDeliveries() != 1 || d[0].Attempt != 2 || d[1].Attempt != 3 || d[1].UpdateID != upd.ID {
		t.Errorf("deliveries = %+v, dropped %d; want the last 2 of 3 and 1 dropped", d, f.srv.DroppedDeliveries())
	}
}

func TestWebhookAnswerIsReadBounded(t *testing.T) {
	t.Parallel()
	f := setup(t, fastWebhook())
	big := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Far more than MaxWebhookResponseBytes; the server stops reading.
		chunk := bytes.Repeat([]byte("x"), 32<<10)
		for range 4 * telegramtest.MaxWebhookResponseBytes / len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(big.Close)
	wantOK(t, call(t, f.srv, "setWebhook", map[string]any{"url": big.URL}))
	f.srv.SendText(f.chat, f.user, "hi")
	waitIdle(t, f.srv, "the delivery")
	if d := f.srv.Deliveries(); len(d) != 1 || d[0].Status != 200 {
		t.Errorf("deliveries = %+v", d)
	}
}

func TestChannelPost(t *testing.T) {
	t.Parallel()
	srv := newServer(t, noLimits())
	reader := srv.NewUser("Reader")
	ch, _ := srv.NewChannel("Daily News")
	a := call(t, srv, "sendMessage", map[string]any{"chat_id": "@" + ch.Username, "text": "Vote",
		"reply_markup": map[string]any{"inline_keyboard": [][]map[string]string{{{"text": "+1", "callback_data": "up"}}}}})
	wantOK(t, a)
	if !strings.Contains(string(a.Result), `"sender_chat"`) || strings.Contains(string(a.Result), `"from"`) {
		t.Errorf("channel post = %s, want sender_chat and no from", a.Result)
	}
	post := decode[sentMessage](t, a.Result)
	if _, err := srv.PressButton(ch, reader, post.MessageID, "up"); err != nil {
		t.Errorf("PressButton in a channel = %v", err)
	}
	if _, err := srv.SendText(ch, reader, "comment"); !errors.Is(err, telegramtest.ErrChannel) {
		t.Errorf("SendText in a channel = %v, want ErrChannel", err)
	}
}

func TestSeedMakesTheTokenRepeatable(t *testing.T) {
	t.Parallel()
	a := newServer(t, telegramtest.Config{Seed: 42})
	b := newServer(t, telegramtest.Config{Seed: 42})
	c := newServer(t, telegramtest.Config{Seed: 43})
	if a.Token != b.Token || a.Token == c.Token {
		t.Errorf("tokens for seeds 42, 42, 43 = %q %q %q", a.Token, b.Token, c.Token)
	}
}
