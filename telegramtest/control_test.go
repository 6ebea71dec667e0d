package telegramtest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// control calls the control API and decodes its answer into out.
func control(t *testing.T, srv *telegramtest.Server, method, path string, body any, out any) int {
	t.Helper()
	var r *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	} else {
		r = bytes.NewReader(nil)
	}
	req, _ := http.NewRequest(method, srv.URL+path, r)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	}
	return resp.StatusCode
}

func TestControlAPI(t *testing.T) {
	t.Parallel()
	srv := newServer(t, telegramtest.Config{ControlAPI: true, Limits: telegramtest.Limits{Disabled: true}})

	var info struct {
		URL, Token string
	}
	control(t, srv, "GET", "/_sandbox/", nil, &info)
	if info.URL != srv.URL || info.Token != srv.Token {
		t.Errorf("info = %+v", info)
	}
	var u telegramtest.User
	if code := control(t, srv, "POST", "/_sandbox/users", map[string]any{"first_name": "Ada"}, &u); code != 200 || u.ID == 0 {
		t.Fatalf("create user = %d %+v", code, u)
	}
	var chat telegramtest.Chat
	control(t, srv, "POST", "/_sandbox/chats", map[string]any{"type": "private", "user_id": u.ID}, &chat)
	var group telegramtest.Chat
	control(t, srv, "POST", "/_sandbox/chats", map[string]any{"type": "group", "title": "G", "member_ids": []int64{u.ID}}, &group)
	if chat.ID != u.ID || group.Type != telegramtest.ChatGroup {
		t.Fatalf("chats = %+v %+v", chat, group)
	}
	var upd struct {
		UpdateID int64  `json:"update_id"`
		Kind     string `json:"kind"`
	}
	control(t, srv, "POST", "/_sandbox/command", map[string]any{"chat_id": chat.ID, "user_id": u.ID, "command": "start", "args": "ref42"}, &upd)
	got := getUpdates(t, srv, nil)
	if len(got) != 1 || got[0].UpdateID != upd.UpdateID || got[0].Message.Text != "/start ref42" {
		t.Fatalf("getUpdates after the control command = %+v", got)
	}

	sent := decode[sentMessage](t, call(t, srv, "sendMessage", map[string]any{"chat_id": chat.ID, "text": "Pick",
		"reply_markup": map[string]any{"inline_keyboard": [][]map[string]string{{{"text": "A", "callback_data": "a"}}}}}).Result)
	var press struct {
		CallbackQueryID string `json:"callback_query_id"`
	}
	if code := control(t, srv, "POST", "/_sandbox/press", map[string]any{"chat_id": chat.ID, "user_id": u.ID, "message_id": sent.MessageID, "data": "a"}, &press); code != 200 || press.CallbackQueryID == "" {
		t.Fatalf("press = %d %+v", code, press)
	}

	var msgs []telegramtest.Message
	control(t, srv, "GET", "/_sandbox/messages?chat_id="+jsonInt(chat.ID), nil, &msgs)
	if len(msgs) != 1 || msgs[0].Text != "Pick" {
		t.Errorf("messages = %+v", msgs)
	}

	// Arm a fault through the API; it applies to the Bot API.
	control(t, srv, "POST", "/_sandbox/faults", map[string]any{"method": "sendMessage", "kind": "server_error", "status": 503}, nil)
	wantError(t, call(t, srv, "sendMessage", map[string]any{"chat_id": chat.ID, "text": "x"}), 503, "Service Unavailable")
	var e struct{ Error string }
	if code := control(t, srv, "POST", "/_sandbox/faults", map[string]any{"kind": "explode"}, &e); code != 400 || !strings.Contains(e.Error, "explode") {
		t.Errorf("bad fault = %d %q", code, e.Error)
	}

	// Limits through the API.
	control(t, srv, "POST", "/_sandbox/limits", map[string]any{"chat": map[string]any{"count": 1, "per_ms": 60000}}, nil)
	wantOK(t, call(t, srv, "sendMessage", map[string]any{"chat_id": chat.ID, "text": "1"}))
	if a := call(t, srv, "sendMessage", map[string]any{"chat_id": chat.ID, "text": "2"}); a.Status != 429 {
		t.Errorf("after limits: %d", a.Status)
	}

	// Refusal switches.
	control(t, srv, "POST", "/_sandbox/users/block", map[string]any{"user_id": u.ID}, nil)
	control(t, srv, "POST", "/_sandbox/limits", map[string]any{"disabled": true}, nil)
	wantError(t, call(t, srv, "sendMessage", map[string]any{"chat_id": chat.ID, "text": "x"}), 403, "Forbidden: bot was blocked by the user")
	var super telegramtest.Chat
	control(t, srv, "POST", "/_sandbox/chats/upgrade", map[string]any{"chat_id": group.ID}, &super)
	if a := call(t, srv, "sendMessage", map[string]any{"chat_id": group.ID, "text": "x"}); a.Parameters.MigrateToChatID != super.ID || super.ID == 0 {
		t.Errorf("upgrade: %+v, %+v", a, super)
	}

	// Errors name the problem.
	if code := control(t, srv, "POST", "/_sandbox/send", map[string]any{"chat_id": 1, "user_id": u.ID, "text": "x"}, &e); code != 404 || !strings.Contains(e.Error, "unknown chat") {
		t.Errorf("unknown chat = %d %q", code, e.Error)
	}
	if code := control(t, srv, "GET", "/_sandbox/nope", nil, &e); code != 404 {
		t.Errorf("unknown endpoint = %d", code)
	}
	if code := control(t, srv, "POST", "/_sandbox/users", strings.Repeat("x", telegramtest.MaxControlBodyBytes), nil); code != 413 {
		t.Errorf("oversized control body = %d, want 413", code)
	}

	// Reset forgets everything but the token.
	control(t, srv, "POST", "/_sandbox/reset", nil, nil)
	var chats []telegramtest.Chat
	control(t, srv, "GET", "/_sandbox/chats", nil, &chats)
	control(t, srv, "GET", "/_sandbox/messages", nil, &msgs)
	if len(chats) != 0 || len(msgs) != 0 {
		t.Errorf("after reset: %d chats, %d messages", len(chats), len(msgs))
	}
	wantOK(t, call(t, srv, "getMe", nil))
}

func jsonInt(n int64) string { b, _ := json.Marshal(n); return string(b) }

func TestControlAPIObjectBound(t *testing.T) {
	t.Parallel()
	srv := newServer(t, telegramtest.Config{ControlAPI: true, MaxControlObjects: 2})
	var u telegramtest.User
	control(t, srv, "POST", "/_sandbox/users", map[string]any{"first_name": "A"}, &u)
	control(t, srv, "POST", "/_sandbox/chats", map[string]any{"type": "private", "user_id": u.ID}, nil)
	var e struct{ Error string }
	if code := control(t, srv, "POST", "/_sandbox/users", map[string]any{"first_name": "B"}, &e); code != 409 || !strings.Contains(e.Error, "MaxControlObjects") {
		t.Errorf("third object = %d %q, want 409 naming the limit", code, e.Error)
	}
	control(t, srv, "POST", "/_sandbox/reset", nil, nil)
	if code := control(t, srv, "POST", "/_sandbox/users", map[string]any{"first_name": "B"}, &u); code != 200 {
		t.Errorf("after reset = %d", code)
	}
}

func TestControlAPIUserActionsAndWaits(t *testing.T) {
	t.Parallel()
	srv := newServer(t, telegramtest.Config{ControlAPI: true, Limits: telegramtest.Limits{Disabled: true}})
	var user telegramtest.User
	control(t, srv, "POST", "/_sandbox/users", map[string]any{"first_name": "Ada"}, &user)
	var chat telegramtest.Chat
	control(t, srv, "POST", "/_sandbox/chats", map[string]any{"type": "private", "user_id": user.ID}, &chat)

	type upd struct {
		UpdateID      int64  `json:"update_id"`
		Kind          string `json:"kind"`
		MessageID     int64  `json:"message_id"`
		InlineQueryID string `json:"inline_query_id"`
	}
	var photo upd
	if code := control(t, srv, "POST", "/_sandbox/send", map[string]any{"chat_id": chat.ID, "user_id": user.ID, "text": "cat",
		"photo": map[string]any{"name": "cat.jpg", "data": []byte("meow")}}, &photo); code != 200 || photo.Kind != "message" {
		t.Fatalf("send photo = %d %+v", code, photo)
	}
	var text upd
	control(t, srv, "POST", "/_sandbox/send", map[string]any{"chat_id": chat.ID, "user_id": user.ID, "text": "helo", "reply_to": photo.MessageID}, &text)
	var edit upd
	if code := control(t, srv, "POST", "/_sandbox/edit", map[string]any{"chat_id": chat.ID, "user_id": user.ID, "message_id": text.MessageID, "text": "hello"}, &edit); code != 200 || edit.Kind != "edited_message" {
		t.Fatalf("edit = %d %+v", code, edit)
	}
	var inline upd
	if code := control(t, srv, "POST", "/_sandbox/inline", map[string]any{"user_id": user.ID, "query": "q"}, &inline); code != 200 || inline.InlineQueryID == "" {
		t.Fatalf("inline = %d %+v", code, inline)
	}
	var loc upd
	if code := control(t, srv, "POST", "/_sandbox/send", map[string]any{"chat_id": chat.ID, "user_id": user.ID, "location": map[string]float64{"latitude": 1, "longitude": 2}}, &loc); code != 200 {
		t.Fatalf("location = %d", code)
	}

	done := make(chan []telegramtest.Message, 1)
	go func() {
		var msgs []telegramtest.Message
		control(t, srv, "POST", "/_sandbox/wait/messages", map[string]any{"chat_id": chat.ID, "count": 1, "timeout_ms": waitLimit.Milliseconds()}, &msgs)
		done <- msgs
	}()
	call(t, srv, "sendMessage", map[string]any{"chat_id": chat.ID, "text": "hi", "reply_markup": json.RawMessage(`{"keyboard":[["a"]]}`)})
	msgs := recv(t, done, "wait/messages")
	if len(msgs) != 1 || string(msgs[0].ReplyMarkup) != `{"keyboard":[["a"]]}` {
		t.Errorf("wait/messages = %+v", msgs)
	}
	var errBody map[string]string
	if code := control(t, srv, "POST", "/_sandbox/wait/messages", map[string]any{"chat_id": chat.ID, "count": 5, "timeout_ms": 10}, &errBody); code != 408 {
		t.Errorf("wait/messages past its timeout = %d %v, want 408", code, errBody)
	}
	// Updates are still pending (nobody polled): not settled.
	if code := control(t, srv, "POST", "/_sandbox/wait/settled", map[string]any{"timeout_ms": 10}, &errBody); code != 408 {
		t.Errorf("wait/settled with pending updates = %d, want 408", code)
	}
	call(t, srv, "getUpdates", map[string]any{"offset": loc.UpdateID + 1})
	var ok bool
	if code := control(t, srv, "POST", "/_sandbox/wait/settled", map[string]any{"timeout_ms": waitLimit.Milliseconds()}, &ok); code != 200 || !ok {
		t.Errorf("wait/settled = %d %v", code, ok)
	}
	var answers []telegramtest.CallbackAnswer
	if code := control(t, srv, "GET", "/_sandbox/callback-answers", nil, &answers); code != 200 || answers == nil {
		t.Errorf("callback-answers = %d %v", code, answers)
	}
}
