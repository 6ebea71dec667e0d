package telegramtest

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
)

// Defaults and bounds of [Config]. Every queue, body, wait and retry of the
// server has one of these finite limits.
const (
	// DefaultMaxRequestBytes bounds a request body (50 MiB, Telegram's upload
	// limit). A larger body is answered 413.
	DefaultMaxRequestBytes = 50 << 20
	// DefaultMaxPendingUpdates bounds the updates waiting for the bot. A user
	// action beyond it fails with [ErrQueueFull].
	DefaultMaxPendingUpdates = 10000
	// DefaultMaxMessages bounds the ledger of accepted messages. A send beyond
	// it is answered 500, so a test can never lose a record silently.
	DefaultMaxMessages = 1 << 20
	// DefaultMaxDeliveries bounds the ledger of delivery attempts; older
	// attempts are dropped first and counted by [Server.DroppedDeliveries].
	DefaultMaxDeliveries = 1 << 16
	// DefaultMaxPollTimeout caps getUpdates' timeout parameter, as Telegram
	// caps it at 50 seconds.
	DefaultMaxPollTimeout = 50 * time.Second
	// DefaultWebhookTimeout is how long a webhook delivery waits for the
	// bot's answer (Telegram waits about 60 s).
	DefaultWebhookTimeout = 60 * time.Second
	// DefaultWebhookMaxAttempts is how many times an update is offered to the
	// webhook before it is given up.
	DefaultWebhookMaxAttempts = 10
	// DefaultWebhookBackoff is the wait before the second attempt; it doubles
	// per attempt up to DefaultWebhookMaxBackoff.
	DefaultWebhookBackoff = time.Second
	// DefaultWebhookMaxBackoff caps the wait between attempts.
	DefaultWebhookMaxBackoff = time.Minute
	// DefaultMaxConnections is setWebhook's max_connections when not given.
	DefaultMaxConnections = 40
	// MaxWebhookResponseBytes bounds how much of a webhook answer is read.
	MaxWebhookResponseBytes = 64 << 10
	// MaxTextLength is Telegram's limit for a message text, in UTF-16 units.
	MaxTextLength = 4096
	// MaxCaptionLength is Telegram's limit for a caption, in UTF-16 units.
	MaxCaptionLength = 1024
	// MaxCallbackAnswerLength is the limit of answerCallbackQuery's text.
	MaxCallbackAnswerLength = 200
	// DefaultMaxControlObjects bounds the users plus chats the control API
	// creates.
	DefaultMaxControlObjects = 100000
	// DefaultMaxFileBytes bounds the content of files (uploads by the bot,
	// files sent by simulated users) kept for getFile's download path.
	// Files past it are known by id but their download answers 404.
	DefaultMaxFileBytes = 64 << 20
	// MaxFaults bounds how many faults may be armed at once.
	MaxFaults = 1000
)

// Default rate limits, as Telegram's Bot FAQ describes them.
const (
	// DefaultBotLimitCount sends per DefaultBotLimitPer across all chats.
	DefaultBotLimitCount = 30
	// DefaultBotLimitPer is the window of the bot-wide limit.
	DefaultBotLimitPer = time.Second
	// DefaultChatLimitCount sends per DefaultChatLimitPer in one chat: one
	// per second on average, with the short bursts Telegram allows (a bot
	// answering with a few messages at once is not refused). Package
	// throttle keeps the same rule by default, so a bot paced by tgrelay's
	// limiter is never refused here.
	DefaultChatLimitCount = 5
	// DefaultChatLimitPer is the window of the per-chat limit.
	DefaultChatLimitPer = 5 * time.Second
	// DefaultGroupLimitCount sends per DefaultGroupLimitPer in one group,
	// supergroup or channel.
	DefaultGroupLimitCount = 20
	// DefaultGroupLimitPer is the window of the per-group limit.
	DefaultGroupLimitPer = time.Minute
)

// Config configures a [Server]. The zero value is a server with Telegram's
// limits and a random token. [NewUnstartedServer] copies it into
// [Server.Config], which may be changed until [Server.Start].
type Config struct {
	// Token is the bot token the server accepts. Zero means a random,
	// realistic-looking token ("<bot id>:<35 characters>"). When set it must
	// have a bot token's shape ([botapi.ValidToken]).
	Token string
	// BotUsername is getMe's username. Defaults to "telegramtest_bot".
	BotUsername string
	// BotName is getMe's first_name. Defaults to "Test Bot".
	BotName string

	// ControlAPI, when true, also serves the JSON control API under
	// [ControlPrefix] (see the package doc). `tgrelay sandbox` sets it.
	ControlAPI bool

	// Limits are the send rate limits. The zero value means Telegram's.
	Limits Limits

	// Webhook configures webhook delivery. The zero value means Telegram's
	// behaviour; tests usually set a short Timeout and Backoff.
	Webhook WebhookConfig

	// Deadlines are how long queries wait for their answers (callback,
	// inline and pre-checkout queries). The zero value means Telegram's.
	Deadlines Deadlines

	// MaxPollTimeout caps getUpdates' timeout. Defaults to
	// DefaultMaxPollTimeout.
	MaxPollTimeout time.Duration
	// MaxPendingUpdates bounds updates waiting for the bot. Defaults to
	// DefaultMaxPendingUpdates.
	MaxPendingUpdates int
	// MaxMessages bounds the ledger of accepted messages. Defaults to
	// DefaultMaxMessages.
	MaxMessages int
	// MaxDeliveries bounds the ledger of delivery attempts. Defaults to
	// DefaultMaxDeliveries.
	MaxDeliveries int
	// MaxControlObjects bounds the users plus chats that may exist when the
	// control API creates one (the Go API is not bounded: the test owns
	// it). Defaults to DefaultMaxControlObjects.
	MaxControlObjects int
	// MaxRequestBytes bounds a request body. Defaults to
	// DefaultMaxRequestBytes.
	MaxRequestBytes int64

	// MaxFileBytes bounds the file content kept for downloads. Defaults to
	// DefaultMaxFileBytes.
	MaxFileBytes int64

	// Faults are armed when the server starts, as if passed to [Server.Arm].
	Faults []Fault

	// NowFunc is the clock of message dates, rate limits,
	// last_error_date and the Deadlines of queries. Nil means time.Now. Waits (long polls, latency,
	// webhook timeouts and backoff) always use real time.
	NowFunc func() time.Time
	// Logf receives the server's rare log lines (a Close that waits long).
	// Nil means log.Printf. Lines never contain the token.
	Logf func(format string, args ...any)
	// Seed seeds the random token and latency jitter, for repeatable runs
	// (the same Seed gives the same Token). Zero means a
	// random seed.
	Seed uint64
}

// Limit allows Count sends in any window of length Per. A negative Count
// disables the limit; the zero value means the default.
type Limit struct {
	Count int           `json:"count"`
	Per   time.Duration `json:"per"`
}

// Limits are the send rate limits the server enforces with 429 "Too Many
// Requests: retry after N". Every method that sends a new message
// (sendMessage, sendPhoto, sendDocument, sendLocation, sendPoll, copyMessage,
// forwardMessage, …) counts once against all that apply; a media group
// counts once for all its items. Edits, chat actions, reactions, pins and
// callback or inline answers do not count.
type Limits struct {
	// Disabled turns every limit off.
	Disabled bool `json:"disabled"`
	// Bot limits sends across all chats. Zero means 30 per second.
	Bot Limit `json:"bot"`
	// Chat limits sends to one chat. Zero means 5 per 5 seconds: bursts of
	// up to 5, one per second on average.
	Chat Limit `json:"chat"`
	// Group limits sends to one group, supergroup or channel, in addition
	// to Chat. Zero means 20 per minute.
	Group Limit `json:"group"`
}

// WebhookConfig configures how updates are posted to a webhook.
type WebhookConfig struct {
	// Timeout is how long one attempt waits for the bot's answer; then the
	// attempt counts as failed ("Read timeout expired"). Defaults to
	// DefaultWebhookTimeout.
	Timeout time.Duration
	// MaxAttempts is how many attempts an update gets before it is given
	// up. Defaults to DefaultWebhookMaxAttempts.
	MaxAttempts int
	// Backoff is the wait before the second attempt; it doubles each time.
	// Defaults to DefaultWebhookBackoff.
	Backoff time.Duration
	// MaxBackoff caps the wait. Defaults to DefaultWebhookMaxBackoff.
	MaxBackoff time.Duration
	// Client posts the updates. Nil means a client of the server's own that
	// trusts any certificate (webhook targets in tests are self-signed).
	// Not used with Strict.
	Client *http.Client

	// Strict delivers webhooks the way Telegram does. setWebhook then
	// refuses an address that is not https ([ErrMsgNotHTTPS]) or not on
	// port 443, 80, 88 or 8443 ([ErrMsgPort]), and each delivery verifies
	// the webhook's certificate chain and its host name or IP address
	// against the certificate uploaded with setWebhook, when one was, or
	// else against RootCAs. A failure is reported in getWebhookInfo's
	// last_error_message in Telegram's words ([ErrMsgCertVerify],
	// [ErrMsgWrongVersion], [ErrMsgConnectionRefused], "Wrong response
	// from the webhook: 503 Service Unavailable", ...). Defaults to false:
	// any http or https address on any port, any certificate.
	Strict bool
	// RootCAs are the roots a strict delivery trusts when no certificate
	// was uploaded. Nil means the system's roots. Strict only.
	RootCAs *x509.CertPool
	// DialContextFunc, when set, opens every strict delivery's connection
	// instead of a net.Dialer, with the address of the webhook URL (such as
	// "bot.example.com:443"): a test maps that Telegram-valid address to
	// its loopback listener, so the URL the bot sets stays one Telegram
	// accepts. Strict only.
	DialContextFunc func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Validate reports the first invalid field of c, naming it, or nil.
func (c Config) Validate() error {
	if c.Token != "" && !botapi.ValidToken(c.Token) {
		return fmt.Errorf("telegramtest: Config.Token does not look like a bot token (want <bot id>:<secret of A-Za-z0-9_->, see botapi.ValidToken)")
	}
	checks := []struct {
		name string
		bad  bool
		want string
	}{
		{"MaxPollTimeout", c.MaxPollTimeout < 0, ">= 0"},
		{"MaxPendingUpdates", c.MaxPendingUpdates < 0, ">= 0"},
		{"MaxMessages", c.MaxMessages < 0, ">= 0"},
		{"MaxDeliveries", c.MaxDeliveries < 0, ">= 0"},
		{"MaxRequestBytes", c.MaxRequestBytes < 0, ">= 0"},
		{"MaxFileBytes", c.MaxFileBytes < 0, ">= 0"},
		{"MaxControlObjects", c.MaxControlObjects < 0, ">= 0"},
		{"Webhook.Timeout", c.Webhook.Timeout < 0, ">= 0"},
		{"Webhook.MaxAttempts", c.Webhook.MaxAttempts < 0, ">= 0"},
		{"Webhook.Backoff", c.Webhook.Backoff < 0, ">= 0"},
		{"Webhook.MaxBackoff", c.Webhook.MaxBackoff < 0, ">= 0"},
		{"Faults", len(c.Faults) > MaxFaults, fmt.Sprintf("at most %d", MaxFaults)},
	}
	for _, ch := range checks {
		if ch.bad {
			return fmt.Errorf("telegramtest: Config.%s must be %s", ch.name, ch.want)
		}
	}
	if c.Webhook.Strict && c.Webhook.Client != nil {
		return errors.New("telegramtest: Config.Webhook.Client cannot be set with Webhook.Strict (strict deliveries use their own client)")
	}
	if !c.Webhook.Strict && (c.Webhook.RootCAs != nil || c.Webhook.DialContextFunc != nil) {
		return errors.New("telegramtest: Config.Webhook.RootCAs and DialContextFunc apply only with Webhook.Strict")
	}
	if err := c.Limits.validate(); err != nil {
		return err
	}
	for i, f := range c.Faults {
		if err := f.validate(); err != nil {
			return fmt.Errorf("telegramtest: Config.Faults[%d]: %w", i, err)
		}
	}
	return nil
}

func (l Limits) validate() error {
	for _, x := range []struct {
		name string
		l    Limit
	}{{"Bot", l.Bot}, {"Chat", l.Chat}, {"Group", l.Group}} {
		if x.l.Count > 0 && x.l.Per <= 0 {
			return fmt.Errorf("telegramtest: Limits.%s.Per must be > 0 when Count > 0", x.name)
		}
		if x.l.Count == 0 && x.l.Per != 0 {
			return fmt.Errorf("telegramtest: Limits.%s.Count must be set when Per is", x.name)
		}
		if x.l.Per < 0 {
			return fmt.Errorf("telegramtest: Limits.%s.Per must be >= 0", x.name)
		}
	}
	return nil
}

func (l Limits) withDefaults() Limits {
	if l.Bot == (Limit{}) {
		l.Bot = Limit{DefaultBotLimitCount, DefaultBotLimitPer}
	}
	if l.Chat == (Limit{}) {
		l.Chat = Limit{DefaultChatLimitCount, DefaultChatLimitPer}
	}
	if l.Group == (Limit{}) {
		l.Group = Limit{DefaultGroupLimitCount, DefaultGroupLimitPer}
	}
	return l
}

func (c Config) withDefaults() Config {
	if c.BotUsername == "" {
		c.BotUsername = "telegramtest_bot"
	}
	if c.BotName == "" {
		c.BotName = "Test Bot"
	}
	if c.MaxPollTimeout == 0 {
		c.MaxPollTimeout = DefaultMaxPollTimeout
	}
	if c.MaxPendingUpdates == 0 {
		c.MaxPendingUpdates = DefaultMaxPendingUpdates
	}
	if c.MaxMessages == 0 {
		c.MaxMessages = DefaultMaxMessages
	}
	if c.MaxDeliveries == 0 {
		c.MaxDeliveries = DefaultMaxDeliveries
	}
	if c.MaxControlObjects == 0 {
		c.MaxControlObjects = DefaultMaxControlObjects
	}
	if c.MaxFileBytes == 0 {
		c.MaxFileBytes = DefaultMaxFileBytes
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if c.Webhook.Timeout == 0 {
		c.Webhook.Timeout = DefaultWebhookTimeout
	}
	if c.Webhook.MaxAttempts == 0 {
		c.Webhook.MaxAttempts = DefaultWebhookMaxAttempts
	}
	if c.Webhook.Backoff == 0 {
		c.Webhook.Backoff = DefaultWebhookBackoff
	}
	if c.Webhook.MaxBackoff == 0 {
		c.Webhook.MaxBackoff = DefaultWebhookMaxBackoff
	}
	c.Limits = c.Limits.withDefaults()
	c.Deadlines = c.Deadlines.withDefaults()
	c.Faults = append([]Fault(nil), c.Faults...)
	return c
}
