package telegramtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

type gotUpdate struct {
	UpdateID int64 `json:"update_id"`
	Message  struct {
		MessageID int64 `json:"message_id"`
		Text      string
		Chat      struct {
			ID int64 `json:"id"`
		} `json:"chat"`
		Entities []struct {
			Type   string `json:"type"`
			Length int    `json:"length"`
		} `json:"entities"`
	} `json:"message"`
}

func getUpdates(t *testing.T, srv *telegramtest.Server, params map[string]any) []gotUpdate {
	t.Helper()
	a := call(t, srv, "getUpdates", params)
	wantOK(t, a)
	return decode[[]gotUpdate](t, a.Result)
}

func ids(us []gotUpdate) []int64 {
	var out []int64
	for _, u := range us {
		out = append(out, u.UpdateID)
	}
	return out
}

func TestGetUpdatesOffset(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	var sent []int64
	for _, text := range []string{"one", "/start payload", "three", "four"} {
		u, err := f.srv.SendText(f.chat, f.user, text)
		if err != nil {
			t.Fatal(err)
		}
		sent = append(sent, u.ID)
	}
	for i := 1; i < len(sent); i++ {
		if sent[i] != sent[i-1]+1 {
			t.Fatalf("update ids %v do not increase by one", sent)
		}
	}
	all := getUpdates(t, f.srv, nil)
	if !slices.Equal(ids(all), sent) {
		t.Fatalf("getUpdates = %v, want %v", ids(all), sent)
	}
	if e := all[1].Message.Entities; len(e) != 1 || e[0].Type != "bot_command" || e[0].Length != len("/start") {
		t.Errorf("command entities = %+v", e)
	}
	// Without an offset nothing is confirmed: the same updates again.
	if got := ids(getUpdates(t, f.srv, map[string]any{"limit": 2})); !slices.Equal(got, sent[:2]) {
		t.Errorf("limit 2 = %v, want %v", got, sent[:2])
	}
	// limit 0 is raised to 1.
	if got := ids(getUpdates(t, f.srv, map[string]any{"limit": 0})); len(got) != 1 {
		t.Errorf("limit 0 = %v, want 1 update", got)
	}
	// offset confirms every update below it.
	if got := ids(getUpdates(t, f.srv, map[string]any{"offset": sent[2]})); !slices.Equal(got, sent[2:]) {
		t.Errorf("offset = %v, want %v", got, sent[2:])
	}
	if n := f.srv.PendingUpdates(); n != 2 {
		t.Errorf("pending after confirming 2 = %d", n)
	}
	// A negative offset keeps only the last -offset updates.
	if got := ids(getUpdates(t, f.srv, map[string]any{"offset": -1})); !slices.Equal(got, sent[3:]) {
		t.Errorf("offset -1 = %v, want %v", got, sent[3:])
	}
	if got := ids(getUpdates(t, f.srv, map[string]any{"offset": sent[3] + 1})); len(got) != 0 {
		t.Errorf("after confirming all = %v", got)
	}
	if n := f.srv.PendingUpdates(); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
	if !f.srv.PendingChatsConsistent() {
		t.Error("per-chat pending counts drifted from the queue")
	}
	// Unconfirmed updates returned twice are duplicate deliveries.
	if d := f.srv.DuplicateDeliveries(); !slices.Equal(d, sent) {
		t.Errorf("DuplicateDeliveries = %v, want %v", d, sent)
	}
}

func TestLongPollWakesOnUpdate(t *testing.T) {
	t.Parallel()
	srv := newServer(t, noLimits())
	u := srv.NewUser("Ada")
	c, _ := srv.NewPrivateChat(u)
	polled := make(chan []gotUpdate, 1)
	go func() {
		a, err := tryCall(t.Context(), srv, "getUpdates", map[string]any{"timeout": 50})
		if err != nil {
			t.Error(err)
		}
		var us []gotUpdate
		json.Unmarshal(a.Result, &us)
		polled <- us
	}()
	testkit.WaitFor(t, "the long poll to wait", func() bool { return srv.Polling() == 1 })
	upd, err := srv.SendText(c, u, "wake up")
	if err != nil {
		t.Fatal(err)
	}
	// The poll's timeout is 50 s, longer than waitLimit: only the update
	// can end it in time.
	got := recv(t, polled, "the long poll to return the update")
	if len(got) != 1 || got[0].UpdateID != upd.ID || got[0].Message.Text != "wake up" {
		t.Errorf("long poll = %+v", got)
	}
}

func TestGetUpdatesConflicts(t *testing.T) {
	t.Parallel()
	srv := newServer(t, noLimits())
	first := make(chan answer, 1)
	go func() {
		a, err := tryCall(t.Context(), srv, "getUpdates", map[string]any{"timeout": 50})
		if err != nil {
			t.Error(err)
		}
		first <- a
	}()
	testkit.WaitFor(t, "the first long poll", func() bool { return srv.Polling() == 1 })
	second := make(chan answer, 1)
	go func() {
		a, err := tryCall(t.Context(), srv, "getUpdates", map[string]any{"timeout": 50})
		if err != nil {
			t.Error(err)
		}
		second <- a
	}()
	wantError(t, recv(t, first, "the first poll to be terminated"), 409,
		"Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
	testkit.WaitFor(t, "the second long poll", func() bool { return srv.Polling() == 1 && srv.Calls()["getUpdates"] == 2 })
	wantOK(t, call(t, srv, "setWebhook", map[string]any{"url": "http://127.0.0.1:1/hook"}))
	wantError(t, recv(t, second, "the second poll to be terminated"), 409, "Conflict: terminated by setWebhook request")
	wantError(t, call(t, srv, "getUpdates", nil), 409,
		"Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first")
	a := call(t, srv, "deleteWebhook", nil)
	wantOK(t, a)
	if a.Description != "Webhook was deleted" {
		t.Errorf("deleteWebhook description = %q", a.Description)
	}
	wantOK(t, call(t, srv, "getUpdates", nil))
}

// hook is a webhook target: it records every request, and answers with
// what respond returns.
type hook struct {
	srv      *httptest.Server
	mu       sync.Mutex
	bodies   []gotUpdate
	secrets  []string
	inflight atomic.Int32
	peak     atomic.Int32
	respond  func(u gotUpdate, n int) int // n counts requests for this update
	counts   map[int64]int
}

func newHook(t *testing.T, respond func(u gotUpdate, n int) int) *hook {
	t.Helper()
	h := &hook{respond: respond, counts: map[int64]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cur := h.inflight.Add(1)
		defer h.inflight.Add(-1)
		for {
			p := h.peak.Load()
			if cur <= p || h.peak.CompareAndSwap(p, cur) {
				break
			}
		}
		b, _ := io.ReadAll(r.Body)
		var u gotUpdate
		json.Unmarshal(b, &u)
		h.mu.Lock()
		h.bodies = append(h.bodies, u)
		h.secrets = append(h.secrets, r.Header.Get("X-Telegram-Bot-Api-Secret-Token"))
		h.counts[u.UpdateID]++
		n := h.counts[u.UpdateID]
		h.mu.Unlock()
		code := 200
		if h.respond != nil {
			code = h.respond(u, n)
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) received() []gotUpdate {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bodies)
}

func fastWebhook() telegramtest.Config {
	cfg := noLimits()
	cfg.Webhook = telegramtest.WebhookConfig{Timeout: 200 * time.Millisecond, Backoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxAttempts: 3}
	return cfg
}

type webhookInfo struct {
	URL                string   `json:"url"`
	PendingUpdateCount int      `json:"pending_update_count"`
	LastErrorDate      int64    `json:"last_error_date"`
	LastErrorMessage   string   `json:"last_error_message"`
	MaxConnections     int      `json:"max_connections"`
	AllowedUpdates     []string `json:"allowed_updates"`
}

func TestWebhookRedeliversOn500(t *testing.T) {
	t.Parallel()
	cfg := fastWebhook()
	clk := newClock()
	cfg.NowFunc = clk.Now
	f := setup(t, cfg)
	h := newHook(t, func(u gotUpdate, n int) int {
		if n == 1 {
			return 500
		}
		return 200
	})
	upd, _ := f.srv.SendText(f.chat, f.user, "queued before the webhook")
	a := call(t, f.srv, "setWebhook", map[string]any{"url": h.srv.URL, "secret_token": "s3cr3t_-", "max_connections": 5, "allowed_updates": []string{"message"}})
	wantOK(t, a)
	if a.Description != "Webhook was set" {
		t.Errorf("setWebhook description = %q", a.Description)
	}
	waitIdle(t, f.srv, "re-delivery after a 500")
	got := h.received()
	if len(got) != 2 || got[0].UpdateID != upd.ID || got[1].UpdateID != upd.ID {
		t.Fatalf("webhook received %+v, want update %d twice", got, upd.ID)
	}
	if h.secrets[0] != "s3cr3t_-" || h.secrets[1] != "s3cr3t_-" {
		t.Errorf("secret headers = %q", h.secrets)
	}
	d := f.srv.Deliveries()
	if len(d) != 2 || d[0].Status != 500 || d[0].Attempt != 1 || !d[0].Reached || d[1].Status != 200 || d[1].Attempt != 2 {
		t.Errorf("deliveries = %+v", d)
	}
	info := decode[webhookInfo](t, call(t, f.srv, "getWebhookInfo", nil).Result)
	if info.URL != h.srv.URL || info.PendingUpdateCount != 0 || info.MaxConnections != 5 ||
		info.LastErrorMessage != "Wrong response from the webhook: 500 Internal Server Error" ||
		info.LastErrorDate != clk.Now().Unix() || !slices.Equal(info.AllowedUpdates, []string{"message"}) {
		t.Errorf("getWebhookInfo = %+v", info)
	}
	if dup := f.srv.DuplicateDeliveries(); !slices.Equal(dup, []int64{upd.ID}) {
		t.Errorf("DuplicateDeliveries = %v", dup)
	}
}

func TestWebhookRedeliversOnTimeoutAndGivesUp(t *testing.T) {
	t.Parallel()
	f := setup(t, fastWebhook())
	release := make(chan struct{})
	h := newHook(t, func(u gotUpdate, n int) int {
		if u.Message.Text == "slow" && n == 1 {
			<-release // longer than Webhook.Timeout: the server gives up on it
		}
		if u.Message.Text == "always fails" {
			return 503
		}
		return 200
	})
	t.Cleanup(func() { close(release) })
	wantOK(t, call(t, f.srv, "setWebhook", map[string]any{"url": h.srv.URL}))
	slow, _ := f.srv.SendText(f.chat, f.user, "slow")
	waitIdle(t, f.srv, "re-delivery after a timeout")
	d := f.srv.Deliveries()
	if len(d) != 2 || d[0].UpdateID != slow.ID || d[0].Err != "Read timeout expired" || d[0].Status != 0 || !d[0].Reached || d[1].Status != 200 {
		t.Fatalf("deliveries = %+v", d)
	}

	fails, _ := f.srv.SendText(f.chat, f.user, "always fails")
	waitIdle(t, f.srv, "the update to be given up")
	var attempts []telegramtest.Delivery
	for _, x := range f.srv.Deliveries() {
		if x.UpdateID == fails.ID {
			attempts = append(attempts, x)
		}
	}
	if len(attempts) != 3 || !attempts[2].GaveUp || attempts[1].GaveUp {
		t.Errorf("attempts = %+v, want 3 with the last given up (MaxAttempts)", attempts)
	}
	info := decode[webhookInfo](t, call(t, f.srv, "getWebhookInfo", nil).Result)
	if info.LastErrorMessage != "Wrong response from the webhook: 503 Service Unavailable" {
		t.Errorf("last_error_message = %q", info.LastErrorMessage)
	}
}

func TestWebhookOneAtATimePerChat(t *testing.T) {
	t.Parallel()
	cfg := fastWebhook()
	cfg.Webhook.Timeout = 2 * waitLimit // the hook holds a1 until release
	srv := newServer(t, cfg)
	a, b := srv.NewUser("A"), srv.NewUser("B")
	chatA, _ := srv.NewPrivateChat(a)
	chatB, _ := srv.NewPrivateChat(b)
	release := make(chan struct{})
	entered := make(chan string, 10)
	h := newHook(t, func(u gotUpdate, n int) int {
		entered <- u.Message.Text
		if u.Message.Text == "a1" {
			<-release
		}
		return 200
	})
	wantOK(t, call(t, srv, "setWebhook", map[string]any{"url": h.srv.URL}))
	srv.SendText(chatA, a, "a1")
	if got := recv(t, entered, "a1 to arrive"); got != "a1" {
		t.Fatalf("first delivery = %q", got)
	}
	srv.SendText(chatA, a, "a2")
	srv.SendText(chatB, b, "b1")
	// b1 is delivered while a1 is still in flight; a2 must wait for a1.
	if got := recv(t, entered, "b1 to arrive"); got != "b1" {
		t.Fatalf("delivery while a1 is in flight = %q, want b1", got)
	}
	testkit.WaitFor(t, "b1 to be acknowledged", func() bool { return srv.PendingUpdates() == 2 })
	select {
	case got := <-entered:
		t.Fatalf("%q delivered while a1 of the same chat was in flight", got)
	default:
	}
	close(release)
	if got := recv(t, entered, "a2 to arrive"); got != "a2" {
		t.Fatalf("after a1 = %q, want a2", got)
	}
	waitIdle(t, srv, "chat A to drain")
	var order []string
	for _, u := range h.received() {
		if u.Message.Chat.ID == chatA.ID {
			order = append(order, u.Message.Text)
		}
	}
	if !srv.PendingChatsConsistent() {
		t.Error("per-chat pending counts drifted from the queue")
	}
	if !slices.Equal(order, []string{"a1", "a2"}) {
		t.Errorf("chat A received %v, want [a1 a2]", order)
	}
}

func TestWebhookMaxConnections(t *testing.T) {
	t.Parallel()
	cfg := fastWebhook()
	cfg.Webhook.Timeout = 2 * waitLimit // the hook holds every request until release
	srv := newServer(t, cfg)
	release := make(chan struct{})
	arrived := make(chan struct{}, 10)
	h := newHook(t, func(u gotUpdate, n int) int {
		arrived <- struct{}{}
		<-release
		return 200
	})
	wantOK(t, call(t, srv, "setWebhook", map[string]any{"url": h.srv.URL, "max_connections": 2}))
	for i := range 5 {
		u := srv.NewUser("U" + string(rune('a'+i)))
		c, _ := srv.NewPrivateChat(u)
		srv.SendText(c, u, "hello")
	}
	recv(t, arrived, "first delivery")
	recv(t, arrived, "second delivery")
	close(release)
	waitIdle(t, srv, "all five delivered")
	if p := h.peak.Load(); p > 2 {
		t.Errorf("%d deliveries at once, max_connections is 2", p)
	}
	if n := len(h.received()); n != 5 {
		t.Errorf("received %d, want 5", n)
	}
}

func TestWebhookSettings(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	for _, tc := range []struct {
		params map[string]any
		desc   string
	}{
		{map[string]any{"url": "ftp://x"}, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"},
		{map[string]any{"url": "https://x", "secret_token": "no spaces"}, "Bad Request: secret token contains unallowed characters"},
		{map[string]any{"url": "https://x", "secret_token": strings.Repeat("a", 257)}, "Bad Request: secret token contains unallowed characters"},
		{map[string]any{"url": "https://x", "max_connections": 101}, "Bad Request: bad webhook: max_connections must be between 1 and 100"},
		{map[string]any{"url": "https://x", "allowed_updates": "nope"}, "Bad Request: can't parse allowed_updates JSON array"},
	} {
		wantError(t, call(t, f.srv, "setWebhook", tc.params), 400, tc.desc)
	}
	// allowed_updates filters updates made afterwards.
	wantOK(t, call(t, f.srv, "getUpdates", map[string]any{"allowed_updates": []string{"callback_query"}}))
	u, err := f.srv.SendText(f.chat, f.user, "filtered")
	if err != nil || !u.Filtered || u.ID != 0 {
		t.Errorf("SendText with allowed_updates=[callback_query] = %+v, %v", u, err)
	}
	// drop_pending_updates drops the queue.
	wantOK(t, call(t, f.srv, "getUpdates", map[string]any{"allowed_updates": []string{}}))
	f.srv.SendText(f.chat, f.user, "to drop")
	wantOK(t, call(t, f.srv, "setWebhook", map[string]any{"url": "http://127.0.0.1:1/x", "drop_pending_updates": true}))
	if n := f.srv.PendingUpdates(); n != 0 || !f.srv.PendingChatsConsistent() {
		t.Errorf("pending after drop_pending_updates = %d", n)
	}
	info := decode[webhookInfo](t, call(t, f.srv, "getWebhookInfo", nil).Result)
	if info.MaxConnections != telegramtest.DefaultMaxConnections {
		t.Errorf("default max_connections = %d", info.MaxConnections)
	}
	a := call(t, f.srv, "setWebhook", map[string]any{"url": ""})
	if a.Description != "Webhook was deleted" {
		t.Errorf("setWebhook(url=\"\") = %q", a.Description)
	}
	if a := call(t, f.srv, "deleteWebhook", nil); a.Description != "Webhook is already deleted" {
		t.Errorf("deleteWebhook twice = %q", a.Description)
	}
}

func TestWaitIdle(t *testing.T) {
	t.Parallel()
	f := setup(t, noLimits())
	upd, _ := f.srv.SendText(f.chat, f.user, "hi")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := f.srv.WaitIdle(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitIdle with an update pending and ctx cancelled = %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.srv.WaitIdle(t.Context()) }()
	getUpdates(t, f.srv, map[string]any{"offset": upd.ID + 1})
	if err := recv(t, done, "WaitIdle to return after the update was confirmed"); err != nil {
		t.Error(err)
	}
}

func TestWebhookToATLSTargetAndGroupCommands(t *testing.T) {
	t.Parallel()
	srv := newServer(t, fastWebhook())
	got := make(chan gotUpdate, 1)
	target := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var u gotUpdate
		json.NewDecoder(r.Body).Decode(&u)
		got <- u
	}))
	t.Cleanup(target.Close)
	wantOK(t, call(t, srv, "setWebhook", map[string]any{"url": target.URL}))
	u := srv.NewUser("Ada")
	g, _ := srv.NewSupergroup("Team", u)
	upd, err := srv.SendCommand(g, u, "/report", "today")
	if err != nil {
		t.Fatal(err)
	}
	m := recv(t, got, "the update at the self-signed HTTPS target")
	if m.UpdateID != upd.ID || m.Message.Text != "/report@telegramtest_bot today" || m.Message.Chat.ID != g.ID {
		t.Errorf("update = %+v", m)
	}
	if e := m.Message.Entities; len(e) != 1 || e[0].Length != len("/report@telegramtest_bot") {
		t.Errorf("entities = %+v", e)
	}
	waitIdle(t, srv, "the delivery to be recorded")
}

func TestResetEndsWaitingPolls(t *testing.T) {
	t.Parallel()
	srv := newServer(t, noLimits())
	done := make(chan answer, 1)
	go func() {
		a, err := tryCall(t.Context(), srv, "getUpdates", map[string]any{"timeout": 50})
		if err != nil {
			t.Error(err)
		}
		done <- a
	}()
	testkit.WaitFor(t, "the long poll to wait", func() bool { return srv.Polling() == 1 })
	srv.Reset()
	a := recv(t, done, "the poll to end after Reset")
	wantOK(t, a)
	if string(a.Result) != "[]" {
		t.Errorf("poll after Reset = %s", a.Result)
	}
	if n := srv.Polling(); n != 0 {
		t.Errorf("Polling = %d after the poll ended", n)
	}
}

func TestSendChatterRoundRobin(t *testing.T) {
	t.Parallel()
	srv := telegramtest.NewServer(telegramtest.Config{})
	defer srv.Close()
	ups, err := srv.SendChatter(3, 7)
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 7 {
		t.Fatalf("SendChatter(3, 7) returned %d updates, want 7", len(ups))
	}
	for i, u := range ups {
		if i > 0 && u.ID != ups[i-1].ID+1 {
			t.Errorf("update %d has id %d after %d; want ids one apart", i, u.ID, ups[i-1].ID)
		}
		if u.Kind != "message" || u.ChatID != ups[i%3].ChatID {
			t.Errorf("update %d: %s in chat %d; want a message in the chat of update %d (round robin)", i, u.Kind, u.ChatID, i%3)
		}
	}
	if ups[0].ChatID == ups[1].ChatID || ups[1].ChatID == ups[2].ChatID {
		t.Errorf("chats %d, %d, %d: want three different chats", ups[0].ChatID, ups[1].ChatID, ups[2].ChatID)
	}
	if _, err := srv.SendChatter(0, 1); err == nil {
		t.Error("SendChatter over 0 chats: want an error")
	}
}
