package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/intake/pgstore"
	"github.com/tgrelay/tgrelay/poll"
	"github.com/tgrelay/tgrelay/relay"
	"github.com/tgrelay/tgrelay/telegramtest"
)

// Defaults of `tgrelay serve` that are not the relay's own.
const (
	defaultSandboxListen = "127.0.0.1:0"
	// The values of --retry-order.
	retryInLine    = "in-line"
	retryOutOfLine = "out-of-line"
	// openTimeout bounds opening the store at start.
	openTimeout = time.Minute
)

const serveHelp = `
Usage: tgrelay serve --forward URL [flags]

Serve receives a bot's Telegram updates, records each one durably before
Telegram is answered, and POSTs it to the bot's own HTTP endpoint (--forward),
in any language, at least once, retrying with backoff, one at a time per chat
within each serve process (or across all of them: --chat-order strict).

Receiving:
  Webhook (default): listens on --listen at --path and checks the secret
  (--secret, env TGRELAY_WEBHOOK_SECRET). With --public-url it sets the
  webhook on start, but only when the webhook is already this secret's (its
  address carries an owner tag derived from the secret) or --takeover-from
  names the host it points to now ("none" for a bot without a webhook); a
  check every --webhook-check-interval warns when it moved.
  Long polling (--poll): getUpdates; each batch is confirmed to Telegram only
  after all of it is recorded.

Delivery: each update is POSTed with the headers Tgrelay-Update-Id,
Tgrelay-Attempt and Tgrelay-Claim-Id.
  2xx                              completed (a body cut short: tried again)
  429 or 503 with Retry-After      tried again after that wait
  401 or 403                       held: the app refuses serve's credentials,
                                   a configuration problem, not a bad update
                                   (see --app-secret-token below)
  other 4xx                        given up at once (an exhaustion)
  5xx, timeout, connection error   tried again after --backoff-base x 4^(n-1)
                                   (capped at 15m), up to --max-attempts
  3xx                              the same: redirects are never followed
An update given up becomes an exhaustion: POSTed to --exhaustion-forward as
{"tgrelay_exhaustion": {update_id, attempt, claim_id, exhausted_at, error,
update}} (no top-level update_id, Tgrelay-Kind: exhaustion) until it answers
2xx with the header Tgrelay-Ack: <its claim id> (then acknowledged; a bare 2xx,
as any bot framework gives, is not), or, without that flag, kept
unacknowledged in the store for 'tgrelay updates'.

The app's side of the contract:
  --app-secret-token T   every update forward carries T in Telegram's own
                         header, X-Telegram-Bot-Api-Secret-Token, so a bot
                         moved behind serve keeps its framework's secret check
                         (T is yours to choose; it is not --secret, and it is
                         never sent with an exhaustion). Default: no header.
                         An app that answers 401 or 403 (a framework's secret
                         check that expects another secret, or none sent) is
                         misconfigured: its update is held in its attempt and
                         forwarded again after --backoff-base, doubling up to
                         1m, until the app accepts it, never given up and
                         never spending its attempts for this (a stop ends
                         the hold and counts that one attempt, but never
                         makes the update an exhaustion). Each refusal
                         is logged as an error naming --app-secret-token and
                         counted (tgrelay_app_auth_failures_total); while it
                         lasts tgrelay_app_auth_failing is 1,
                         tgrelay_app_auth_held_updates counts the held
                         updates and the dashboard's Overview shows the
                         alert. To give an update up, answer another 4xx.
  Webhook replies        a Bot API call in the response body (Telegraf's
                         default for answerCbQuery, deleteMessage, ...) is
                         performed through the gateway under the attempt's
                         identity, and the update completes once its outcome
                         is known; a retried attempt's identical reply is
                         answered from the journal, not sent twice. The
                         handler may go on after its reply: its later calls
                         under the update's API root are still sent, once,
                         as those of the attempt that completed the update
                         (other finished attempts get 409). With
                         --no-gateway nothing performs it: each is logged as
                         a warning and counted (tgrelay_unacted_replies_total),
                         and the update completes without it.
  Timeouts               a handler still running when the app answers (or
                         when --forward-timeout ends the forward) is retried
                         while it runs: grammY answers 500 after 10 s by
                         default. Give the framework a timeout above your
                         slowest handler and --forward-timeout above the
                         framework's (default 30s; keep it below --lease).

Gateway (on by default; --no-gateway turns it off): a Bot API for the app on
--gateway-listen (default 127.0.0.1:0, an ephemeral loopback port; it holds
the bot token, so a non-loopback address needs --gateway-allow-remote). Each
update forward announces a per-attempt API root in the header
Tgrelay-Api-Root: the app's calls made under it keep Telegram's limits, are
refused (409) once the attempt is stale, and are journaled, so a slow handler
whose update is forwarded again gets its earlier identical call's answer
(Tgrelay-Replayed: true) instead of a second message. Set a fixed
--gateway-listen for calls the app makes outside an update. Telegram takes one
answer per query, so the gateway sends the first answer an update makes to a
callback, inline, pre-checkout or shipping query and replays it for every
later one (from any attempt, with any words) instead of sending it.

Safe declines (--no-decline turns them off; they need the gateway): a query
the app has not answered --decline-margin (default 2s) before Telegram's
deadline is answered by the relay through the gateway, under the update's
attempt: a button press (15 s) gets an empty answerCallbackQuery (or
--callback-decline-text), so the spinner stops; a pre-checkout query (10 s)
and a shipping query are declined ok:false with --precheckout-decline-message,
so nobody is charged for an order the app never checked. The app's later
answer is then the decline's, replayed from the journal. Each decline is
logged and counted (tgrelay_declines_total{kind, outcome}).

Chat order (--chat-order, --retry-order):
  Why a failed update holds its chat: a chat's messages mean something in
  their order ("/start" before the answer to it, an edit after its message),
  and an app that saw "two" before "one" cannot undo it. So by default
  (--retry-order in-line) a failed update keeps its place and the chat's later
  updates wait until it succeeds or is given up; other chats go on. When a
  chat's updates are independent and one slow retry must not delay the rest,
  --retry-order out-of-line lets them go on while the failed one waits for its
  retry, which then runs after them. An update held for a 401 or 403 holds its
  chat either way (the next one would be refused too). --chat-order strict
  refuses out-of-line.
  process (default)  a chat's updates that this serve process received or
                     picked up are forwarded one at a time, in the order
                     received, and a failed one holds the chat's later ones
                     while it waits for its retry (unless --retry-order
                     out-of-line). Updates of one chat that
                     different serve processes received (several behind a load
                     balancer), or that one picks up after a restart, may be
                     forwarded at the same time and overtake each other.
  strict             an update is forwarded only when no earlier update of its
                     chat (a lower update_id) is pending, being forwarded or
                     waiting for a retry, and no other update of its chat is
                     being forwarded, in every serve process sharing the
                     database: a chat's updates go one at a time, in update_id
                     order, across the whole cluster. The cost: a chat is never
                     handled in parallel, each claim checks the chat's earlier
                     updates and each settlement looks up the chat's next one,
                     and a poisoned update holds its chat until it becomes an
                     exhaustion (its --max-attempts spent, or a 4xx), which
                     releases the chat; an update held by a killed process
                     holds its chat until its --lease lapses. Updates without
                     a chat (inline queries, polls) are never held, nor
                     updates recorded by a tgrelay older than this option.

Deadlines: Telegram waits only briefly for the answer to some updates, so
serve counts a deadline from each one's arrival: --deadline-callback-query
(15s: a button's spinner), --deadline-inline-query (10s),
--deadline-pre-checkout-query (10s: the payment fails after it) and
--deadline-shipping-query (10s); 0 turns one off, and every other update has
none (a successful_payment is a message: never expired). Such an update is
forwarded on a lane of its own: never behind its chat's failed or pending
message, in --deadline-concurrency (8) forwards of its own beside
--concurrency. Its forward ends at its deadline, and it is retried only while
a retry can be due before it. Once its deadline passed unanswered it ends
"expired": settled, not an exhaustion (nothing to alert on, nothing POSTed to
--exhaustion-forward), counted in tgrelay_updates_expired_total{type} and
shown as expired by 'tgrelay updates' and the dashboard.

Fencing your own write: store the three identity headers with your domain
write and, with PostgreSQL, check in the same transaction
  SELECT <table>_owns(update_id, attempt, claim_id, <now in unix ms>)
(telegram_updates_owns by default); a stale attempt gets false and must roll
back. Then your effects happen exactly once even if attempts overlap.

Store: --db is a SQLite file (default ./tgrelay.db) or a postgres:// URL;
several serve processes may share one PostgreSQL (behind one load balancer
for the webhook).

Processes dying: each serve renews a heartbeat in the store every
--heartbeat-interval (3s). When one dies (kill -9, a crash, a lost host), the
updates it was forwarding are forwarded again by another serve, or by its own
restart, --heartbeat-timeout (10s) after its last heartbeat, not a --lease
later; with SQLite a restart takes them over as it starts (each serve holds a
lock file under <db>-procs/ that the kernel frees when it dies). A serve that
cannot renew its heartbeat that long stops its forwards itself. An attempt
that ended with its process is a crash, and crashes count against
--max-crashes (10), not --max-attempts: deploys and kills do not use up an
update's attempts, while an update that kills its process every time still
ends as an exhaustion ("crashes spent"). With PostgreSQL, every claim
and heartbeat checks that this host's clock is within --max-clock-skew (2s)
of the database's and is refused otherwise, so a host whose clock runs ahead
never takes a live lease.

Operations: with --admin-listen, /metrics (Prometheus), /healthz (process up)
and /readyz (runner started, store reachable; still 200, with a warning line,
while the app answers 401/403), and the dashboard at / (the
relay's figures, updates, exhaustions to acknowledge or requeue, broadcasts).
The dashboard answers on a loopback address only, unless --admin-token (env
TGRELAY_ADMIN_TOKEN) is set: a non-loopback --admin-listen without one is
refused (or pass --no-dashboard). --dashboard-read-only hides its buttons.
With the dashboard, /metrics is behind the same door: with --admin-token a
scraper sends "Authorization: Bearer <token>". /healthz and /readyz stay open
for probes that carry no credential; they tell only up and ready. Wrong
tokens are limited per client address, bearer tokens included. Behind an
HTTPS reverse proxy, name it with --admin-trusted-proxy so the dashboard's
cookies are Secure and each client is limited on its own.
Logs are slog text or JSON on stderr; the token, the secret and the admin
token are masked in every line. SIGINT or SIGTERM
stops receiving, drains handlers for --drain-timeout, then cancels them.
Memory: serve runs Go's garbage collector at GOGC=200 unless GOGC is set in
its environment: its live heap is a few MiB, so collecting half as often
costs some tens of MiB and saves about a tenth of its CPU per update.
GOGC=100 is Go's default; GOMEMLIMIT caps the heap either way.
CPUs: on one CPU serve runs Go code on two Ps (GOMAXPROCS=2) unless
GOMAXPROCS is set: with one, nothing runs while a SQLite commit waits for
the disk, and serve was 4x slower.

Gateway answer time (--gateway-listen): every call of the app is answered
within MaxWait (60s: the longest a call waits for its turn under Telegram's
limits, 429 pauses included) + --timeout (30s: Telegram's answer
once the call left) + 10s (journaling), 100s in all, stated in seconds in the
Tgrelay-Call-Timeout header of every answer; the gateway's server never cuts a
call sooner. Set the app's HTTP timeout toward the gateway above it. A call
whose turn cannot come within its wait gets a Telegram-shaped 429 with
retry_after at once; Telegram's own 429 is passed on when its retry_after
outlasts the wait; a silent Telegram gives 502 with Tgrelay-Outcome: unknown.
An app that gives up while its call waits stops it (never sent); once sent,
the call's outcome is journaled and a retried update gets it replayed.

Bot API client, one for all that serve sends to --api-root (webhook claim
and check, getUpdates, and the gateway's calls, webhook replies, uploads and
file downloads): --proxy (an http:// or https:// proxy; default HTTPS_PROXY
and the other proxy variables; SOCKS is not supported), --ca-file (extra CA
certificates to trust) and --timeout (the bound of one call's answer; long
polls get their own).

Gateway API root: each forward carries Tgrelay-Api-Root,
<gateway>/a/<update>/<attempt>/<claim>/bot with no trailing slash; pass it
unchanged as the library's API root for that update's calls (grammY apiRoot,
Telegraf apiRoot, python-telegram-bot base_url, aiogram from_base,
go-telegram/bot WithServerURL, telego WithAPIServer). On --gateway-listen
127.0.0.1:0 it names the port the system chose.

Without a token, serve starts a built-in sandbox (a fake Bot API with a
control API) and prints how to make a simulated user write to the bot.

HTTPS (Telegram delivers webhooks only over HTTPS, to ports 443, 80, 88 or
8443; --public-url must be such an https:// address, whatever --listen is):
  --tls-cert F --tls-key F  a certificate (with its chain) and key from
                            files, read again when they change or on SIGHUP;
                            open connections and accepted updates are kept.
  --acme                    a certificate for --public-url's host from an
                            ACME CA (--acme-directory, default Let's
                            Encrypt), obtained on the first handshake by the
                            tls-alpn-01 challenge on --listen (the CA must
                            reach the host on port 443: --public-url on 443),
                            kept in --tls-dir and renewed on its own.
  --self-signed             a certificate generated for --public-url's host
                            or IP address, kept in --tls-dir, uploaded with
                            setWebhook, and replaced (and uploaded again) 30
                            days before it expires.
  Without them serve speaks plain HTTP, for a proxy that terminates TLS.

Traces (off by default; Prometheus at /metrics stays for metrics):
  --otlp-endpoint URL, or the standard OpenTelemetry variables
  (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or
  OTEL_TRACES_EXPORTER=otlp), send one trace per update by OTLP/HTTP
  (http/protobuf): its receive and store, each attempt's forward, the
  app's calls through the gateway and Telegram's answers. The forward
  carries W3C traceparent: an app that starts its span from it, and sends
  its own traceparent with its gateway calls, joins the update's trace.
  OTEL_TRACES_EXPORTER=none or OTEL_SDK_DISABLED=true turn them off;
  OTEL_SERVICE_NAME (default tgrelay), OTEL_RESOURCE_ATTRIBUTES,
  OTEL_TRACES_SAMPLER, OTEL_EXPORTER_OTLP_HEADERS and the exporter's other
  variables apply. Spans carry methods and ids, never a token, a URL with
  one, or a body.

Every flag can also be set by an environment variable, TGRELAY_ and the flag
name in upper case with _ for - (TGRELAY_TOKEN, TGRELAY_DB, TGRELAY_FORWARD,
...; the secret is TGRELAY_WEBHOOK_SECRET). A flag on the command line wins.
The repeatable --forward-header takes one header a variable, so each fits on
a line of a systemd EnvironmentFile: TGRELAY_FORWARD_HEADER and
TGRELAY_FORWARD_HEADER_1 to TGRELAY_FORWARD_HEADER_99, applied in that order
(the flag on the command line replaces them all).
A TGRELAY_ variable that is none of these (a misspelling of one) is logged
as a warning at start, with the closest name.
`

// serveOptions are the parsed flags of serve.
type serveOptions struct {
	token, apiRoot, sandboxListen                   string
	db, table                                       string
	noCreate, poll                                  bool
	pollTimeout                                     time.Duration
	pollTimeoutSet                                  bool // given, by flag or environment
	listen, path, secret, publicURL, takeoverFrom   string
	webhookCheck                                    time.Duration
	maxConnections                                  int
	allowedUpdates                                  string
	forwardURL, exhaustionURL, appSecret            string
	forwardTimeout                                  time.Duration
	forwardHeader                                   headerList
	maxAttempts, concurrency                        int
	chatOrder, retryOrder                           string
	lease, backoffBase, sweepInterval, pendingGrace time.Duration
	retention, drainTimeout, acceptTimeout          time.Duration
	heartbeatTimeout, heartbeatInterval             time.Duration
	maxClockSkew                                    time.Duration
	maxCrashes                                      int
	noHeartbeat                                     bool
	adminListen, logFormat, logLevel                string
	otlpEndpoint                                    string
	net                                             netFlags // the Bot API client's
	adminToken, broadcastDir                        string
	trustedProxies                                  []netip.Prefix
	noDashboard, dashboardReadOnly                  bool
	gatewayListen, gatewayPublicURL                 string
	gatewayAllowRemote, noGateway                   bool
	tls                                             tlsFlags
	noDecline                                       bool
	declineMargin                                   time.Duration
	callbackDeclineText, precheckoutDeclineMessage  string
	deadlines                                       deadlineFlags
}

// headerList is a repeatable "Name: value" flag. In the environment it
// repeats as TGRELAY_FORWARD_HEADER_1, _2, ... (envRepeatable); one Set
// may also carry several headers separated by newlines, which
// TGRELAY_FORWARD_HEADER has always accepted.
type headerList struct{ h http.Header }

func (l *headerList) repeatsInEnv() {}

func (l *headerList) String() string {
	if l == nil || len(l.h) == 0 {
		return ""
	}
	return fmt.Sprintf("%d header(s)", len(l.h))
}

func (l *headerList) Set(v string) error {
	for line := range strings.SplitSeq(v, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.ContainsAny(name, " \t") {
			return errors.New(`want "Name: value"`)
		}
		if l.h == nil {
			l.h = http.Header{}
		}
		l.h.Add(name, strings.TrimSpace(value))
	}
	return nil
}

func defineServeFlags(fs *flag.FlagSet) *serveOptions {
	o := &serveOptions{}
	fs.StringVar(&o.token, "token", "", "bot `token` (empty: run against a built-in sandbox); prefer the environment variable, since command lines are visible to other users")
	fs.StringVar(&o.apiRoot, "api-root", "", "Bot API root `URL` for a local Bot API server (default https://api.telegram.org)")
	fs.StringVar(&o.sandboxListen, "sandbox-listen", defaultSandboxListen, "`address` of the built-in sandbox when there is no token")
	fs.StringVar(&o.db, "db", defaultDB, "update store: SQLite file `path` or postgres:// URL")
	fs.StringVar(&o.table, "table", "", "update table `name` (default telegram_updates)")
	fs.BoolVar(&o.noCreate, "no-create", false, "PostgreSQL: do not create or upgrade the table (your migrations own it)")
	fs.BoolVar(&o.poll, "poll", false, "receive by long polling (getUpdates) instead of the webhook")
	o.pollTimeout = poll.DefaultTimeout
	fs.Var(&setDuration{d: &o.pollTimeout, set: &o.pollTimeoutSet}, "poll-timeout", "long-poll `timeout`, whole seconds, 1s to 50s (with --poll only)")
	fs.StringVar(&o.listen, "listen", relay.DefaultListen, "webhook listen `address`")
	fs.StringVar(&o.path, "path", relay.DefaultPath, "webhook `path`")
	fs.StringVar(&o.secret, "secret", "", "webhook `secret` (1-256 of A-Z a-z 0-9 _ -); required for the webhook")
	fs.StringVar(&o.publicURL, "public-url", "", "public webhook `URL` to claim with setWebhook on start (empty: leave the webhook alone)")
	fs.StringVar(&o.takeoverFrom, "takeover-from", "", "take the webhook over from this `host` (\"none\" for a polling bot)")
	fs.DurationVar(&o.webhookCheck, "webhook-check-interval", relay.DefaultWebhookCheckInterval, "how often to check that the webhook still points here (`duration`, 0 off)")
	fs.IntVar(&o.maxConnections, "max-connections", 0, "setWebhook max_connections, 1-100 (0: Telegram's default); the webhook serves at most 4 times as many connections at once, and at least 256")
	fs.StringVar(&o.allowedUpdates, "allowed-updates", "", "comma-separated update `types` to receive (empty: Telegram's default)")
	fs.StringVar(&o.forwardURL, "forward", "", "the bot's endpoint `URL` updates are POSTed to (required)")
	fs.StringVar(&o.exhaustionURL, "exhaustion-forward", "", "endpoint `URL` exhaustions are POSTed to (empty: keep them for 'tgrelay updates')")
	fs.StringVar(&o.appSecret, "app-secret-token", "", "a `secret` of your choosing sent to the app in X-Telegram-Bot-Api-Secret-Token, so its framework's secret check passes (empty: no such header)")
	fs.DurationVar(&o.forwardTimeout, "forward-timeout", 0, "bound of one forward (`duration`; default 30s or half the lease, whichever is less)")
	fs.Var(&o.forwardHeader, "forward-header", "extra `header` \"Name: value\" sent to the endpoints (repeatable)")
	fs.IntVar(&o.maxAttempts, "max-attempts", intake.DefaultMaxAttempts, "attempts per update before it becomes an exhaustion")
	fs.DurationVar(&o.lease, "lease", intake.DefaultLeaseDuration, "lease of one attempt (`duration`), renewed every quarter")
	fs.DurationVar(&o.backoffBase, "backoff-base", relay.DefaultBackoffBase, "delay before the first retry (`duration`); x4 per attempt, capped at 15m")
	fs.IntVar(&o.concurrency, "concurrency", intake.DefaultMaxConcurrent, "forwards running at once (of different chats: a chat's updates go one at a time)")
	fs.StringVar(&o.chatOrder, "chat-order", string(intake.ChatOrderProcess), "how far a chat's updates are kept in order: process (within this process) or strict (across every process sharing the database; see Chat order)")
	fs.StringVar(&o.retryOrder, "retry-order", retryInLine, "where a failed update waits for its retry: in-line (it holds its chat's later updates, so the app sees a chat in order) or out-of-line (they go on; see Chat order)")
	fs.DurationVar(&o.sweepInterval, "sweep-interval", intake.DefaultSweepInterval, "how often due retries and others' leftovers are picked up (`duration`)")
	fs.DurationVar(&o.pendingGrace, "pending-grace", intake.DefaultPendingGrace, "how long an update recorded by another process is left to it (`duration`)")
	fs.DurationVar(&o.acceptTimeout, "accept-timeout", intake.DefaultAcceptTimeout, "how long the webhook waits for the database to record an update before answering 503, so Telegram delivers it again (`duration`)")
	fs.DurationVar(&o.retention, "retention", intake.DefaultRetention, "how long settled updates are kept to refuse re-deliveries (`duration`)")
	fs.DurationVar(&o.heartbeatTimeout, "heartbeat-timeout", intake.DefaultHeartbeatTimeout, "how long after this process dies its updates are taken over by others or its restart (`duration`)")
	fs.DurationVar(&o.heartbeatInterval, "heartbeat-interval", intake.DefaultHeartbeatInterval, "how often this process renews its heartbeat (`duration`, below --heartbeat-timeout)")
	fs.BoolVar(&o.noHeartbeat, "no-heartbeat", false, "no heartbeat: a dead process's updates are taken over only when their leases end")
	fs.IntVar(&o.maxCrashes, "max-crashes", intake.DefaultMaxCrashes, "times an update's process may die while forwarding it before it becomes an exhaustion (-1: count them as attempts)")
	fs.DurationVar(&o.maxClockSkew, "max-clock-skew", pgstore.DefaultMaxClockSkew, "PostgreSQL: refuse to claim while this host's clock differs from the database's by more (`duration`; negative: no check)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", relay.DefaultDrainTimeout, "on SIGINT/SIGTERM, how long running forwards may finish (`duration`)")
	o.deadlines.define(fs)
	fs.StringVar(&o.adminListen, "admin-listen", "", "`address` for /metrics, /healthz, /readyz and the dashboard (empty: off)")
	fs.StringVar(&o.gatewayListen, "gateway-listen", "", "`address` of the Bot API gateway for the app (default "+relay.DefaultGatewayListen+", an ephemeral loopback port announced in Tgrelay-Api-Root); the app takes its library's API root from that header and gets Telegram's limits, fenced sends and replay-safe replies")
	fs.BoolVar(&o.noGateway, "no-gateway", false, "serve no Bot API gateway: webhook replies in the app's answers are then not performed (each is logged and counted)")
	fs.StringVar(&o.gatewayPublicURL, "gateway-public-url", "", "the gateway's base `URL` as the app reaches it, announced in Tgrelay-Api-Root (default http://<gateway-listen>)")
	fs.BoolVar(&o.noDecline, "no-decline", false, "never answer a query the app did not answer in time (see Safe declines)")
	fs.DurationVar(&o.declineMargin, "decline-margin", 0, "how long before Telegram's deadline a query the app has not answered is declined (`duration`; 0: "+relay.DefaultDeclineMargin.String()+", or half the shortest --deadline-* when that is 2s or less)")
	fs.StringVar(&o.callbackDeclineText, "callback-decline-text", "", "the `text` of the relay's answer to a button press the app did not answer in time (empty: none, the spinner just stops)")
	fs.StringVar(&o.precheckoutDeclineMessage, "precheckout-decline-message", relay.DefaultPreCheckoutDeclineMessage, "the error `message` a user reads when the relay declines a pre-checkout query the app did not answer in time")
	fs.BoolVar(&o.gatewayAllowRemote, "gateway-allow-remote", false, "allow a --gateway-listen address that is not loopback (the gateway holds the bot token)")
	fs.StringVar(&o.otlpEndpoint, "otlp-endpoint", "", "send OpenTelemetry traces by OTLP/HTTP to this collector base `URL` (such as http://localhost:4318; see Traces)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.BoolVar(&o.noDashboard, "no-dashboard", false, "do not serve the dashboard on the admin listener")
	fs.StringVar(&o.adminToken, "admin-token", "", "`token` the dashboard asks for (16+ bytes); required when --admin-listen is not loopback; prefer the environment variable")
	fs.Func("admin-trusted-proxy", "comma-separated `addresses` (IP or CIDR) of the HTTPS reverse proxies in front of --admin-listen, whose X-Forwarded-Proto and X-Forwarded-For the dashboard believes (Secure cookies, sign-in limits per client)", func(v string) error {
		ps, err := parsePrefixes(v)
		o.trustedProxies = ps
		return err
	})
	fs.BoolVar(&o.dashboardReadOnly, "dashboard-read-only", false, "the dashboard shows everything and changes nothing (no Acknowledge or Requeue)")
	fs.StringVar(&o.broadcastDir, "broadcast-state-dir", "", "`directory` of the broadcasts the dashboard shows, as 'tgrelay broadcast --state-dir' (default the same default)")
	o.tls.register(fs)
	o.net.register(fs)
	fs.VisitAll(func(f *flag.Flag) {
		if names := envNames(f); len(names) > 1 {
			f.Usage += " [env " + names[0] + ", " + names[1] + " ... " + names[len(names)-1] + "]"
		} else {
			f.Usage += " [env " + names[0] + "]"
		}
	})
	return o
}

// serveGCPercent is the garbage collector's target serve runs with unless
// GOGC is set (see tuneGC).
const serveGCPercent = 200

// tuneGC sets the garbage collector's target to serveGCPercent unless GOGC
// is in the environment. serve's live heap is small (a few MiB at rest,
// tens under load), so at Go's default of 100 it collects every few MiB
// allocated, many times a second under load, and each cycle scans every
// goroutine's stack; at 200 it collects half as often, for a heap up to
// three times the live one. In `bench relay`, 200 saved 17 µs of CPU per
// update over 100, and 400 no more than 200 within the runs' noise, while
// its heap took longer to settle and settled higher (95 against 59 MiB of
// RSS in a 12-minute soak).
func tuneGC(lookup func(string) (string, bool)) {
	if _, set := lookup("GOGC"); set {
		return
	}
	debug.SetGCPercent(serveGCPercent)
}

// minGoProcs is the fewest Ps (GOMAXPROCS) serve and broadcast run
// run Go code with unless GOMAXPROCS is in the environment (see
// tuneProcs).
const minGoProcs = 2

// tuneProcs raises GOMAXPROCS to minGoProcs unless GOMAXPROCS is in
// the environment, and returns what it was when it raised it (0 when it
// did not). serve and broadcast run call it: under load both wait for
// the disk in blocking system calls, serve in SQLite's commits and
// broadcast in its journal's fsyncs. On one CPU, `bench broadcast-cli
// -cpus 1` reached a median of 0.90 of --rate 1000 with one P and 0.99
// with two.
//
// Go defaults GOMAXPROCS to the CPUs the process may use, so it is 1 on a
// one-CPU machine or under an affinity of one CPU. With one P, a goroutine
// in a blocking system call keeps the P until the runtime's monitor takes
// it back, which under load takes up to 10 ms, and nothing else runs
// meanwhile. SQLite's writes, locks and fsyncs are such calls: while one
// commit waits for the disk, no webhook request is read and no update
// joins the next commit, so every update pays its own two commits. On one
// CPU, `bench relay -serve-cpus 1` measured serve on SQLite at 526–557
// updates/s with a p50 of 3.6–4.7 s with one P, and 2,144–2,195
// updates/s with a p50 of 20 ms with two (3.8–4.4×; PostgreSQL
// 1.01–1.06×). A second P costs nothing when idle; the kernel shares the
// CPU between the two threads when both run. Go's own default under a
// cgroup CPU limit is at least 2 for the same kind of reason.
func tuneProcs(lookup func(string) (string, bool)) (was int) {
	if _, set := lookup("GOMAXPROCS"); set {
		return 0
	}
	if n := runtime.GOMAXPROCS(0); n < minGoProcs {
		runtime.GOMAXPROCS(minGoProcs)
		return n
	}
	return 0
}

// serveFlagOf names the flag of each relay.Config field path, so that an
// invalid field is reported as the flag the user typed. TestServeFlagOf
// checks that every path the relay can report is here, or in
// notServeFlags with the reason no flag sets it.
var serveFlagOf = map[string]string{
	"Token":                         "token",
	"APIRoot":                       "api-root",
	"Store":                         "db",
	"StoreName":                     "db",
	"Poll":                          "poll",
	"PollTimeout":                   "poll-timeout",
	"AllowedUpdates":                "allowed-updates",
	"Listen":                        "listen",
	"Listener":                      "listen",
	"Path":                          "path",
	"Secret":                        "secret",
	"PublicURL":                     "public-url",
	"TakeoverFrom":                  "takeover-from",
	"MaxConnections":                "max-connections",
	"WebhookCheckInterval":          "webhook-check-interval",
	"NoWebhookCheck":                "webhook-check-interval",
	"TLSConfig":                     "tls-cert",
	"WebhookCertificateFunc":        "self-signed",
	"BotTransport.ResponseTimeout":  "timeout",
	"BotTransport.Proxy":            "proxy",
	"BotTransport.TLSConfig":        "ca-file",
	"Forward.URL":                   "forward",
	"Forward.ExhaustionURL":         "exhaustion-forward",
	"Forward.Timeout":               "forward-timeout",
	"Forward.AppSecretToken":        "app-secret-token",
	"Forward.Header":                "forward-header",
	"Intake.MaxAttempts":            "max-attempts",
	"Intake.LeaseDuration":          "lease",
	"Intake.MaxConcurrent":          "concurrency",
	"Intake.SweepInterval":          "sweep-interval",
	"Intake.PendingGrace":           "pending-grace",
	"Intake.Retention":              "retention",
	"Intake.AcceptTimeout":          "accept-timeout",
	"Intake.HeartbeatTimeout":       "heartbeat-timeout",
	"Intake.HeartbeatInterval":      "heartbeat-interval",
	"Intake.NoHeartbeat":            "no-heartbeat",
	"Intake.MaxCrashes":             "max-crashes",
	"Intake.ChatOrder":              "chat-order",
	"Intake.RetryOutOfOrder":        "retry-order",
	"BackoffBase":                   "backoff-base",
	"DrainTimeout":                  "drain-timeout",
	"Deadlines.CallbackQuery":       "deadline-callback-query",
	"Deadlines.InlineQuery":         "deadline-inline-query",
	"Deadlines.PreCheckoutQuery":    "deadline-pre-checkout-query",
	"Deadlines.ShippingQuery":       "deadline-shipping-query",
	"Deadlines.MaxConcurrent":       "deadline-concurrency",
	"AdminListen":                   "admin-listen",
	"AdminListener":                 "admin-listen",
	"Dashboard.Enabled":             "admin-listen",
	"Dashboard.AdminToken":          "admin-token",
	"Dashboard.ReadOnly":            "dashboard-read-only",
	"Dashboard.BroadcastDir":        "broadcast-state-dir",
	"Dashboard.TrustedProxies":      "admin-trusted-proxy",
	"Gateway.Disable":               "no-gateway",
	"Gateway.Listen":                "gateway-listen",
	"Gateway.Listener":              "gateway-listen",
	"Gateway.AllowRemote":           "gateway-allow-remote",
	"Gateway.PublicURL":             "gateway-public-url",
	"Decline.Disable":               "no-decline",
	"Decline.Margin":                "decline-margin",
	"Decline.CallbackQuery.Text":    "callback-decline-text",
	"Decline.PreCheckoutQuery.Text": "precheckout-decline-message",
}

// notServeFlags are the relay.Config field paths serve sets no flag for,
// each with the reason; serve never makes them invalid, so the relay
// cannot report them. A path under one of them (a prefix and ".") is
// covered too.
var notServeFlags = map[string]string{
	"SettingNameFunc":                  "serve's own (flagOfField)",
	"Observer":                         "serve's own (metrics)",
	"Logger":                           "serve's own (--log-format, --log-level)",
	"Forward.Client":                   "the relay's default",
	"Forward.Replier":                  "the relay's own (the gateway)",
	"Forward.ReplyFunc":                "the relay's own",
	"Forward.UnactedReplyFunc":         "the relay's own",
	"Forward.APIRoot":                  "the relay's own (the gateway's address)",
	"Forward.APIRootFunc":              "the relay's own (the gateway's address)",
	"BotTransport":                     "only --timeout, --proxy and --ca-file, listed above; the rest are transport's defaults",
	"Deadlines.Margin":                 "the default; --decline-margin sets the decline's",
	"Deadlines.Decliner":               "the relay's own (the gateway)",
	"Dashboard.RefreshInterval":        "the dashboard's default",
	"Gateway.Limits":                   "Telegram's limits, the throttle's defaults",
	"Gateway.MaxBufferedBody":          "the gateway's default",
	"Gateway.MaxBufferedTotal":         "the gateway's default",
	"Gateway.MaxSendTries":             "the gateway's default",
	"Gateway.ResponseTimeout":          "--timeout, through BotTransport",
	"Gateway.AfterIntent":              "tests only (an environment seam)",
	"Decline.CallbackQuery.Disable":    "--no-decline turns all off",
	"Decline.PreCheckoutQuery.Disable": "--no-decline turns all off",
	"Decline.ShippingQuery.Disable":    "--no-decline turns all off",
	"Decline.ShippingQuery.Text":       "the default message",
	"TracerProvider":                   "--otlp-endpoint and the OTEL_* variables build it",
	"Decline.Test":                     "tests only",
}

// flagOfField names a relay.Config field path as its serve flag
// ("--app-secret-token"), for the relay's log lines and serve's errors; ""
// for a path without one. A nested path without its own flag takes its
// nearest parent's.
func flagOfField(field string) string {
	for f := field; f != ""; {
		if name, ok := serveFlagOf[f]; ok {
			return "--" + name
		}
		i := strings.LastIndexByte(f, '.')
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return ""
}

// serveUsageError turns a *relay.ConfigError into a usage error naming
// the flag; other errors pass unchanged. A path without a flag (which
// TestServeFlagOf keeps from happening) is named in words, never as a Go
// identifier.
func serveUsageError(err error) error {
	ce, ok := errors.AsType[*relay.ConfigError](err)
	if !ok {
		return err
	}
	flagName := flagOfField(ce.Field)
	if flagName == "" {
		return &usageError{msg: "invalid setting: " + inFlagWords(ce.Err.Error(), ce.Field), hint: "Run 'tgrelay help serve' for usage."}
	}
	if flagName == "--secret" {
		flagName += " (or TGRELAY_WEBHOOK_SECRET)"
	}
	return &usageError{msg: flagName + " " + inFlagWords(ce.Err.Error(), ce.Field), hint: "Run 'tgrelay help serve' for usage."}
}

// inFlagWords rewrites a relay message about field's value so that it
// names flags, not Config fields: "set Gateway.AllowRemote" becomes "pass
// --gateway-allow-remote", and a field named in passing ("needs
// PublicURL", or a sibling such as ChatOrder in a message about
// Intake.RetryOutOfOrder) becomes its flag, the longest path first.
func inFlagWords(msg, field string) string {
	fields := slices.SortedFunc(maps.Keys(serveFlagOf), func(a, b string) int { return len(b) - len(a) })
	for _, f := range fields {
		msg = strings.ReplaceAll(msg, "set "+f, "pass --"+serveFlagOf[f])
	}
	parent, _, _ := strings.Cut(field, ".")
	for _, f := range fields {
		if goName(f) {
			msg = replaceWord(msg, f, "--"+serveFlagOf[f])
		}
		if p, leaf, ok := strings.Cut(f, "."); ok && p == parent && !strings.Contains(leaf, ".") && goName(leaf) {
			msg = replaceWord(msg, leaf, "--"+serveFlagOf[f])
		}
	}
	return msg
}

// goName reports whether s reads as a Go identifier rather than a word of
// a sentence: a path ("Forward.URL") or a mixed-case name with two capitals
// ("PublicURL", "ChatOrder"), not "URL" or "Store".
func goName(s string) bool {
	if strings.Contains(s, ".") {
		return true
	}
	upper, lower := 0, false
	for _, c := range s {
		switch {
		case 'A' <= c && c <= 'Z':
			upper++
		case 'a' <= c && c <= 'z':
			lower = true
		}
	}
	return upper >= 2 && lower
}

// replaceWord replaces each whole-word occurrence of old in s by new.
func replaceWord(s, old, new string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		end := i + len(old)
		whole := (i == 0 || !isWordByte(s[i-1])) && (end == len(s) || !isWordByte(s[end]))
		b.WriteString(s[:i])
		if whole {
			b.WriteString(new)
		} else {
			b.WriteString(old)
		}
		s = s[end:]
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '.' || c == '-' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// allowed returns --allowed-updates as a list, nil when empty.
func (o *serveOptions) allowed() []string {
	var out []string
	for s := range strings.SplitSeq(o.allowedUpdates, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// relayConfig maps the options onto a relay.Config (without the store,
// the observer and the logger).
func (o *serveOptions) relayConfig() relay.Config {
	return relay.Config{
		Token:                o.token,
		APIRoot:              o.apiRoot,
		Poll:                 o.poll,
		PollTimeout:          o.pollTimeout,
		AllowedUpdates:       o.allowed(),
		Listen:               o.listen,
		Path:                 o.path,
		Secret:               o.secret,
		PublicURL:            o.publicURL,
		TakeoverFrom:         o.takeoverFrom,
		MaxConnections:       o.maxConnections,
		WebhookCheckInterval: o.webhookCheck,
		NoWebhookCheck:       o.webhookCheck == 0,
		Forward: forward.Config{
			URL: o.forwardURL, ExhaustionURL: o.exhaustionURL, Timeout: o.forwardTimeout, Header: o.forwardHeader.h,
			AppSecretToken: o.appSecret,
		},
		Intake: relay.IntakeConfig{
			MaxAttempts:       o.maxAttempts,
			LeaseDuration:     o.lease,
			MaxConcurrent:     o.concurrency,
			SweepInterval:     o.sweepInterval,
			PendingGrace:      o.pendingGrace,
			Retention:         o.retention,
			AcceptTimeout:     o.acceptTimeout,
			HeartbeatTimeout:  o.heartbeatTimeout,
			HeartbeatInterval: o.heartbeatInterval,
			NoHeartbeat:       o.noHeartbeat,
			MaxCrashes:        o.maxCrashes,
			ChatOrder:         intake.ChatOrder(o.chatOrder),
			RetryOutOfOrder:   o.retryOrder == retryOutOfLine,
		},
		BackoffBase:  o.backoffBase,
		Deadlines:    o.deadlines.config(),
		DrainTimeout: o.drainTimeout,
		AdminListen:  o.adminListen,
		Gateway: relay.GatewayConfig{
			Disable: o.noGateway, Listen: o.gatewayListen, PublicURL: o.gatewayPublicURL, AllowRemote: o.gatewayAllowRemote,
		},
		Decline: relay.DeclineConfig{
			Disable: o.noDecline, Margin: o.declineMargin,
			CallbackQuery:    relay.DeclinePolicy{Text: o.callbackDeclineText},
			PreCheckoutQuery: relay.DeclinePolicy{Text: o.precheckoutDeclineMessage},
		},
		Dashboard: relay.DashboardConfig{
			Enabled:      o.adminListen != "" && !o.noDashboard,
			AdminToken:   o.adminToken,
			ReadOnly:     o.dashboardReadOnly,
			BroadcastDir: o.broadcastDir,
			// A copy: relay.New keeps it.
			TrustedProxies: append([]netip.Prefix(nil), o.trustedProxies...),
		},
	}
}

// parsePrefixes parses a comma-separated list of IP addresses and CIDR
// prefixes; an address is a prefix of its full length.
func parsePrefixes(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for f := range strings.SplitSeq(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if p, err := netip.ParsePrefix(f); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%q is not an IP address or a CIDR prefix", f)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// validate checks the options with relay.Config.Validate (no I/O, no
// relay built), without opening the store, so that a mistyped flag creates
// no database. Its errors name the flag.
func (o *serveOptions) validate() error {
	if o.pollTimeoutSet && !o.poll {
		return &usageError{msg: "--poll-timeout applies only with --poll: the webhook mode does not poll", hint: "Pass --poll to receive by long polling, or drop --poll-timeout."}
	}
	if o.retryOrder != retryInLine && o.retryOrder != retryOutOfLine {
		return &usageError{msg: fmt.Sprintf("--retry-order is %q: want %s or %s", o.retryOrder, retryInLine, retryOutOfLine), hint: "Run 'tgrelay help serve' for usage."}
	}
	if o.maxAttempts == 0 {
		return serveUsageError(&relay.ConfigError{Field: "Intake.MaxAttempts", Err: fmt.Errorf("is 0: want 1 to %d", intake.MaxMaxAttempts)})
	}
	if o.concurrency == 0 {
		return serveUsageError(&relay.ConfigError{Field: "Intake.MaxConcurrent", Err: fmt.Errorf("is 0: want 1 to %d", intake.MaxMaxConcurrent)})
	}
	if o.maxCrashes == 0 {
		return serveUsageError(&relay.ConfigError{Field: "Intake.MaxCrashes", Err: fmt.Errorf("is 0: want 1 to %d, or -1 to count crashes as attempts", intake.MaxMaxCrashes)})
	}
	if o.acceptTimeout <= 0 {
		return serveUsageError(&relay.ConfigError{Field: "Intake.AcceptTimeout", Err: fmt.Errorf("is %v: want %v to %v", o.acceptTimeout, intake.MinAcceptTimeout, intake.MaxAcceptTimeout)})
	}
	if err := o.deadlines.validate(); err != nil {
		return err
	}
	cfg := o.relayConfig()
	if o.token == "" { // the sandbox's token and secret are made later
		cfg.Token = sandboxToken()
		if cfg.Secret == "" {
			cfg.Secret = "sandbox"
		}
	}
	// The store is opened later, so Validate names it (and nothing else)
	// when every flag is valid; relay.New checks what needs the store.
	err := cfg.Validate()
	if ce, ok := errors.AsType[*relay.ConfigError](err); ok && ce.Field == "Store" {
		err = nil
	}
	if err != nil {
		return serveUsageError(err)
	}
	return o.checkPublicURLTarget()
}

// checkPublicURLTarget refuses a --public-url Telegram does not deliver to
// (see checkTelegramWebhookURL); with --poll there is no webhook, and
// the built-in sandbox (no token) delivers over http.
func (o *serveOptions) checkPublicURLTarget() error {
	if o.poll || o.token == "" {
		return nil
	}
	return checkTelegramWebhookURL("--public-url", o.publicURL, o.apiRoot)
}

// checkTelegramWebhookURL refuses a webhook address (flagName's raw) that
// Telegram does not deliver to (botapi.CheckWebhookURL: not https://, or
// not on one of its ports) when the Bot API is Telegram's (apiRoot empty
// or Telegram's): the command would otherwise find out only from
// Telegram's refusal of setWebhook, after its start-up. A local Bot API
// server may deliver elsewhere.
func checkTelegramWebhookURL(flagName, raw, apiRoot string) error {
	if apiRoot != "" && strings.TrimRight(apiRoot, "/") != botapi.DefaultAPIRoot {
		return nil
	}
	if err := botapi.CheckWebhookURL(raw); errors.Is(err, botapi.ErrWebhookNotHTTPS) || errors.Is(err, botapi.ErrWebhookPort) {
		return &usageError{msg: flagName + " is not an address Telegram delivers to: " + strings.TrimPrefix(err.Error(), "botapi: "),
			hint: "Give an https:// address on port 443, 80, 88 or 8443, and serve HTTPS there (serve --tls-cert and --tls-key, --acme or --self-signed) or put a TLS proxy in front."}
	}
	return nil
}

// sandboxToken returns a random token of the shape Telegram gives.
func sandboxToken() string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
	b := make([]byte, 35)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	id := make([]byte, 4)
	_, _ = rand.Read(id)
	return fmt.Sprintf("%d:%s", 1000000000+int64(id[0])<<24|int64(id[1])<<16|int64(id[2])<<8|int64(id[3]), b)
}

// runServe runs `tgrelay serve` until ctx ends (SIGINT or SIGTERM), then
// shuts down gracefully. Its flags are documented by defineServeFlags and
// serveHelp; each is also read from its environment variable (envName).
// Logs go to stderr; the sandbox banner (no token) goes to stdout.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	o := defineServeFlags(fs)
	fs.Usage = commandUsage(fs, serveHelp)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if err := applyEnv(fs, os.LookupEnv); err != nil {
		return err
	}
	tuneGC(os.LookupEnv)
	procsWere := tuneProcs(os.LookupEnv)
	stopProfile, err := startCPUProfileFromEnv()
	if err != nil {
		return err
	}
	defer stopProfile()
	red := &botapi.Redactor{}
	red.Add(o.token, o.secret, o.adminToken, o.appSecret)
	log, err := newLogger(stderr, o.logFormat, o.logLevel, red)
	if err != nil {
		return err
	}
	if ownStdLog.Load() {
		defer redirectStdLog(log)()
	}
	logUnknownEnv(log, os.Environ())
	if procsWere > 0 {
		log.Info("serve: GOMAXPROCS raised: with one P, a store write waiting for the disk would stop the webhook (set GOMAXPROCS to choose)",
			"gomaxprocs", minGoProcs, "was", procsWere)
	}
	if o.broadcastDir == "" {
		if d, err := resolveStateDir(""); err == nil {
			o.broadcastDir = d // where 'tgrelay broadcast' keeps them by default
		}
	}
	if err := o.validate(); err != nil {
		return err
	}
	ts, err := decideTracing(o.otlpEndpoint, os.LookupEnv)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if err := o.tls.validate(o, func(name string) bool { _, env := os.LookupEnv(envName(name)); return given[name] || env }); err != nil {
		return err
	}
	if err := o.tls.testSeamsFromEnv(); err != nil {
		return err
	}
	if o.token != "" {
		if err := checkToken("--token", o.token); err != nil {
			return withHint(err, "Run 'tgrelay help serve' for usage.")
		}
	}
	// One Bot API client configuration for all serve sends: webhook
	// ownership, polling and the gateway's upstream.
	bc, err := o.net.botAPI(o.apiRoot)
	if err != nil {
		return withHint(err, "Run 'tgrelay help serve' for usage.")
	}
	var sb *sandbox
	if o.token == "" {
		if sb, err = newSandbox(o, log); err != nil {
			return err
		}
		defer sb.close()
		red.Add(o.token, o.secret)
		bc.root = o.apiRoot // the sandbox's
	}
	created := newSQLiteFile(o.db)
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	fileOK := newFileWatch(log)
	st, err := openWatchedStore(octx, o.db, o.table, o.noCreate, storeWatch{maxClockSkew: o.maxClockSkew, onFileChange: fileOK.changed, log: log})
	cancel()
	if err == nil {
		st = memoryStoreFromEnv(st, log)
	}
	if err != nil {
		return inOneLine(err, log)
	}
	defer st.Close()
	if created {
		where, _ := filepath.Abs(o.db)
		log.Info("serve: created a new SQLite database", "path", where)
	}

	https, err := o.tls.open(o, log)
	if err != nil {
		return err
	}

	tp, err := newTracerProvider(ctx, ts, log)
	if err != nil {
		return err
	}
	defer shutdownTracing(tp, log) // after the relay stopped: its last spans go too

	cfg := o.relayConfig()
	if tp != nil {
		cfg.TracerProvider = tp
	}
	if https != nil {
		cfg.TLSConfig, cfg.WebhookCertificateFunc = https.config, https.certPEM
	}
	cfg.Store, cfg.StoreName, cfg.Logger = st.store, st.kind, log
	cfg.APIRoot, cfg.BotTransport = bc.root, bc.transport
	cfg.SettingNameFunc = flagOfField
	if os.Getenv(envGatewayStopAfterIntent) != "" {
		cfg.Gateway.AfterIntent = stopAfterIntent(log)
	}
	metrics := newRelayMetrics(st.Stats)
	metrics.registerStoreFile(fileOK.ok)
	cfg.Observer = relay.Observer{EventFunc: metrics.Observe}
	if sb != nil {
		cfg.Listener = sb.hookLn
	}
	if cfg.PublicURL != "" && !cfg.Poll {
		metrics.registerWebhookOwned()
	}
	if https != nil && cfg.Listener == nil && !cfg.Poll {
		// Listen before the certificate is asked for: the CA validates
		// --acme's tls-alpn-01 challenge on this port as soon as the order
		// starts, and a refused connection fails the order.
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			return &usageError{msg: fmt.Sprintf("--listen %s is not available: %v", cfg.Listen, err), hint: "Pass a free address to --listen."}
		}
		cfg.Listener = ln
	}
	r, err := relay.New(cfg)
	if err != nil {
		if cfg.Listener != nil && sb == nil {
			cfg.Listener.Close()
		}
		return inOneLine(serveUsageError(err), log)
	}
	metrics.registerApp(r.App)
	r.HandleAdmin("GET /metrics", metrics.handler())
	if sb != nil {
		sb.start(stdout)
	}
	if https != nil {
		hctx, stopHTTPS := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); https.run(hctx, r) }()
		defer func() { stopHTTPS(); <-done }()
	}
	return inOneLine(serveRunError(r.Run(ctx)), log)
}

// serveRunError explains the errors of a running relay in terms of the
// command line.
func serveRunError(err error) error {
	if ce, ok := errors.AsType[*hookowner.ClaimError](err); ok {
		return &usageError{msg: fmt.Sprintf("webhook not set (%s): %s", ce.Reason, stripPackages(ce.Error())),
			hint: "To take it over, pass --takeover-from " + ce.OwnerHost + " (after stopping whatever uses it)."}
	}
	if errors.Is(err, poll.ErrWebhookActive) {
		return fmt.Errorf("%w (run 'tgrelay webhook delete', or serve without --poll)", err)
	}
	return serveUsageError(err)
}

// sandbox is the built-in fake Bot API serve runs against without a token.
type sandbox struct {
	srv    *telegramtest.Server
	ln     net.Listener // the sandbox's listener
	hookLn net.Listener // the webhook's listener, known before the relay starts
}

// newSandbox listens for the sandbox (and, in webhook mode, for the
// webhook, whose address becomes the public URL) and points o at it.
func newSandbox(o *serveOptions, log *slog.Logger) (*sandbox, error) {
	l, err := net.Listen("tcp", o.sandboxListen)
	if err != nil {
		return nil, &usageError{msg: fmt.Sprintf("--sandbox-listen: %v", err)}
	}
	o.token = sandboxToken()
	sb := &sandbox{srv: telegramtest.NewUnstartedServerOn(telegramtest.Config{
		Token:      o.token,
		ControlAPI: true,
		Logf:       func(format string, args ...any) { log.Info("sandbox: " + fmt.Sprintf(format, args...)) },
	}, l), ln: l}
	o.apiRoot = "http://" + l.Addr().String()
	if o.poll {
		return sb, nil
	}
	if o.secret == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		o.secret = hex.EncodeToString(b)
	}
	if o.takeoverFrom == "" {
		o.takeoverFrom = hookowner.HostNone // a fresh sandbox has no webhook
	}
	if sb.hookLn, err = net.Listen("tcp", o.listen); err != nil {
		_ = l.Close()
		return nil, &usageError{msg: fmt.Sprintf("--listen is not available: %v", err)}
	}
	if o.publicURL == "" {
		o.publicURL = "http://" + sb.hookLn.Addr().String() + o.path
	}
	return sb, nil
}

// start serves the sandbox and prints how to use it.
func (sb *sandbox) start(stdout io.Writer) {
	sb.srv.Start()
	fmt.Fprintf(stdout, `No --token: running against a built-in Telegram sandbox (a fake Bot API).
  Bot API:     %[1]s
  Token:       %[2]s
  Control API: %[1]s%[3]s
Make a simulated user write to the bot:
  curl -s -X POST %[1]s%[3]susers -d '{"first_name":"Ada"}'            # -> {"id": ID, ...}
  curl -s -X POST %[1]s%[3]schats -d '{"type":"private","user_id":ID}'
  curl -s -X POST %[1]s%[3]ssend  -d '{"chat_id":ID,"user_id":ID,"text":"hello"}'
`, sb.srv.URL, sb.srv.Token, telegramtest.ControlPrefix)
}

// close stops the sandbox, or releases its listener when it never
// started, and closes the webhook's listener (the relay closed it already
// if it served on it).
func (sb *sandbox) close() {
	if sb.srv.URL != "" {
		sb.srv.Close()
	} else {
		_ = sb.ln.Close()
	}
	if sb.hookLn != nil {
		_ = sb.hookLn.Close()
	}
}
