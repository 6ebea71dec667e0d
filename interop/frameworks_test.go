package interop

import (
	"encoding/json"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tgrelay/tgrelay/internal/testkit"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// The frameworks under test, each a bot script in testdata/bots.
var frameworks = []string{"grammy", "telegraf"}

// retriesFailures reports whether fw's stock webhook handler answers 5xx
// when the handler throws, so that serve retries it. Telegraf's answers 200
// (it ends the response it is given whatever happened, and with its default
// webhookReply it may have ended it before the handler threw): a Telegraf
// handler's failure completes its update.
func retriesFailures(fw string) bool { return fw != "telegraf" }

// TestFrameworksLongPolling runs each bot by long polling against `tgrelay
// sandbox`.
func TestFrameworksLongPolling(t *testing.T) {
	t.Parallel()
	for _, fw := range frameworks {
		t.Run(fw, func(t *testing.T) {
			t.Parallel()
			modules := requireNode(t)
			sb := startSandbox(t)
			bot := startBot(t, fw, modules, sb, "poll", "")
			bot.waitLine(t, "READY")
			conversation(t, sb, false)
		})
	}
}

// TestFrameworksBehindServe runs each bot as a webhook app behind `tgrelay
// serve`, which long-polls the sandbox and forwards every update to it.
func TestFrameworksBehindServe(t *testing.T) {
	t.Parallel()
	for _, fw := range frameworks {
		t.Run(fw, func(t *testing.T) {
			t.Parallel()
			modules := requireNode(t)
			sb := startSandbox(t)
			// The bot checks its own secret, which serve sends in Telegram's
			// header.
			const secret = "interop_app-secret"
			bot := startBot(t, fw, modules, sb, "webhook", secret)
			hook := "http://127.0.0.1:" + strings.TrimSpace(strings.TrimPrefix(bot.waitLine(t, "READY"), "READY")) + "/"
			// The exhaustion endpoint is, by mistake, the bot's own webhook
			// handler: it must never acknowledge an exhaustion.
			serve := startServe(t, sb, hook, "--app-secret-token", secret, "--exhaustion-forward", hook,
				"--max-attempts", "2", "--admin-listen", "127.0.0.1:0")
			admin := adminURL.FindStringSubmatch(serve.waitContains(t, "admin=http"))[1]
			conversation(t, sb, retriesFailures(fw))

			if retriesFailures(fw) {
				// A handler that always throws: retried, then an exhaustion
				// the framework's handler does not acknowledge.
				_, chat := sb.user(t, "Eve")
				sb.send(t, chat, telegramtest.User{ID: chat.UserID}, map[string]any{"text": "/boom"})
				serve.waitContains(t, "intake: exhaustion handler failed")
				if n := metric(t, admin, "tgrelay_exhaustions_acknowledged_total"); n != 0 {
					t.Errorf("the framework's webhook handler acknowledged an exhaustion (%v)", n)
				}
			}
			// serve's gateway is on by default: Telegraf's webhook replies
			// are performed.
			if n := metric(t, admin, "tgrelay_unacted_replies_total"); n != 0 {
				t.Errorf("%v webhook replies were not performed", n)
			}
		})
	}
}

// TestFrameworksThroughGateway runs each bot behind serve's defaults, whose
// gateway is on, on an ephemeral loopback port, with the framework's stock
// settings: each update's calls go to the API root serve announces for it
// in Tgrelay-Api-Root, handed to the framework exactly as it arrives (a new
// Bot or Telegraf per update, as the README says); Telegraf runs its stock
// webhookCallback on the real response with its default webhookReply, so
// its handler's first eligible call (answerCbQuery, sendChatAction) ends
// the response, the gateway performs it and serve completes the update,
// while the handler goes on calling (edits, a message) as the attempt that
// completed the update; the app secret is checked by the framework's own
// secretToken option, matching serve's --app-secret-token. Every call
// reaches the chat once, and none is refused as stale.
func TestFrameworksThroughGateway(t *testing.T) {
	t.Parallel()
	for _, fw := range frameworks {
		t.Run(fw, func(t *testing.T) {
			t.Parallel()
			modules := requireNode(t)
			sb := startSandbox(t)
			port := freePort(t)
			const secret = "interop_gateway-secret"
			serve := startServe(t, sb, "http://127.0.0.1:"+port+"/", "--app-secret-token", secret,
				"--admin-listen", "127.0.0.1:0")
			admin := adminURL.FindStringSubmatch(serve.waitContains(t, "admin=http"))[1]
			gw := gatewayURL.FindStringSubmatch(serve.waitContains(t, "gateway=http"))[1]
			// The gateway's own address is the API root of the calls the bot
			// makes outside an update (at start-up).
			bot := startBotAt(t, fw, modules, sb.token, gw, "webhook", secret, port, "ROOT=header")
			bot.waitLine(t, "READY")
			conversation(t, sb, retriesFailures(fw))
			root := strings.TrimPrefix(bot.waitLine(t, "ROOT "), "ROOT ")
			if !announcedRoot.MatchString(root) || !strings.HasPrefix(root, gw+"/a/") {
				t.Errorf("the bot's API root %q; want the gateway's %s/a/<update>/<attempt>/<claim>/bot", root, gw)
			}
			if n := metric(t, admin, "tgrelay_unacted_replies_total"); n != 0 {
				t.Errorf("%v webhook replies were not performed behind the gateway", n)
			}
			if n := metric(t, admin, "tgrelay_gateway_stale_refusals_total"); n != 0 {
				t.Errorf("%v of the bot's calls were refused as stale", n)
			}
		})
	}
}

var announcedRoot = regexp.MustCompile(`^http://127\.0\.0\.1:[0-9]+/a/[0-9]+/[0-9]+/[A-Za-z0-9_-]+/bot$`)

var gatewayURL = regexp.MustCompile(`gateway=(http://[0-9.:]+)`)

// freePort returns a loopback port free a moment ago (the bot must be
// told its port before serve, whose gateway the bot needs, starts).
func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(testkit.FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

func startBot(t *testing.T, fw, modules string, sb *sandbox, mode, secret string) *proc {
	t.Helper()
	return startBotAt(t, fw, modules, sb.token, sb.url, mode, secret, "0")
}

func startBotAt(t *testing.T, fw, modules, token, apiRoot, mode, secret, port string, env ...string) *proc {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "bots", fw+"_bot.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	return start(t, fw+" bot", append([]string{
		"TGRELAY_NODE_MODULES=" + modules, "TOKEN=" + token, "API_ROOT=" + apiRoot,
		"MODE=" + mode, "PORT=" + port, "SECRET=" + secret,
	}, env...), "node", script)
}

func startServe(t *testing.T, sb *sandbox, forward string, extra ...string) *proc {
	t.Helper()
	args := []string{tgrelay(t), "serve", "--api-root", sb.url, "--poll", "--poll-timeout", "1s",
		"--forward", forward, "--db", filepath.Join(t.TempDir(), "relay.sqlite"),
		"--backoff-base", "100ms", "--sweep-interval", "100ms"}
	return start(t, "tgrelay serve", []string{"TGRELAY_TOKEN=" + sb.token}, append(args, extra...)...)
}

// conversation drives the users through what the bots implement and
// checks what the bot sent, as the sandbox's ledger records it. retries
// adds the case only a relay gives: a handler that fails once is retried.
func conversation(t *testing.T, sb *sandbox, retries bool) {
	t.Helper()
	ada, adaChat := sb.user(t, "Ada")
	bob, bobChat := sb.user(t, "Bob")
	cy, cyChat := sb.user(t, "Cy")
	dee, deeChat := sb.user(t, "Dee")
	var team telegramtest.Chat
	sb.control(t, "POST", "chats", map[string]any{"type": "supergroup", "title": "Team", "member_ids": []int64{ada.ID, bob.ID}}, &team)

	// /start: a chat action, then formatted text replying to the command,
	// with an inline keyboard.
	start := sb.send(t, adaChat, ada, map[string]any{"text": "/start"})
	hello := sb.waitMessages(t, adaChat.ID, 1)[0]
	if hello.PlainText != "Hello, Ada!" || len(hello.Entities) != 2 || hello.Entities[0].Type != "bold" || hello.Entities[1].Type != "italic" {
		t.Errorf("hello = %q %+v", hello.PlainText, hello.Entities)
	}
	if hello.ReplyTo != start.MessageID || !strings.Contains(string(hello.ReplyMarkup), `"callback_data":"yes"`) {
		t.Errorf("hello reply_to = %d (want %d), markup %s", hello.ReplyTo, start.MessageID, hello.ReplyMarkup)
	}

	// Pressing the button: the answer, an edit of the text, then of the
	// keyboard, then a message. (Telegraf's default webhookReply makes the
	// answer the response: the rest follows after the forward ended.)
	sb.control(t, "POST", "press", map[string]any{"chat_id": adaChat.ID, "user_id": ada.ID, "message_id": hello.MessageID, "data": "yes"}, nil)
	msgs := sb.waitMessages(t, adaChat.ID, 4)
	if msgs[1].Method != "editMessageText" || msgs[1].PlainText != "Confirmed ✅" || msgs[2].Method != "editMessageReplyMarkup" || !strings.Contains(string(msgs[2].ReplyMarkup), "undo") ||
		msgs[3].PlainText != "Noted" {
		t.Errorf("after the press: %+v", msgs[1:])
	}
	// The answer may be a webhook reply, performed after the handler ends.
	var answers []telegramtest.CallbackAnswer
	testkit.WaitFor(t, "the callback answer", func() bool {
		sb.control(t, "GET", "callback-answers", nil, &answers)
		return len(answers) > 0
	})
	if len(answers) != 1 || answers[0].Text != "Done" {
		t.Errorf("callback answers = %+v", answers)
	}

	// /media: a media group, a location, a dice, a poll and a sticker.
	sb.send(t, bobChat, bob, map[string]any{"text": "/media"})
	media := sb.waitMessages(t, bobChat.ID, 6)
	var methods []string
	for _, m := range media {
		methods = append(methods, m.Method)
	}
	if got := strings.Join(methods, " "); got != "sendMediaGroup sendMediaGroup sendLocation sendDice sendPoll sendSticker" {
		t.Errorf("media methods = %s", got)
	}

	// MarkdownV2 captions, an edited caption, and Telegram's refusal of
	// malformed MarkdownV2 as the framework reports it.
	sb.send(t, cyChat, cy, map[string]any{"text": "/caption"})
	caps := sb.waitMessages(t, cyChat.ID, 3)
	if caps[0].PlainText != "bold caption" || caps[1].Method != "editMessageCaption" || caps[1].PlainText != "new caption" {
		t.Errorf("captions = %+v", caps[:2])
	}
	if want := `refused: Bad Request: can't parse entities: Character '.' is reserved and must be escaped with the preceding '\'`; caps[2].Text != want {
		t.Errorf("refusal = %q, want %q", caps[2].Text, want)
	}

	// A user's photo, downloaded by the bot with getFile; a location.
	photo := sb.send(t, cyChat, cy, map[string]any{"text": "my cat", "photo": map[string]any{"name": "cat.jpg", "data": []byte("meow")}})
	got := sb.waitMessages(t, cyChat.ID, 4)[3]
	if got.PlainText != "photo: 4 bytes: meow" || got.ReplyTo != photo.MessageID {
		t.Errorf("photo reply = %+v", got)
	}
	sb.send(t, cyChat, cy, map[string]any{"location": map[string]float64{"latitude": 48.85, "longitude": 2.35}})
	if got := sb.waitMessages(t, cyChat.ID, 5)[4]; got.PlainText != "at 48.85,2.35" {
		t.Errorf("location reply = %q", got.PlainText)
	}

	// An edited message.
	typo := sb.send(t, deeChat, dee, map[string]any{"text": "helo"})
	sb.control(t, "POST", "edit", map[string]any{"chat_id": deeChat.ID, "user_id": dee.ID, "message_id": typo.MessageID, "text": "hello"}, nil)
	if got := sb.waitMessages(t, deeChat.ID, 1)[0]; got.PlainText != "edited: hello" {
		t.Errorf("edit reply = %q", got.PlainText)
	}

	// Chat information and pinning, in a group.
	sb.send(t, team, ada, map[string]any{"text": "/info@telegramtest_bot"})
	if got := sb.waitMessages(t, team.ID, 1)[0]; got.PlainText != "info: Team creator members=3 admins=1" {
		t.Errorf("info = %q", got.PlainText)
	}

	// A reaction and deleting several messages at once.
	sb.send(t, adaChat, ada, map[string]any{"text": "/react"})
	if got := sb.waitMessages(t, adaChat.ID, 7)[6]; got.PlainText != "reacted" {
		t.Errorf("react = %q", got.PlainText)
	}

	// An inline query.
	var iq update
	sb.control(t, "POST", "inline", map[string]any{"user_id": bob.ID, "query": "cats"}, &iq)
	var inline []telegramtest.InlineAnswer
	testkit.WaitFor(t, "the inline answer", func() bool {
		sb.control(t, "GET", "inline-answers", nil, &inline)
		return len(inline) == 1
	})
	if inline[0].QueryID != iq.InlineQueryID || !strings.Contains(string(inline[0].Results), `"message_text":"cats"`) {
		t.Errorf("inline answer = %+v", inline[0])
	}

	if retries {
		// The handler throws on attempt 1; the relay retries and the bot
		// reads the attempt from the identity headers.
		sb.send(t, deeChat, dee, map[string]any{"text": "/flaky"})
		if got := sb.waitMessages(t, deeChat.ID, 2)[1]; got.PlainText != "recovered on attempt 2" {
			t.Errorf("flaky = %q", got.PlainText)
		}
	}

	var ok bool
	sb.control(t, "POST", "wait/settled", map[string]any{"timeout_ms": waitLimit.Milliseconds()}, &ok)
	var calls map[string]int
	sb.control(t, "GET", "calls", nil, &calls)
	for _, m := range []string{"setMyCommands", "getMyCommands", "setChatMenuButton", "getMyName", "sendChatAction",
		"getFile", "getChat", "getChatMember", "getChatAdministrators", "pinChatMessage", "unpinChatMessage",
		"setMessageReaction", "deleteMessages", "answerInlineQuery", "answerCallbackQuery"} {
		if calls[m] == 0 {
			t.Errorf("the bot never called %s (calls: %v)", m, calls)
		}
	}
	// Each call of the start and the press reached Telegram once: none
	// lost after a webhook reply, none sent twice.
	for _, m := range []string{"sendChatAction", "answerCallbackQuery", "editMessageText", "editMessageReplyMarkup"} {
		if calls[m] != 1 {
			t.Errorf("the bot's %s reached Telegram %d times; want once (calls: %v)", m, calls[m], calls)
		}
	}
	var repeats []telegramtest.TextCount
	sb.control(t, "GET", "repeats", nil, &repeats)
	if len(repeats) != 0 {
		b, _ := json.Marshal(repeats)
		t.Errorf("the same text reached a chat twice: %s", b)
	}
}
