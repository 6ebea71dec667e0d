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
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/poll"
	"github.com/tgrelay/tgrelay/telegramtest"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/webhook"
)

// Defaults of `tgrelay serve`.
const (
	defaultServeListen       = "127.0.0.1:8080"
	defaultServePath         = "/telegram"
	defaultBackoffBase       = 5 * time.Second
	defaultDrainTimeout      = 30 * time.Second
	defaultWebhookCheckEvery = 5 * time.Minute
	defaultSandboxListen     = "127.0.0.1:0"
	// maxRetryBackoff caps the delay before a retry, whatever --backoff-base.
	maxRetryBackoff = 15 * time.Minute
	// maxBackoffBase bounds --backoff-base.
	maxBackoffBase = time.Hour
	// maxDrainTimeout bounds --drain-timeout.
	maxDrainTimeout = time.Hour
	// minWebhookCheckEvery bounds --webhook-check-interval from below, so
	// the check cannot hammer the Bot API.
	minWebhookCheckEvery = time.Second
	// cancelGrace bounds the wait, after the drain deadline cancelled the
	// handlers, for them to record their outcome before the store closes.
	cancelGrace = 2 * time.Second
	// startTimeout bounds the first sweep and the webhook claim at start.
	startTimeout = time.Minute
	// Bounds of the webhook and admin HTTP servers.
	serveReadHeaderTimeout = 10 * time.Second
	serveReadTimeout       = 30 * time.Second
	serveWriteTimeout      = 30 * time.Second
	serveIdleTimeout       = 2 * time.Minute
	serveMaxHeaderBytes    = 64 << 10
	// botAPIMaxResponseBytes bounds a Bot API answer; a full getUpdates
	// batch fits.
	botAPIMaxResponseBytes = 8 << 20
)

const serveHelp = `
Usage: tgrelay serve --forward URL [flags]

Serve receives a bot's Telegram updates, records each one durably before
Telegram is answered, and POSTs it to the bot's own HTTP endpoint (--forward),
in any language, at least once, in order per chat, retrying with backoff.

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
  2xx                              completed
  429 or 503 with Retry-After      tried again after that wait
  other 4xx                        given up at once (an exhaustion)
  5xx, timeout, connection error   tried again after --backoff-base x 4^(n-1)
                                   (capped at 15m), up to --max-attempts
An update given up becomes an exhaustion: POSTed to --exhaustion-forward as
{"tgrelay_exhaustion": {update_id, attempt, claim_id, exhausted_at, error,
update}} (no top-level update_id, Tgrelay-Kind: exhaustion) until it answers
2xx with the header Tgrelay-Ack: <its claim id> (then acknowledged; a bare 2xx,
as any bot framework gives, is not), or, without that flag, kept
unacknowledged in the store for 'tgrelay updates'.

Fencing your own write: store the three identity headers with your domain
write and, with PostgreSQL, check in the same transaction
  SELECT <table>_owns(update_id, attempt, claim_id, <now in unix ms>)
(telegram_updates_owns by default); a stale attempt gets false and must roll
back. Then your effects happen exactly once even if attempts overlap.

Store: --db is a SQLite file (default ./tgrelay.db) or a postgres:// URL;
several serve processes may share one PostgreSQL (behind one load balancer
for the webhook).

Operations: with --admin-listen, /metrics (Prometheus), /healthz (process up)
and /readyz (runner started, store reachable). Logs are slog text or JSON on
stderr; the token and the secret are masked in every line. SIGINT or SIGTERM
stops receiving, drains handlers for --drain-timeout, then cancels them.

Without a token, serve starts a built-in sandbox (a fake Bot API with a
control API) and prints how to make a simulated user write to the bot.

Every flag can also be set by an environment variable, TGRELAY_ and the flag
name in upper case with _ for - (TGRELAY_TOKEN, TGRELAY_DB, TGRELAY_FORWARD,
...; the secret is TGRELAY_WEBHOOK_SECRET). A flag on the command line wins.
`

// serveOptions are the parsed flags of serve.
type serveOptions struct {
	token, apiRoot, sandboxListen                   string
	db, table                                       string
	noCreate, poll                                  bool
	pollTimeout                                     time.Duration
	listen, path, secret, publicURL, takeoverFrom   string
	webhookCheck                                    time.Duration
	maxConnections                                  int
	allowedUpdates                                  string
	forwardURL, exhaustionURL                       string
	forwardTimeout                                  time.Duration
	forwardHeader                                   headerList
	maxAttempts, concurrency                        int
	lease, backoffBase, sweepInterval, pendingGrace time.Duration
	retention, drainTimeout                         time.Duration
	adminListen, logFormat, logLevel                string
}

// headerList is a repeatable "Name: value" flag. One Set may carry several
// headers separated by newlines (as the environment variable does).
type headerList struct{ h http.Header }

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
	fs.DurationVar(&o.pollTimeout, "poll-timeout", poll.DefaultTimeout, "long-poll `timeout`, whole seconds, 1s to 50s")
	fs.StringVar(&o.listen, "listen", defaultServeListen, "webhook listen `address`")
	fs.StringVar(&o.path, "path", defaultServePath, "webhook `path`")
	fs.StringVar(&o.secret, "secret", "", "webhook `secret` (1-256 of A-Z a-z 0-9 _ -); required for the webhook")
	fs.StringVar(&o.publicURL, "public-url", "", "public webhook `URL` to claim with setWebhook on start (empty: leave the webhook alone)")
	fs.StringVar(&o.takeoverFrom, "takeover-from", "", "take the webhook over from this `host` (\"none\" for a polling bot)")
	fs.DurationVar(&o.webhookCheck, "webhook-check-interval", defaultWebhookCheckEvery, "how often to check that the webhook still points here (`duration`, 0 off)")
	fs.IntVar(&o.maxConnections, "max-connections", 0, "setWebhook max_connections, 1-100 (0: Telegram's default)")
	fs.StringVar(&o.allowedUpdates, "allowed-updates", "", "comma-separated update `types` to receive (empty: Telegram's default)")
	fs.StringVar(&o.forwardURL, "forward", "", "the bot's endpoint `URL` updates are POSTed to (required)")
	fs.StringVar(&o.exhaustionURL, "exhaustion-forward", "", "endpoint `URL` exhaustions are POSTed to (empty: keep them for 'tgrelay updates')")
	fs.DurationVar(&o.forwardTimeout, "forward-timeout", 0, "bound of one forward (`duration`; default 30s or half the lease, whichever is less)")
	fs.Var(&o.forwardHeader, "forward-header", "extra `header` \"Name: value\" sent to the endpoints (repeatable)")
	fs.IntVar(&o.maxAttempts, "max-attempts", intake.DefaultMaxAttempts, "attempts per update before it becomes an exhaustion")
	fs.DurationVar(&o.lease, "lease", intake.DefaultLeaseDuration, "lease of one attempt (`duration`), renewed every quarter")
	fs.DurationVar(&o.backoffBase, "backoff-base", defaultBackoffBase, "delay before the first retry (`duration`); x4 per attempt, capped at 15m")
	fs.IntVar(&o.concurrency, "concurrency", intake.DefaultMaxConcurrent, "forwards running at once (different chats; one chat is in order)")
	fs.DurationVar(&o.sweepInterval, "sweep-interval", intake.DefaultSweepInterval, "how often due retries and others' leftovers are picked up (`duration`)")
	fs.DurationVar(&o.pendingGrace, "pending-grace", intake.DefaultPendingGrace, "how long an update recorded by another process is left to it (`duration`)")
	fs.DurationVar(&o.retention, "retention", intake.DefaultRetention, "how long settled updates are kept to refuse re-deliveries (`duration`)")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", defaultDrainTimeout, "on SIGINT/SIGTERM, how long running forwards may finish (`duration`)")
	fs.StringVar(&o.adminListen, "admin-listen", "", "`address` for /metrics, /healthz and /readyz (empty: off)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log `format`: text or json")
	fs.StringVar(&o.logLevel, "log-level", "info", "log `level`: debug, info, warn or error")
	fs.VisitAll(func(f *flag.Flag) { f.Usage += " [env " + envName(f.Name) + "]" })
	return o
}

// envName is the environment variable of a serve flag.
func envName(flagName string) string {
	if flagName == "secret" {
		return "TGRELAY_WEBHOOK_SECRET"
	}
	return "TGRELAY_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not given on the command line from its
// environment variable, when that is set and not empty.
func applyEnv(fs *flag.FlagSet, lookup func(string) (string, bool)) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		v, ok := lookup(envName(f.Name))
		if !ok || v == "" {
			return
		}
		if serr := fs.Set(f.Name, v); serr != nil {
			msg := fmt.Sprintf("%s: invalid value for --%s", envName(f.Name), f.Name)
			if f.Name != "token" && f.Name != "secret" {
				msg += ": " + serr.Error()
			}
			err = &usageError{msg: msg, hint: "Run 'tgrelay help serve' for usage."}
		}
	})
	return err
}

// validate checks the options that do not need I/O, naming the flag.
func (o *serveOptions) validate() error {
	bad := func(format string, args ...any) error {
		return &usageError{msg: fmt.Sprintf(format, args...), hint: "Run 'tgrelay help serve' for usage."}
	}
	switch {
	case o.forwardURL == "":
		return bad("--forward is required: the URL of the bot's endpoint that receives each update")
	case o.maxAttempts < 1 || o.maxAttempts > intake.MaxMaxAttempts:
		return bad("--max-attempts %d: want 1 to %d", o.maxAttempts, intake.MaxMaxAttempts)
	case o.concurrency < 1 || o.concurrency > intake.MaxMaxConcurrent:
		return bad("--concurrency %d: want 1 to %d", o.concurrency, intake.MaxMaxConcurrent)
	case o.lease < intake.MinLeaseDuration || o.lease > intake.MaxLeaseDuration:
		return bad("--lease %v: want %v to %v", o.lease, intake.MinLeaseDuration, intake.MaxLeaseDuration)
	case o.backoffBase < time.Millisecond || o.backoffBase > maxBackoffBase:
		return bad("--backoff-base %v: want 1ms to %v", o.backoffBase, maxBackoffBase)
	case o.sweepInterval < intake.MinSweepInterval || o.sweepInterval > intake.MaxSweepInterval:
		return bad("--sweep-interval %v: want %v to %v", o.sweepInterval, intake.MinSweepInterval, intake.MaxSweepInterval)
	case o.pendingGrace <= 0 || o.pendingGrace > intake.MaxPendingGrace:
		return bad("--pending-grace %v: want above 0, up to %v", o.pendingGrace, intake.MaxPendingGrace)
	case o.retention <= 0 || o.retention > intake.MaxRetention:
		return bad("--retention %v: want above 0, up to %v", o.retention, intake.MaxRetention)
	case o.drainTimeout <= 0 || o.drainTimeout > maxDrainTimeout:
		return bad("--drain-timeout %v: want above 0, up to %v", o.drainTimeout, maxDrainTimeout)
	case o.forwardTimeout < 0 || o.forwardTimeout > forward.MaxTimeout:
		return bad("--forward-timeout %v: want 0 (default) to %v", o.forwardTimeout, forward.MaxTimeout)
	case o.forwardTimeout != 0 && o.forwardTimeout >= o.lease:
		return bad("--forward-timeout %v must be below --lease %v, or a forward could outlive its lease", o.forwardTimeout, o.lease)
	case o.maxConnections < 0 || o.maxConnections > 100:
		return bad("--max-connections %d: want 1 to 100 (0: Telegram's default)", o.maxConnections)
	case o.webhookCheck < 0 || (o.webhookCheck > 0 && o.webhookCheck < minWebhookCheckEvery):
		return bad("--webhook-check-interval %v: want 0 (off) or at least %v", o.webhookCheck, minWebhookCheckEvery)
	}
	if err := checkHTTPURL(o.forwardURL); err != nil {
		return bad("--forward: %v", err)
	}
	if o.exhaustionURL != "" {
		if err := checkHTTPURL(o.exhaustionURL); err != nil {
			return bad("--exhaustion-forward: %v", err)
		}
	}
	if o.apiRoot != "" {
		if err := checkHTTPURL(o.apiRoot); err != nil {
			return bad("--api-root: %v", err)
		}
	}
	if o.poll {
		if o.pollTimeout < time.Second || o.pollTimeout > poll.MaxTimeout || o.pollTimeout%time.Second != 0 {
			return bad("--poll-timeout %v: want whole seconds from 1s to %v", o.pollTimeout, poll.MaxTimeout)
		}
		if o.publicURL != "" {
			return bad("--public-url applies to the webhook, not to --poll")
		}
		return nil
	}
	if !strings.HasPrefix(o.path, "/") {
		return bad("--path %q must start with /", o.path)
	}
	if o.secret != "" {
		if _, err := webhook.OwnerTag(o.secret); err != nil {
			return bad("--secret: %v", err) // ErrBadSecret never quotes the value
		}
	} else if o.token != "" {
		return bad("--secret (or TGRELAY_WEBHOOK_SECRET) is required for the webhook: Telegram sends it with every update")
	}
	if o.publicURL != "" {
		if err := checkHTTPURL(o.publicURL); err != nil {
			return bad("--public-url: %v", err)
		}
	}
	return nil
}

// checkHTTPURL accepts an absolute http or https URL. Its error never
// quotes the URL, which may carry a credential.
func checkHTTPURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("want an absolute http:// or https:// URL")
	}
	return nil
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

// retryFunc is serve's retry policy: every failure the endpoint did not
// decide itself is retried after base × 4^(attempt−1), capped at
// maxRetryBackoff.
func retryFunc(base time.Duration) func(error, int) (time.Duration, bool) {
	return func(_ error, attempt int) (time.Duration, bool) {
		d := base
		for i := 1; i < attempt; i++ {
			d *= 4
			if d >= maxRetryBackoff {
				return maxRetryBackoff, true
			}
		}
		return min(d, maxRetryBackoff), true
	}
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
	if err := o.validate(); err != nil {
		return err
	}
	red := &botapi.Redactor{}
	red.Add(o.token, o.secret)
	log, err := newLogger(stderr, o.logFormat, o.logLevel, red)
	if err != nil {
		return err
	}
	s := &server{o: o, log: log, red: red, stdout: stdout}
	defer s.cleanup()
	if err := s.start(ctx); err != nil {
		return err
	}
	return s.wait(ctx)
}

// server is one running `tgrelay serve`.
type server struct {
	o      *serveOptions
	log    *slog.Logger
	red    *botapi.Redactor
	stdout io.Writer

	sandbox *telegramtest.Server
	httpc   *http.Client
	bot     *botapi.Client
	store   *openedStore
	metrics *relayMetrics
	runner  *intake.Runner

	hookLn, adminLn   net.Listener
	hookSrv, adminSrv *http.Server
	ready             atomic.Bool

	bg         sync.WaitGroup
	bgCancel   context.CancelFunc
	stopPoll   func() // cancels the poller and waits for it
	runnerUp   bool
	fatal      chan error // the first error that must end serve
	shutdownMu sync.Once
}

// cleanup shuts everything down in order, once: stop receiving (webhook
// server, poller), drain the runner within --drain-timeout (then it cancels
// its handlers), stop the background loops and the admin server, and close
// the store, the Bot API client and the sandbox.
func (s *server) cleanup() {
	s.shutdownMu.Do(func() {
		dctx, cancel := context.WithTimeout(context.Background(), s.o.drainTimeout)
		defer cancel()
		if s.hookSrv != nil {
			if err := s.hookSrv.Shutdown(dctx); err != nil {
				s.log.Warn("serve: webhook requests still running at the drain deadline", "err", err)
				_ = s.hookSrv.Close()
			}
		}
		if s.stopPoll != nil {
			s.stopPoll()
		}
		if s.runnerUp {
			if err := s.runner.Close(dctx); err != nil {
				s.log.Warn("serve: drain deadline passed; running forwards were cancelled and will be retried", "err", err)
				// Give the cancelled handlers a moment to record their
				// outcome before the store closes; whatever is left is
				// retried after its lease.
				ictx, icancel := context.WithTimeout(context.Background(), cancelGrace)
				_ = s.runner.Idle(ictx)
				icancel()
			}
		}
		if s.bgCancel != nil {
			s.bgCancel()
		}
		if s.adminSrv != nil {
			_ = s.adminSrv.Close()
		}
		s.bg.Wait()
		if s.store != nil {
			s.store.Close()
		}
		if s.httpc != nil {
			s.httpc.CloseIdleConnections()
		}
		if s.sandbox != nil {
			s.sandbox.Close()
		}
	})
}

func (s *server) fail(err error) {
	select {
	case s.fatal <- err:
	default:
	}
}

func (s *server) start(ctx context.Context) error {
	o := s.o
	s.fatal = make(chan error, 1)
	bgCtx, cancel := context.WithCancel(context.Background())
	s.bgCancel = cancel

	if o.token == "" {
		if err := s.startSandbox(); err != nil {
			return err
		}
	}
	if err := s.openBotAPI(); err != nil {
		return err
	}
	sctx, scancel := context.WithTimeout(ctx, startTimeout)
	defer scancel()
	st, err := openStore(sctx, o.db, o.table, o.noCreate)
	if err != nil {
		return err
	}
	s.store = st
	s.metrics = newRelayMetrics(st.Stats)
	if err := s.newRunner(); err != nil {
		return err
	}
	if o.adminListen != "" {
		if err := s.startAdmin(); err != nil {
			return err
		}
	}
	if err := s.runner.Start(sctx); err != nil {
		return fmt.Errorf("start the runner (first sweep of the store): %w", err)
	}
	s.runnerUp = true
	if o.poll {
		if err := s.startPolling(bgCtx); err != nil {
			return err
		}
	} else if err := s.startWebhook(sctx, bgCtx); err != nil {
		return err
	}
	s.ready.Store(true)
	return nil
}

func (s *server) startSandbox() error {
	o := s.o
	l, err := net.Listen("tcp", o.sandboxListen)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("--sandbox-listen: %v", err)}
	}
	log := s.log
	s.sandbox = telegramtest.NewUnstartedServerOn(telegramtest.Config{
		ControlAPI: true,
		Logf:       func(format string, args ...any) { log.Info("sandbox: " + fmt.Sprintf(format, args...)) },
	}, l)
	s.sandbox.Start()
	o.token, o.apiRoot = s.sandbox.Token, s.sandbox.URL
	if !o.poll {
		if o.secret == "" {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			o.secret = hex.EncodeToString(b)
		}
		if o.takeoverFrom == "" {
			o.takeoverFrom = webhook.HostNone // a fresh sandbox has no webhook
		}
	}
	s.red.Add(o.token, o.secret)
	u := s.sandbox.URL
	fmt.Fprintf(s.stdout, `No --token: running against a built-in Telegram sandbox (a fake Bot API).
  Bot API:     %[1]s
  Token:       %[2]s
  Control API: %[1]s%[3]s
Make a simulated user write to the bot:
  curl -s -X POST %[1]s%[3]susers -d '{"first_name":"Ada"}'            # -> {"id": ID, ...}
  curl -s -X POST %[1]s%[3]schats -d '{"type":"private","user_id":ID}'
  curl -s -X POST %[1]s%[3]ssend  -d '{"chat_id":ID,"user_id":ID,"text":"hello"}'
`, u, s.sandbox.Token, telegramtest.ControlPrefix)
	return nil
}

func (s *server) openBotAPI() error {
	hc, err := transport.NewClient(transport.Config{MaxResponseBytes: botAPIMaxResponseBytes})
	if err != nil {
		return fmt.Errorf("transport: %w", err)
	}
	s.httpc = hc
	bot, err := botapi.New(s.o.token, botapi.Config{APIRoot: s.o.apiRoot, HTTPClient: hc, MaxResponseBytes: botAPIMaxResponseBytes})
	if errors.Is(err, botapi.ErrInvalidToken) {
		return &usageError{msg: "--token is not a usable bot token (want <bot id>:<secret> as BotFather gives it)"}
	}
	if err != nil {
		return fmt.Errorf("bot API client: %w", err)
	}
	s.bot = bot
	return nil
}

func (s *server) newRunner() error {
	o := s.o
	ft := o.forwardTimeout
	if ft == 0 {
		ft = min(forward.DefaultTimeout, o.lease/2)
	}
	fwd, err := forward.New(forward.Config{URL: o.forwardURL, ExhaustionURL: o.exhaustionURL, Timeout: ft, Header: o.forwardHeader.h})
	if err != nil {
		return fmt.Errorf("forward: %w", err)
	}
	// Without --exhaustion-forward, exhaustions stay unacknowledged in the
	// store for 'tgrelay updates exhausted|ack|requeue'.
	var exh func(context.Context, intake.Exhaustion) error
	if o.exhaustionURL != "" {
		exh = fwd.HandleExhaustion
	}
	r, err := intake.New(intake.Config{
		Store:             s.store,
		AttemptHandler:    s.metrics.timedForward(fwd.Handle),
		ExhaustionHandler: exh,
		KeepExhaustions:   true,
		RetryFunc:         retryFunc(o.backoffBase),
		MaxAttempts:       o.maxAttempts,
		LeaseDuration:     o.lease,
		MaxConcurrent:     o.concurrency,
		SweepInterval:     o.sweepInterval,
		PendingGrace:      o.pendingGrace,
		Retention:         o.retention,
		Observer:          s.metrics.observer(),
		Logger:            s.log,
	})
	if err != nil {
		return fmt.Errorf("intake runner: %w", err)
	}
	s.runner = r
	return nil
}

func newHTTPServer(h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: serveReadHeaderTimeout,
		ReadTimeout:       serveReadTimeout,
		WriteTimeout:      serveWriteTimeout,
		IdleTimeout:       serveIdleTimeout,
		MaxHeaderBytes:    serveMaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

func (s *server) serveHTTP(srv *http.Server, l net.Listener, what string) {
	s.bg.Go(func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.fail(fmt.Errorf("%s server: %w", what, err))
		}
	})
}

func (s *server) startAdmin() error {
	l, err := net.Listen("tcp", s.o.adminListen)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("--admin-listen: %v", err)}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /readyz", s.readyz)
	s.adminLn, s.adminSrv = l, newHTTPServer(mux, s.log)
	s.serveHTTP(s.adminSrv, l, "admin")
	return nil
}

// readyz answers 200 while the runner is started and the store answers.
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if !s.ready.Load() {
		http.Error(w, "not ready: starting or stopping", http.StatusServiceUnavailable)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), statsTimeout)
	defer cancel()
	if _, err := s.store.Stats(ctx); err != nil {
		http.Error(w, "not ready: store unreachable", http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ready\n")
}

func (s *server) startPolling(bgCtx context.Context) error {
	m := s.metrics
	p, err := poll.New(poll.Config{
		Caller:         s.bot,
		AcceptFunc:     s.runner.Accept,
		Timeout:        s.o.pollTimeout,
		AllowedUpdates: s.o.allowed(),
		Logger:         s.log,
		Observer: poll.Observer{
			BatchFunc: func(int, int64) { m.pollBatches.Inc() },
			AcceptErrorFunc: func(int64, error) {
				m.rejected.WithLabelValues(rejectStoreError).Inc()
			},
			ErrorFunc: func(error, time.Duration) { m.pollErrors.Inc() },
		},
	})
	if err != nil {
		return fmt.Errorf("poll: %w", err)
	}
	pctx, cancel := context.WithCancel(bgCtx)
	done := make(chan struct{})
	s.bg.Go(func() {
		defer close(done)
		if err := p.Run(pctx); err != nil {
			if errors.Is(err, poll.ErrWebhookActive) {
				err = fmt.Errorf("%w (run 'tgrelay webhook delete', or serve without --poll)", err)
			}
			s.fail(err)
		}
	})
	s.stopPoll = func() { cancel(); <-done }
	s.log.Info("serve: receiving by long polling", "store", s.store.kind, "admin", s.adminURL())
	return nil
}

func (s *server) adminURL() string {
	if s.adminLn == nil {
		return ""
	}
	return "http://" + s.adminLn.Addr().String()
}

func (s *server) startWebhook(ctx, bgCtx context.Context) error {
	o := s.o
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: s.runner, Secret: o.secret, Logger: s.log})
	if err != nil {
		return fmt.Errorf("webhook handler: %w", err)
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return &usageError{msg: fmt.Sprintf("--listen: %v", err)}
	}
	mux := http.NewServeMux()
	mux.Handle(o.path, s.metrics.wrapWebhook(wh))
	s.hookLn, s.hookSrv = l, newHTTPServer(mux, s.log)
	s.serveHTTP(s.hookSrv, l, "webhook")
	local := "http://" + l.Addr().String() + o.path
	if o.publicURL == "" && s.sandbox != nil {
		o.publicURL = local
	}
	if o.publicURL != "" {
		res, err := webhook.Claim(ctx, s.bot, webhook.ClaimConfig{
			URL: o.publicURL, Secret: o.secret, TakeoverFrom: o.takeoverFrom,
			AllowedUpdates: o.allowed(), MaxConnections: o.maxConnections,
		})
		var ce *webhook.ClaimError
		if errors.As(err, &ce) {
			return &usageError{msg: fmt.Sprintf("webhook not set (%s): %v", ce.Reason, err),
				hint: "To take it over, pass --takeover-from " + ce.OwnerHost + " (after stopping whatever uses it)."}
		}
		if err != nil {
			return fmt.Errorf("claim the webhook: %w", err)
		}
		attrs := []any{"owner_host", hostOf(res.URL), "pending_updates", res.PendingUpdates}
		if res.TakenFrom != "" {
			attrs = append(attrs, "taken_from", res.TakenFrom)
		}
		s.log.Info("serve: webhook set", attrs...)
		s.metrics.registerWebhookOwned()
		s.metrics.webhookOwned.Set(1)
		if o.webhookCheck > 0 {
			s.bg.Go(func() { s.checkWebhook(bgCtx) })
		}
	} else {
		s.log.Warn("serve: no --public-url, so the webhook is left as it is; set it with 'tgrelay webhook set'")
	}
	s.log.Info("serve: receiving by webhook", "webhook", local, "store", s.store.kind, "admin", s.adminURL())
	return nil
}

// checkWebhook checks every --webhook-check-interval that the webhook still
// points here, and warns when it moved.
func (s *server) checkWebhook(ctx context.Context) {
	t := time.NewTicker(s.o.webhookCheck)
	defer t.Stop()
	lastOwner := "" // the foreign owner last warned about; "" while owned
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, s.o.webhookCheck)
		st, err := webhook.Check(cctx, s.bot, s.o.publicURL, s.o.secret)
		cancel()
		switch {
		case err != nil:
			if ctx.Err() == nil {
				s.log.Warn("serve: webhook check failed", "err", err)
			}
		case !st.Owned:
			s.metrics.webhookOwned.Set(0)
			if st.OwnerHost == lastOwner {
				continue // warned already; the gauge stays 0
			}
			lastOwner = st.OwnerHost
			s.log.Warn("serve: the webhook moved away from this relay; updates now go elsewhere",
				"owner_host", st.OwnerHost, "hint", "restart with --takeover-from "+st.OwnerHost+" to take it back")
		default:
			if lastOwner != "" {
				s.log.Info("serve: the webhook points here again")
				lastOwner = ""
			}
			s.metrics.webhookOwned.Set(1)
			if st.LastError != "" {
				s.log.Info("serve: webhook owned; Telegram reports a delivery error", "last_error", st.LastError, "at", st.LastErrorAt)
			}
		}
	}
}

// hostOf returns the host of a URL (never its path or query).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return webhook.HostUnknown
	}
	return u.Host
}

// wait blocks until ctx ends or a component fails, then shuts down: stop
// receiving, drain the handlers for --drain-timeout, then cancel them.
func (s *server) wait(ctx context.Context) error {
	var err error
	select {
	case <-ctx.Done():
		s.log.Info("serve: stopping: no new updates; draining", "drain_timeout", s.o.drainTimeout)
	case err = <-s.fatal:
		s.log.Error("serve: stopping after an error", "err", err)
	}
	s.ready.Store(false)
	start := time.Now()
	s.cleanup()
	s.log.Info("serve: stopped", "took", time.Since(start).Round(time.Millisecond))
	return err
}
