package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/telegramtest"
)

// DefaultSandboxAddr is where `tgrelay sandbox` listens by default.
const DefaultSandboxAddr = "127.0.0.1:8081"

const sandboxHelp = `
Usage: tgrelay sandbox [-addr 127.0.0.1:8081] [-tls [-cert file]] [-token T] [-no-limits]
                       [-webhook-timeout 60s] [-webhook-backoff 1s] [-webhook-attempts 10]
                       [-strict-webhook [-webhook-ca-file F] [-webhook-connect host:port=addr]]
                       [-callback-deadline 15s] [-inline-deadline 10s] [-precheckout-deadline 10s]

Sandbox runs a fake Telegram Bot API server (package telegramtest) until
SIGINT or SIGTERM, so that a bot written in any language can run its
integration tests against it. It prints the Bot API URL and the token:
point the bot at URL/bot<token>/<method> instead of https://api.telegram.org.

The fake speaks what real bots call: getMe, getUpdates, the webhook methods,
sendMessage, sendPhoto, sendDocument, sendVideo, sendAudio, sendSticker,
sendMediaGroup, sendLocation, sendDice, sendPoll, copyMessage, forwardMessage,
editMessageText, editMessageCaption, editMessageReplyMarkup, deleteMessage(s),
answerCallbackQuery, answerInlineQuery, sendInvoice, answerPreCheckoutQuery,
sendChatAction, setMessageReaction,
(un)pinChatMessage, getChat, getChatMember, getChatMemberCount,
getChatAdministrators, getFile (and /file/bot<token>/<path>), set/get/
deleteMyCommands, setChatMenuButton, getMyName and more, with Telegram's rate
limits (per chat: bursts of 5, one per second on average), refusals and
error wording. Formatted text (HTML, MarkdownV2, Markdown) comes back as
plain text with entities; malformed markup is refused as Telegram refuses it.
A method it does not implement answers 404 with a description saying so.

Queries keep Telegram's deadlines, counted from the user's action: a callback
query must be answered within 15 s, an inline query and a pre-checkout query
within 10 s (see the -*-deadline flags). A late answer, and a second answer
to a query, is refused with 400 "Bad Request: query is too old and response
timeout expired or query ID is invalid". A payment (POST /_sandbox/pay on an
invoice the bot sent) succeeds only when the bot answers its
pre_checkout_query ok:true in time; the bot then receives a message with
successful_payment. Declined or unanswered in time, the payment fails.

A JSON control API under /_sandbox/ drives it:

  GET    /_sandbox/                      url, token and bot
  POST   /_sandbox/users                 {"first_name"} -> user
  POST   /_sandbox/users/block           {"user_id", "blocked": true|false}
  POST   /_sandbox/users/deactivate      {"user_id"}
  GET    /_sandbox/chats                 -> [chat]
  POST   /_sandbox/chats                 {"type": "private", "user_id"} or
                                         {"type": "group"|"supergroup", "title", "member_ids"} or
                                         {"type": "channel", "title"} -> chat
  POST   /_sandbox/chats/upgrade         {"chat_id"} -> the new supergroup
  POST   /_sandbox/chats/kick            {"chat_id"}
  POST   /_sandbox/send                  {"chat_id", "user_id", "text", "reply_to",
                                          "photo"|"document": {"name", "data" (base64)},
                                          "location": {"latitude", "longitude"}} -> update
  POST   /_sandbox/edit                  {"chat_id", "user_id", "message_id", "text"} -> update
  POST   /_sandbox/command               {"chat_id", "user_id", "command", "args"} -> update
  POST   /_sandbox/press                 {"chat_id", "user_id", "message_id", "data"} -> update
  POST   /_sandbox/inline                {"user_id", "query"} -> update
  POST   /_sandbox/pay                   {"chat_id", "user_id", "message_id"} (an invoice) -> update
  GET    /_sandbox/queries               every query: answered, waiting or expired; late
                                         and repeated answers refused
  GET    /_sandbox/payments              every payment: pending, succeeded or failed (declined,
                                         timeout), with its charge ids
  GET    /_sandbox/messages[?chat_id=N]  messages the bot sent, with entities and reply markup
  GET    /_sandbox/callback-answers      answerCallbackQuery calls accepted
  GET    /_sandbox/inline-answers        answerInlineQuery calls accepted
  POST   /_sandbox/wait/messages         {"chat_id", "count", "timeout_ms"} -> messages, or 408
  POST   /_sandbox/wait/settled          {"timeout_ms"}: nothing pending, in flight or
                                         awaiting a 429's retry_after; or 408
  GET    /_sandbox/deliveries            every offer of an update to the bot
  GET    /_sandbox/repeats               chats that got the same text twice
  GET    /_sandbox/duplicate-deliveries  updates the bot may have seen twice
  GET    /_sandbox/calls                 Bot API calls per method
  POST   /_sandbox/faults                {"method", "kind", "nth", "times", "delay_ms", "jitter_ms",
                                          "status", "retry_after", "stall_ms", "size",
                                          "duration_ms"}
  DELETE /_sandbox/faults                disarm all faults
  POST   /_sandbox/limits                {"disabled", "bot"|"chat"|"group": {"count", "per_ms"}}
  POST   /_sandbox/reset                 forget everything but the token

Fault kinds: refuse_connection, reset, close, hang, drop_before_effect,
drop_after_effect, server_error, proxy_error, too_many_requests, slow_body,
huge_body, unreachable (the port closes for duration_ms and idle connections
drop: a request provably never arrives); an empty kind only adds delay_ms. Details:
go doc github.com/tgrelay/tgrelay/telegramtest

Webhooks are delivered to any http or https address, trusting any
certificate, unless -strict-webhook asks for Telegram's own rules: setWebhook
refuses an address that is not https or not on port 443, 80, 88 or 8443, and
each delivery verifies the certificate chain and the host name or IP address
against the certificate uploaded with setWebhook (its certificate field), or
else against -webhook-ca-file (default the system's roots). Failures show in
getWebhookInfo's last_error_message as Telegram words them ("SSL error
{error:0A000086:SSL routines::certificate verify failed}", "Connection
refused", "Wrong response from the webhook: 503 Service Unavailable").
-webhook-connect bot.example.com:443=127.0.0.1:8443 (repeatable) sends the
deliveries for a Telegram-valid address to a local listener instead.
`

func runSandbox(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	addr := fs.String("addr", DefaultSandboxAddr, "`address` to listen on (port 0 picks a free one)")
	useTLS := fs.Bool("tls", false, "serve HTTPS with a self-signed certificate")
	certOut := fs.String("cert", "", "with -tls, write the certificate (PEM) to `file` for clients to trust")
	token := fs.String("token", "", "bot `token` to accept, shaped <bot id>:<secret> as BotFather gives it (default random)")
	noLimits := fs.Bool("no-limits", false, "turn Telegram's rate limits off")
	hookTimeout := fs.Duration("webhook-timeout", telegramtest.DefaultWebhookTimeout, "how long a webhook delivery waits for the bot's answer")
	hookBackoff := fs.Duration("webhook-backoff", telegramtest.DefaultWebhookBackoff, "wait before re-delivering a failed update; doubles per attempt")
	hookAttempts := fs.Int("webhook-attempts", telegramtest.DefaultWebhookMaxAttempts, "deliveries of one update before it is given up")
	strict := fs.Bool("strict-webhook", false, "deliver webhooks as Telegram does: https only, to ports 443, 80, 88 and 8443, certificate verified")
	hookCA := fs.String("webhook-ca-file", "", "with -strict-webhook, PEM `file` of the roots a webhook's certificate may chain to (default the system's)")
	var connect connectMap
	fs.Var(&connect, "webhook-connect", "with -strict-webhook, deliver to `host:port=addr`: the webhook address host:port is reached at addr (repeatable)")
	cbDeadline := fs.Duration("callback-deadline", telegramtest.DefaultCallbackDeadline, "how long a callback query waits for answerCallbackQuery (0: forever)")
	inlineDeadline := fs.Duration("inline-deadline", telegramtest.DefaultInlineDeadline, "how long an inline query waits for answerInlineQuery (0: forever)")
	pcDeadline := fs.Duration("precheckout-deadline", telegramtest.DefaultPreCheckoutDeadline, "how long a pre-checkout query waits for answerPreCheckoutQuery (0: forever)")
	fs.Usage = commandUsage(fs, sandboxHelp)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	hint := "Run 'tgrelay help sandbox' for usage."
	if *certOut != "" && !*useTLS {
		return &usageError{msg: "-cert needs -tls", hint: hint}
	}
	if *hookTimeout <= 0 || *hookBackoff <= 0 || *hookAttempts <= 0 {
		return &usageError{msg: "-webhook-timeout, -webhook-backoff and -webhook-attempts must be positive", hint: hint}
	}
	if !*strict && (*hookCA != "" || len(connect) > 0) {
		return &usageError{msg: "-webhook-ca-file and -webhook-connect need -strict-webhook", hint: hint}
	}
	if *cbDeadline < 0 || *inlineDeadline < 0 || *pcDeadline < 0 {
		return &usageError{msg: "-callback-deadline, -inline-deadline and -precheckout-deadline must not be negative", hint: hint}
	}
	// A zero flag means no deadline, which telegramtest spells negative.
	forever := func(d time.Duration) time.Duration {
		if d == 0 {
			return -1
		}
		return d
	}
	var logMu sync.Mutex
	cfg := telegramtest.Config{
		Token:      *token,
		ControlAPI: true,
		Limits:     telegramtest.Limits{Disabled: *noLimits},
		Deadlines: telegramtest.Deadlines{CallbackQuery: forever(*cbDeadline), InlineQuery: forever(*inlineDeadline),
			PreCheckoutQuery: forever(*pcDeadline)},
		Webhook: telegramtest.WebhookConfig{
			Timeout:     *hookTimeout,
			Backoff:     *hookBackoff,
			MaxBackoff:  max(*hookBackoff, telegramtest.DefaultWebhookMaxBackoff),
			MaxAttempts: *hookAttempts,
			Strict:      *strict,
		},
		Logf: func(format string, args ...any) {
			logMu.Lock()
			defer logMu.Unlock()
			fmt.Fprintf(stderr, format+"\n", args...)
		},
	}
	if *hookCA != "" {
		b, err := readBounded(*hookCA, maxCAFileBytes)
		if err != nil {
			return fmt.Errorf("-webhook-ca-file: %w", err)
		}
		cfg.Webhook.RootCAs = x509.NewCertPool()
		if !cfg.Webhook.RootCAs.AppendCertsFromPEM(b) {
			return &usageError{msg: "-webhook-ca-file holds no PEM certificate", hint: hint}
		}
	}
	if len(connect) > 0 {
		cfg.Webhook.DialContextFunc = connect.dial
	}
	if err := cfg.Validate(); err != nil {
		// The one setting of the flags the sandbox's Config checks itself
		// is the token: name the flag, not the Config field.
		if (telegramtest.Config{Token: *token}).Validate() != nil {
			return &usageError{msg: "-token does not look like a bot token: want <bot id>:<secret> as BotFather gives it", hint: hint}
		}
		return &usageError{msg: err.Error(), hint: hint}
	}
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		// A busy or malformed address is the command line's to fix, as
		// serve's --listen is: a usage error naming the flag.
		return &usageError{msg: fmt.Sprintf("-addr %s is not available: %v", *addr, err),
			hint: "Pass a free address to -addr (port 0 picks one)."}
	}
	srv := telegramtest.NewUnstartedServerOn(cfg, l)
	if *useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	defer srv.Close()
	if *certOut != "" {
		b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		if err := os.WriteFile(*certOut, b, 0o644); err != nil {
			return fmt.Errorf("write certificate: %w", err)
		}
	}
	fmt.Fprintf(stdout, "Bot API:     %s\n", srv.URL)
	fmt.Fprintf(stdout, "Token:       %s\n", srv.Token)
	fmt.Fprintf(stdout, "Control API: %s%s\n", srv.URL, telegramtest.ControlPrefix)
	fmt.Fprintf(stdout, "Try:         curl %s/bot%s/getMe\n", srv.URL, srv.Token)
	<-ctx.Done()
	srv.Close()
	fmt.Fprintln(stdout, "sandbox stopped")
	return nil
}

// connectMap is the repeatable -webhook-connect flag: webhook addresses
// (host:port) mapped to the addresses they are reached at.
type connectMap map[string]string

func (m *connectMap) String() string { return fmt.Sprint(len(*m), " mapping(s)") }

func (m *connectMap) Set(v string) error {
	from, to, ok := strings.Cut(v, "=")
	if _, _, err := net.SplitHostPort(from); !ok || err != nil {
		return errors.New("want host:port=address:port")
	}
	if _, _, err := net.SplitHostPort(to); err != nil {
		return errors.New("want host:port=address:port")
	}
	if *m == nil {
		*m = connectMap{}
	}
	(*m)[from] = to
	return nil
}

// dial connects to the address addr is mapped to, or to addr itself.
func (m connectMap) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if to, ok := m[addr]; ok {
		addr = to
	}
	return (&net.Dialer{}).DialContext(ctx, network, addr)
}
