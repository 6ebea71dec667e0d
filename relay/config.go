package relay

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/backoff"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/poll"
	"github.com/tgrelay/tgrelay/transport"
)

// Defaults and bounds of [Config].
const (
	// DefaultListen is the webhook's listen address when Config.Listen is
	// empty.
	DefaultListen = "127.0.0.1:8080"
	// DefaultPath is the webhook's path when Config.Path is empty.
	DefaultPath = "/telegram"
	// DefaultBackoffBase is the delay before the first retry when
	// Config.BackoffBase is zero.
	DefaultBackoffBase = 5 * time.Second
	// MaxBackoffBase bounds Config.BackoffBase.
	MaxBackoffBase = time.Hour
	// MaxRetryBackoff caps the delay before a retry, whatever BackoffBase.
	MaxRetryBackoff = 15 * time.Minute
	// DefaultDrainTimeout is how long running forwards may finish on stop
	// when Config.DrainTimeout is zero.
	DefaultDrainTimeout = 30 * time.Second
	// MaxDrainTimeout bounds Config.DrainTimeout.
	MaxDrainTimeout = time.Hour
	// DefaultWebhookCheckInterval is the period of the webhook ownership
	// check when Config.WebhookCheckInterval is zero.
	DefaultWebhookCheckInterval = 5 * time.Minute
	// MinWebhookCheckInterval bounds Config.WebhookCheckInterval from
	// below, so the check cannot hammer the Bot API.
	MinWebhookCheckInterval = time.Second
	// BotAPIMaxResponseBytes bounds a Bot API answer read by the default
	// Bot API client; a full getUpdates batch fits.
	BotAPIMaxResponseBytes = 8 << 20
)

// Config configures a [Relay]. [New] copies and validates it; an invalid
// field is a *[ConfigError] naming it. Zero values take the documented
// defaults.
type Config struct {
	// Token is the bot token, "<bot id>:<secret>" as BotFather gives it.
	// Required. It never appears in a log line, an error or a metric.
	Token string
	// APIRoot is the Bot API root URL, for a local Bot API server: an
	// absolute http or https URL without a user, query or fragment. Empty
	// means https://api.telegram.org. Every Bot API call of the relay goes
	// there: webhook ownership (claim and check), getUpdates, and the
	// gateway's upstream.
	APIRoot string
	// BotTransport is how every Bot API call of the relay gets to APIRoot:
	// the proxy, the trusted CAs (TLSConfig.RootCAs, such as a private CA
	// or a corporate proxy's), the connect budget and the response timeout
	// apply alike to webhook ownership, getUpdates, and the gateway's
	// calls, webhook replies, streamed uploads and file downloads. The
	// zero value is transport's defaults (proxies from the environment,
	// the system's roots). MaxResponseBytes bounds the answers of the
	// gateway's calls (zero: transport's default); the relay's own calls
	// read up to the larger of it and [BotAPIMaxResponseBytes]. Streamed
	// calls go through the standard library's transport with its Proxy and
	// TLSConfig, and ResponseTimeout bounding the wait for the answer's
	// head (zero: gateway.DefaultStreamHeaderTimeout).
	BotTransport transport.Config

	// Store records the updates. Required. The relay never closes it:
	// close it after [Relay.Run] or [Relay.Close] returns, when nothing of
	// the relay uses it any more. Pass the store itself, not a wrapper:
	// New detects its optional capabilities once (see [intake.Store]).
	// The dashboard, [Relay.Stats] and the dating of queries need an
	// [intake.AdminStore]; readiness asks an [intake.HealthChecker], or
	// else the admin stats; the gateway replays calls with an
	// [intake.JournalStore]. sqlitestore, pgstore and memstore have them
	// all.
	Store intake.Store
	// StoreName names the store in logs and [Status] (such as "sqlite" or
	// "postgres"); never put a password in it. Empty means "store".
	StoreName string

	// Poll receives updates by long polling (getUpdates) instead of the
	// webhook.
	Poll bool
	// PollTimeout is the long-poll timeout, whole seconds from 1s to 50s.
	// Zero means 30s. Poll only.
	PollTimeout time.Duration
	// AllowedUpdates is the update types to receive, sent with getUpdates
	// or setWebhook. Nil means Telegram's default.
	AllowedUpdates []string

	// Listen is the webhook's listen address. Empty means [DefaultListen].
	// Webhook only.
	Listen string
	// Listener, when set, is used for the webhook instead of listening on
	// Listen; the relay closes it on stop.
	Listener net.Listener
	// TLSConfig, when set, makes the webhook listener serve HTTPS with it
	// (its certificate is the one Telegram verifies); nil serves plain
	// HTTP, for a TLS-terminating proxy in front. The relay does not
	// modify it.
	TLSConfig *tls.Config
	// Path is the webhook's path; it starts with "/". Empty means
	// [DefaultPath].
	Path string
	// Secret is the webhook secret Telegram sends with every update (1-256
	// of A-Z a-z 0-9 _ -). Required for the webhook. It also derives the
	// owner tag of the webhook registration.
	Secret string
	// PublicURL is the webhook address Telegram posts to, without a user
	// name or password (the webhook secret proves a delivery is
	// Telegram's). When set, the relay claims the webhook on start under
	// the ownership rules of package hookowner and checks it
	// periodically; empty leaves the registration alone.
	PublicURL string
	// TakeoverFrom names the host the webhook points to now ("none" for a
	// bot without one) to take it over from; empty never takes over.
	TakeoverFrom string
	// WebhookCertificateFunc, when set, returns the PEM certificate to
	// upload with setWebhook each time the webhook is claimed (on start and
	// by [Relay.ReclaimWebhook]): a self-signed certificate, which Telegram
	// then trusts for PublicURL. Nil uploads none.
	WebhookCertificateFunc func() []byte
	// MaxConnections is setWebhook's max_connections, 1 to 100; zero
	// means Telegram's default (40). The webhook serves at most four times
	// as many connections at once, and at least 256; a connection beyond
	// them waits in the listen backlog until one ends.
	MaxConnections int
	// WebhookCheckInterval is the period of the ownership check. Zero
	// means [DefaultWebhookCheckInterval]; at least
	// [MinWebhookCheckInterval].
	WebhookCheckInterval time.Duration
	// NoWebhookCheck turns the periodic ownership check off.
	NoWebhookCheck bool

	// Forward is where each update is POSTed (Forward.URL, required) and
	// each exhaustion (Forward.ExhaustionURL; empty keeps exhaustions in
	// the store for operator tooling). A zero Forward.Timeout means 30s or
	// half the lease, whichever is less; it must stay below the lease.
	// Forward.AppSecretToken, when set, is sent to the app in
	// X-Telegram-Bot-Api-Secret-Token; an app that answers 401 or 403
	// (its secret check disagrees) has its update held, never given up
	// (see [AppStatus]). Replies in the app's answers are performed
	// through the gateway; without one, each is logged as a warning and
	// reported as a [KindUnactedReply] event, besides
	// Forward.UnactedReplyFunc.
	Forward forward.Config

	// Intake configures the runner that claims, retries and gives up each
	// update (see [IntakeConfig]); zero fields take the intake's defaults,
	// and the bounds are the intake's, reported as "Intake.<field>".
	Intake IntakeConfig
	// BackoffBase is the delay before the first retry of a failed forward;
	// each next retry waits four times longer, capped at
	// [MaxRetryBackoff]. Zero means [DefaultBackoffBase]; 1ms to
	// [MaxBackoffBase].
	BackoffBase time.Duration
	// Deadlines are the deadlines of callback, inline, pre-checkout and
	// shipping queries, and what the relay does to meet them: a lane of
	// their own, retries only within the deadline, "expired" instead of an
	// exhaustion, and a safe decline of what the app did not answer in
	// time (see [DeadlineConfig] and [Decliner]). The zero value is
	// Telegram's deadlines.
	Deadlines DeadlineConfig
	// DrainTimeout bounds, on stop, how long running forwards may finish
	// before they are cancelled (and retried later). Zero means
	// [DefaultDrainTimeout]; up to [MaxDrainTimeout].
	DrainTimeout time.Duration

	// AdminListen is the address of the admin listener (/healthz, /readyz
	// and whatever [Relay.HandleAdmin] mounts). Empty, without
	// AdminListener, means no admin listener.
	AdminListen string
	// AdminListener, when set, is used instead of listening on
	// AdminListen; the relay closes it on stop.
	AdminListener net.Listener

	// Dashboard mounts the web UI at "/" on the admin listener; see
	// [DashboardConfig]. The zero value mounts none.
	Dashboard DashboardConfig

	// Gateway serves the Bot API to the app (see [GatewayConfig]): its
	// calls keep Telegram's limits, are fenced by the attempt identity the
	// forward hands it and are journaled in the store, and the webhook
	// replies in its answers are performed. The zero value serves it on an
	// ephemeral loopback port ([DefaultGatewayListen]);
	// Gateway.Disable serves none and leaves webhook replies unacted.
	Gateway GatewayConfig

	// Decline answers, safely and through the gateway, the queries the app
	// did not answer shortly before Telegram's deadline: an empty callback
	// answer stops a button's spinner, a pre-checkout (or shipping) query
	// is declined ok:false (see [DeclineConfig]). The zero value declines
	// all three kinds with Telegram's deadlines; with the gateway
	// disabled, nothing is declined.
	Decline DeclineConfig

	// Observer receives the relay's events (see [Event]), for metrics and
	// dashboards. The zero value observes nothing. Use [Observers] for
	// several.
	Observer Observer
	// Logger receives what happened, never a secret or an update body.
	// Nil logs nothing.
	Logger *slog.Logger
	// TracerProvider, when set, traces each update as one OpenTelemetry
	// trace: its receive and store, each attempt's forward (which carries
	// W3C traceparent, so the app's spans join), the app's gateway calls
	// and Telegram's answers (see [TraceIDGenerator] to make the receive
	// the trace's root). Spans name methods and ids, never a URL, a body
	// or a secret. The relay uses the OpenTelemetry API only; the SDK and
	// its exporter are the caller's. Nil traces nothing.
	TracerProvider trace.TracerProvider
	// SettingNameFunc, when set, names a Config field path (such as
	// "Forward.AppSecretToken") as the user sets it (a command line's
	// flag), for the hints of the relay's log lines. Nil, or an empty
	// answer, names the field path.
	SettingNameFunc func(field string) string
}

// IntakeConfig is the part of the intake runner's [intake.Config] that
// [Config] passes through: each field is the intake's field of that name,
// with its default and bounds, and an invalid one is reported by the intake
// and named "Intake.<field>" (the relay checks none of them itself). The
// zero value is the intake's defaults.
type IntakeConfig struct {
	// MaxAttempts is the attempt ceiling of one update (see
	// [intake.Config.MaxAttempts]).
	MaxAttempts int
	// LeaseDuration is the lease of one attempt, renewed every quarter of
	// it; Forward.Timeout stays below it.
	LeaseDuration time.Duration
	// MaxConcurrent bounds the forwards running at once.
	MaxConcurrent int
	// SweepInterval is the period of the sweep that finds due updates.
	SweepInterval time.Duration
	// PendingGrace is how long a recorded update is left to the process
	// that recorded it before a sweep of another takes it.
	PendingGrace time.Duration
	// Retention is how long settled updates are kept, so that Telegram's
	// re-deliveries are refused as duplicates.
	Retention time.Duration
	// AcceptTimeout bounds how long the webhook waits for the store to
	// record an update before answering 503, so that a database that stops
	// answering without closing its connections cannot hold Telegram's
	// requests (Telegram delivers the update again; see
	// [intake.Config.AcceptTimeout]).
	AcceptTimeout time.Duration
	// HeartbeatTimeout, HeartbeatInterval, NoHeartbeat and MaxCrashes
	// configure the heartbeat of this process in a store that keeps them
	// (both SQL stores do): an update whose process died is forwarded
	// again by another process (or the restarted one) a HeartbeatTimeout
	// after the death rather than a lease, and crashed attempts count
	// against MaxCrashes instead of MaxAttempts (-1 counts crashes as
	// attempts).
	HeartbeatTimeout  time.Duration
	HeartbeatInterval time.Duration
	NoHeartbeat       bool
	MaxCrashes        int
	// ChatOrder is the intake's [intake.Config.ChatOrder]: the zero value
	// and [intake.ChatOrderProcess] keep each chat in order within this
	// process; [intake.ChatOrderStrict] keeps it across every relay sharing
	// the store (which must be an [intake.ChatOrderStore]), at the cost of
	// handling a chat's updates one at a time across all of them.
	ChatOrder intake.ChatOrder
	// RetryOutOfOrder lets a chat's later updates be forwarded while a
	// failed update of the chat waits for its retry: the retry goes out of
	// the chat's line and runs at its due time, after them (see
	// [intake.Config.RetryOutOfOrder]). By default (false) a failed update
	// keeps its place and holds the chat's later updates until it
	// succeeds or is given up, so the app never sees a chat's "two" before
	// its "one". It contradicts ChatOrder [intake.ChatOrderStrict], where a
	// failed update holds its chat in the store. An update held because
	// the app refuses it with 401 or 403 (see [AppStatus]) holds its chat
	// either way.
	RetryOutOfOrder bool
}

// ConfigError is an invalid [Config] field. Field is its path in Config
// (such as "Forward.URL", or "Intake.LeaseDuration" for a bound the
// intake reports), so that a command line can name its own flag instead;
// Err says what is wrong, phrased to follow the field's name, and never
// quotes a secret or a URL. It is the one config error type of every
// tgrelay package: intake.ConfigError, gateway.ConfigError and the others
// are the same type, and the relay prefixes their paths.
type ConfigError = configerr.Error

func badField(field, format string, args ...any) error {
	return configerr.New("relay", field, format, args...)
}

// nested reports err, from the config of a nested package held in field
// prefix, with the relay's path ("Gateway.Limits" + "MaxWait"); rename maps
// a nested field to a relay field of another name (poll's "Timeout" is
// "PollTimeout").
func nested(prefix string, err error, rename map[string]string) error {
	if ce, ok := errors.AsType[*ConfigError](err); ok {
		if to, ok := rename[ce.Field]; ok {
			return &ConfigError{Pkg: "relay", Field: to, Err: ce.Err, Kind: ce.Kind}
		}
	}
	return configerr.Nest("relay", prefix, err)
}

// checkBaseURL refuses raw unless it is a base URL ([configerr.BaseURL]),
// in an error for field. It never quotes the URL, which may carry a
// credential.
func checkBaseURL(field, raw string) error {
	// A base URL that paths are appended to, and that the app is told.
	if _, err := configerr.BaseURL(raw); err != nil {
		return badField(field, "%w", err)
	}
	return nil
}

// secrets returns every secret the configuration holds: the bot token,
// the webhook secret, the app's secret token and the dashboard's admin
// token. The relay masks them in every log line, stored error and page.
func (c Config) secrets() []string {
	return []string{c.Token, c.Secret, c.Forward.AppSecretToken, c.Dashboard.AdminToken}
}

// Validate reports the first invalid field of c as a *[ConfigError], as
// [New] would, without building anything: it does no I/O. Each bound is
// checked once, by the package that owns it (the intake's by intake, the
// gateway's by gateway), and reported with its path in Config. Every other
// field is checked before Store is required, so a caller that has not
// opened its store yet (a command line checking its flags) learns of them
// first: Validate of a Config without a Store fails naming "Store" only
// when all else is valid.
func (c Config) Validate() error {
	_, err := c.fill()
	return err
}

// fill returns a copy of c with defaults filled in, or a *ConfigError
// naming the first invalid field. It does no I/O.
func (c Config) fill() (Config, error) {
	if c.Token == "" {
		return c, badField("Token", "is required")
	}
	if _, err := botapi.New(c.Token, botapi.Config{}); err != nil {
		return c, badField("Token", "is not a bot token: want <bot id>:<secret> as BotFather gives it")
	}
	if c.APIRoot != "" {
		// What botapi and the gateway accept as a root.
		if err := checkBaseURL("APIRoot", c.APIRoot); err != nil {
			return c, err
		}
	}
	if c.StoreName == "" {
		c.StoreName = "store"
	}
	if err := nested("BotTransport", c.BotTransport.Validate(), nil); err != nil {
		return c, err
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.DrainTimeout == 0 {
		c.DrainTimeout = DefaultDrainTimeout
	}
	if c.BackoffBase < time.Millisecond || c.BackoffBase > MaxBackoffBase {
		return c, badField("BackoffBase", "is %v: want 1ms to %v", c.BackoffBase, MaxBackoffBase)
	}
	if c.DrainTimeout < 0 || c.DrainTimeout > MaxDrainTimeout {
		return c, badField("DrainTimeout", "is %v: want up to %v", c.DrainTimeout, MaxDrainTimeout)
	}
	if err := c.fillForward(); err != nil {
		return c, err
	}
	if err := c.fillDashboard(); err != nil {
		return c, err
	}
	if err := c.fillGateway(); err != nil {
		return c, err
	}
	// One source of deadlines: a decline policy takes its update type's
	// deadline (Deadlines; the kind's default when that is zero or off),
	// and the decline margin Deadlines' margin unless set, so --deadline-*
	// moves the decline with it.
	for _, k := range []struct {
		policy   *DeclinePolicy
		deadline time.Duration
	}{
		{&c.Decline.CallbackQuery, c.Deadlines.CallbackQuery},
		{&c.Decline.PreCheckoutQuery, c.Deadlines.PreCheckoutQuery},
		{&c.Decline.ShippingQuery, c.Deadlines.ShippingQuery},
	} {
		if k.deadline > 0 {
			k.policy.deadline = k.deadline
		}
	}
	if c.Decline.Margin == 0 && c.Deadlines.Margin > 0 {
		c.Decline.Margin = c.Deadlines.Margin
	}
	// The default margin shrinks to half the shortest deadline it would
	// not fit before (a deadline set below 2 s); a margin set explicitly is
	// checked as given.
	if c.Decline.Margin == 0 {
		for _, p := range []DeclinePolicy{c.Decline.CallbackQuery, c.Decline.PreCheckoutQuery, c.Decline.ShippingQuery} {
			if !p.Disable && p.deadline > 0 && p.deadline <= DefaultDeclineMargin {
				c.Decline.Margin = min(cmp.Or(c.Decline.Margin, p.deadline/2), p.deadline/2)
			}
		}
	}
	if err := c.fillDecline(); err != nil {
		return c, err
	}
	// Every setting is checked whatever the mode, so a value meant for the
	// other mode is refused as soon as it is invalid, not when the mode
	// changes.
	if err := c.fillPoll(); err != nil {
		return c, err
	}
	if err := c.fillWebhook(); err != nil {
		return c, err
	}
	// Last, since it requires the store.
	return c, c.checkIntake()
}

// intakeConfig is the runner's configuration, without the relay's own
// handler, observer and logger.
func (c *Config) intakeConfig() intake.Config {
	i := c.Intake
	return intake.Config{
		Store:             c.Store,
		KeepExhaustions:   true,
		RetryFunc:         retryFunc(c.BackoffBase),
		MaxAttempts:       i.MaxAttempts,
		LeaseDuration:     i.LeaseDuration,
		MaxConcurrent:     i.MaxConcurrent,
		SweepInterval:     i.SweepInterval,
		PendingGrace:      i.PendingGrace,
		Retention:         i.Retention,
		AcceptTimeout:     i.AcceptTimeout,
		HeartbeatTimeout:  i.HeartbeatTimeout,
		HeartbeatInterval: i.HeartbeatInterval,
		NoHeartbeat:       i.NoHeartbeat,
		MaxCrashes:        i.MaxCrashes,
		ChatOrder:         i.ChatOrder,
		RetryOutOfOrder:   i.RetryOutOfOrder,
		Deadlines: intake.Deadlines{
			CallbackQuery:    c.Deadlines.CallbackQuery,
			InlineQuery:      c.Deadlines.InlineQuery,
			PreCheckoutQuery: c.Deadlines.PreCheckoutQuery,
			ShippingQuery:    c.Deadlines.ShippingQuery,
			Margin:           c.Deadlines.Margin,
			MaxConcurrent:    c.Deadlines.MaxConcurrent,
		},
	}
}

// intakeError names an intake config error by its relay path: the
// runner's bounds are "Intake.<field>", its deadlines are Deadlines', and
// what it says of the store (required, or lacking a capability the
// relay's own settings need) is Store's.
func intakeError(err error) error {
	ce, ok := errors.AsType[*ConfigError](err)
	if !ok {
		return nested("Intake", err, nil)
	}
	switch {
	case strings.HasPrefix(ce.Field, "Deadlines."):
		return nested("", err, nil)
	case ce.Field == "Store" || ce.Field == "AttemptHandler" || ce.Field == "KeepExhaustions":
		return &ConfigError{Pkg: "relay", Field: "Store", Err: ce.Err, Kind: ce.Kind}
	}
	return nested("Intake", err, nil)
}

// checkIntake has the intake check its part of c: its bounds, the
// deadlines, and the store's capabilities.
func (c *Config) checkIntake() error {
	ic := c.intakeConfig()
	ic.AttemptHandler = func(context.Context, intake.Update, intake.Attempt) error { return nil } // the relay's own, in New
	return intakeError(ic.Validate())
}

func (c *Config) fillForward() error {
	if c.Forward.URL == "" {
		return badField("Forward.URL", "is required: the URL of the bot's endpoint that receives each update")
	}
	if err := nested("Forward", c.Forward.Validate(), nil); err != nil {
		return err
	}
	lease := cmp.Or(c.Intake.LeaseDuration, intake.DefaultLeaseDuration)
	switch t := c.Forward.Timeout; {
	case t == 0:
		c.Forward.Timeout = min(forward.DefaultTimeout, lease/2)
	case t >= lease:
		return badField("Forward.Timeout", "is %v: want below the lease (%v), or a forward could outlive its lease", t, lease)
	}
	return nil
}

// pollCheck stands in for what New passes the poller, so that Validate
// has poll check the relay's poll settings.
var pollCheck = poll.Config{
	Caller:     &botapi.Client{},
	AcceptFunc: func(context.Context, []byte) (intake.Acceptance, error) { return intake.Accepted, nil },
}

func (c *Config) fillPoll() error {
	pc := pollCheck
	pc.Timeout = c.PollTimeout
	if c.PollTimeout == 0 {
		c.PollTimeout = poll.DefaultTimeout
	}
	if err := nested("Poll", pc.Validate(), map[string]string{"Timeout": "PollTimeout"}); err != nil {
		return err
	}
	if !c.Poll {
		c.PollTimeout = 0 // unused
		return nil
	}
	if c.PublicURL != "" {
		return badField("PublicURL", "applies to the webhook, not to long polling")
	}
	if c.TLSConfig != nil {
		return badField("TLSConfig", "applies to the webhook, not to long polling")
	}
	return nil
}

func (c *Config) fillWebhook() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if !strings.HasPrefix(c.Path, "/") {
		return badField("Path", "must start with /")
	}
	if c.Secret == "" && !c.Poll {
		return badField("Secret", "is required for the webhook: Telegram sends it with every update")
	}
	if c.PublicURL == "" && c.WebhookCertificateFunc != nil {
		return badField("WebhookCertificateFunc", "needs PublicURL: a certificate is uploaded when the webhook is claimed")
	}
	// The webhook's registration is hookowner's: its address, the secret
	// and max_connections. Without PublicURL nothing is registered, but
	// the secret and MaxConnections are still checked.
	claim := hookowner.ClaimConfig{URL: c.PublicURL, Secret: c.Secret, MaxConnections: c.MaxConnections}
	if claim.URL == "" {
		claim.URL = "https://webhook.invalid/"
	}
	if claim.Secret == "" { // long polling: none needed, none to check
		claim.Secret = "unset"
	}
	if err := nested("", claim.Validate(), map[string]string{"URL": "PublicURL"}); err != nil {
		return err
	}
	if c.WebhookCheckInterval == 0 {
		c.WebhookCheckInterval = DefaultWebhookCheckInterval
	}
	if c.WebhookCheckInterval < MinWebhookCheckInterval {
		return badField("WebhookCheckInterval", "is %v: want at least %v", c.WebhookCheckInterval, MinWebhookCheckInterval)
	}
	return nil
}

// retryFunc is the relay's retry policy: every failure the endpoint did not
// decide itself is retried after base × 4^(attempt−1), capped at
// MaxRetryBackoff.
func retryFunc(base time.Duration) func(error, int) (time.Duration, bool) {
	b := backoff.Capped{Base: base, Factor: 4, Max: MaxRetryBackoff}
	return func(_ error, attempt int) (time.Duration, bool) { return b.Delay(attempt), true }
}
