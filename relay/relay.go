package relay

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/dashboard"
	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/hookowner"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/poll"
	"github.com/tgrelay/tgrelay/transport"
)

// Internal bounds of a relay.
const (
	// cancelGrace bounds the wait, after the drain deadline cancelled the
	// handlers, for them to record their outcome before Stop returns.
	cancelGrace = 2 * time.Second
	// startTimeout bounds the first sweep and the webhook claim at start.
	startTimeout = time.Minute
	// readyTimeout bounds the store query of a readiness probe.
	readyTimeout = 5 * time.Second
	// Bounds of the webhook and admin HTTP servers.
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// ErrStarted is returned by [Relay.Start] and [Relay.Run] on a relay
// that was started or stopped before: a relay runs once.
var ErrStarted = errors.New("relay: already started")

// Relay is the sidecar as a library: it receives a bot's updates (webhook
// or long polling), records each one durably before Telegram is answered,
// and forwards it to the bot's HTTP endpoint, at least once, one at a time
// per chat within the process ([IntakeConfig.ChatOrder] strict: across every relay
// sharing the store), retrying with backoff. Create it with [New]; run it with
// [Relay.Run], or [Relay.Start] and [Relay.Close]. Its methods are safe for
// concurrent use.
type Relay struct {
	cfg       Config
	caps      storeCaps // cfg.Store's optional capabilities, detected once by New
	log       *slog.Logger
	red       *botapi.Redactor // masks cfg.secrets()
	observers []func(Event)    // the configured observers and the dashboard's, each called under safeObserve
	now       func() time.Time
	bounds    serverBounds // of every HTTP server the relay runs
	bot       *botapi.Client
	ownBC     *http.Client // the Bot API client New made, closed on stop
	fwd       *forward.Forwarder
	gw        *gateway.Gateway     // nil without Config.Gateway
	gwBase    *transport.Transport // the gateway's transport, closed on stop
	gwPublic  string               // the gateway's base URL for the app
	decl      *decliner            // nil without the gateway (decline.go)
	tr        *tracing             // Config.TracerProvider's tracer (trace.go)

	runner   *intake.Runner
	adminMux *http.ServeMux
	dash     *dashboard.Handler  // nil without Config.Dashboard
	rec      *dashboard.Recorder // the dashboard's figures

	startOnce atomic.Bool
	ready     atomic.Bool
	fatal     chan error // the first error that must end the relay

	// Set by Start, read by Stop and the status methods.
	mu          sync.Mutex
	servers     []*listener // stopped in reverse order of start
	hook, admin *listener
	gwListener  *listener
	gwBound     string // "http://" and gwListener's address: the gateway's base URL without a public one
	runnerUp    bool
	stopPoll    func() // cancels the poller and waits for it
	bgCancel    context.CancelFunc
	bg          sync.WaitGroup
	app         AppStatus     // the app's answers (app_auth.go)
	stopping    chan struct{} // closed when Stop begins: ends the holds
	webhook     hookowner.Status
	stopOnce    sync.Once
	stopErr     error
}

// listener is one HTTP server of the relay.
type listener struct {
	name string // for errors and logs: "webhook", "admin"
	ln   net.Listener
	srv  *http.Server
}

// serverBounds are the time bounds of the relay's HTTP servers besides
// their write timeout: the constants above, unless a test shortens them to
// see each one end a connection.
type serverBounds struct {
	readHeader, read, idle time.Duration
}

// New validates cfg and assembles a relay; it does no I/O and starts
// nothing. An invalid field is a *[ConfigError] naming it.
func New(cfg Config) (*Relay, error) {
	cfg, err := cfg.fill()
	if err != nil {
		return nil, err
	}
	r := &Relay{cfg: cfg, now: time.Now, fatal: make(chan error, 1), stopping: make(chan struct{}),
		bounds: serverBounds{readHeader: readHeaderTimeout, read: readTimeout, idle: idleTimeout}}
	r.tr = newTracing(cfg.TracerProvider, cfg.Token, cfg.StoreName)
	r.caps = detectCaps(cfg.Store)
	var h slog.Handler = slog.DiscardHandler
	if cfg.Logger != nil {
		h = cfg.Logger.Handler()
	}
	// Every secret the relay knows is masked in every line it logs and
	// every error text the runner stores (see secrets).
	r.red = &botapi.Redactor{}
	r.red.Add(cfg.secrets()...)
	h = rateLimited(r.red.Handler(h), r.now)
	r.log = slog.New(h)
	// The runner's per-attempt Info lines go to Debug: logEvent says the
	// same at Warn and Error.
	runnerLog := slog.New(demoteInfo{h})
	r.observers = observerFuncs(cfg.Observer)
	own := cfg.BotTransport
	own.MaxResponseBytes = max(own.MaxResponseBytes, BotAPIMaxResponseBytes)
	hc, err := transport.NewClient(own)
	if err != nil {
		return nil, nested("BotTransport", err, nil)
	}
	r.ownBC = hc
	r.bot, err = botapi.New(cfg.Token, botapi.Config{APIRoot: cfg.APIRoot, HTTPClient: hc, MaxResponseBytes: BotAPIMaxResponseBytes})
	if errors.Is(err, botapi.ErrInvalidToken) {
		return nil, badField("Token", "is not a bot token: want <bot id>:<secret> as BotFather gives it")
	}
	if err != nil {
		return nil, fmt.Errorf("relay: Bot API client: %w", err)
	}
	if err := r.newGateway(); err != nil {
		return nil, err
	}
	fc := cfg.Forward
	fc.UnactedReplyFunc = r.unactedReply(cfg.Forward.UnactedReplyFunc)
	if r.gw != nil {
		fc.Replier = r.gw
		fc.ReplyFunc = r.reply(cfg.Forward.ReplyFunc)
		fc.APIRoot, fc.APIRootFunc = "", r.GatewayURL // the bound address, on port 0
	}
	if r.gw != nil {
		r.decl = newDecliner(cfg.Decline, r.gw, r.log, r.emit)
		r.decl.receivedAt = r.receivedAt
		// The runner's late call hands a query the app left unanswered
		// to the same decliner that guards each attempt; the gateway's
		// one answer per query makes a second decline a replay.
		if r.cfg.Deadlines.Decliner == nil {
			r.cfg.Deadlines.Decliner = r.decl
		}
	}
	r.fwd, err = forward.New(fc)
	if err != nil {
		return nil, nested("Forward", err, nil)
	}
	// Without an exhaustion endpoint, exhaustions stay unacknowledged in
	// the store for operator tooling ('tgrelay updates exhausted|ack|requeue').
	var exh func(context.Context, intake.Exhaustion) error
	if cfg.Forward.ExhaustionURL != "" {
		exh = r.fwd.HandleExhaustion
	}
	ic := cfg.intakeConfig()
	ic.AttemptHandler, ic.ExhaustionHandler = r.forwardGuarded, exh
	ic.Deadlines = r.intakeDeadlines()
	ic.Observer, ic.Logger, ic.Redactor = r.intakeObserver(), runnerLog, r.red
	r.runner, err = intake.New(ic)
	if err != nil {
		return nil, intakeError(err)
	}
	r.adminMux = http.NewServeMux()
	r.adminMux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	r.adminMux.HandleFunc("GET /readyz", r.serveReady)
	if err := r.newDashboard(); err != nil {
		return nil, err
	}
	if r.rec != nil {
		r.observers = observerFuncs(cfg.Observer, Observer{EventFunc: dashboardObserver{r.rec}.Observe})
	}
	return r, nil
}

// unactedReply logs and reports a webhook reply nothing performed, then
// passes it to next (the caller's own func, if any): never silent. Its
// method is the app's own text, so it is masked first, as the gateway
// does (replyMethod).
func (r *Relay) unactedReply(next func(forward.UnactedReply)) func(forward.UnactedReply) {
	return func(u forward.UnactedReply) {
		u.Method = r.replyMethod(u.Method)
		r.emit(Event{Kind: KindUnactedReply, ID: intake.Identity{UpdateID: u.UpdateID, Attempt: u.Attempt},
			Reason: u.Method, Err: textError(u.Reason)})
		r.log.Warn("relay: the app answered with a Bot API call in the response body that was not performed",
			"update_id", u.UpdateID, "attempt", u.Attempt, "method", u.Method, "bytes", u.Bytes, "reason", u.Reason)
		if next != nil {
			next(u)
		}
	}
}

// replyMethod is the method of an app's webhook reply as the relay shows
// it, as the gateway shows a call's: "invalid" when it is no Bot API
// method name (it may carry anything, the bot token included) or holds a
// secret the relay masks.
func (r *Relay) replyMethod(m string) string {
	if m == "" {
		return m
	}
	return botapi.ShownMethod(m, r.red.Redact)
}

// timedForward forwards one attempt and reports its duration.
func (r *Relay) timedForward(ctx context.Context, u intake.Update, a intake.Attempt) (err error) {
	start := r.now()
	if r.tr.on() {
		var span trace.Span
		ctx, span = r.tr.startAttempt(ctx, a)
		defer func() { endAttempt(span, err, r.red.Redact) }()
	}
	err = r.fwd.Handle(ctx, u, a)
	r.emit(Event{Kind: KindForwarded, ID: a.Identity, Duration: r.now().Sub(start), Err: err})
	return err
}

// HandleAdmin mounts handler at pattern (an [http.ServeMux] pattern) on
// the admin listener, beside /healthz and /readyz; call it before Start.
// This is where a metrics endpoint plugs in. With the dashboard enabled,
// handler sits behind its door ([dashboard.Handler.Protect]): with
// Dashboard.AdminToken it needs the token (a bearer header, or the
// dashboard's session), without one a loopback request. /healthz and
// /readyz stay open, for probes that carry no credential: they say only
// whether the process is up and ready.
func (r *Relay) HandleAdmin(pattern string, handler http.Handler) {
	if r.dash != nil {
		handler = r.dash.Protect(handler)
	}
	r.adminMux.Handle(pattern, handler)
}

// AdminHandler returns the admin handler (/healthz, /readyz and what
// HandleAdmin mounted), for serving on a listener of the caller's own.
func (r *Relay) AdminHandler() http.Handler { return r.adminMux }

// Run starts the relay, waits until ctx ends or a part of it fails, then
// closes it in order (see [Relay.Close]), draining for
// Config.DrainTimeout. It returns the failure, or nil after ctx ended
// (also when the drain was cut short: the cancelled forwards are retried).
func (r *Relay) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	var err error
	select {
	case <-ctx.Done():
		r.log.Info("relay: stopping: no new updates; draining", "drain_timeout", r.cfg.DrainTimeout)
	case err = <-r.fatal:
		r.log.Error("relay: stopping after an error", "err", err)
	}
	start := r.now()
	// A drain cut short at DrainTimeout is logged by Close, and the
	// cancelled forwards are retried: the run itself ended as asked.
	_ = r.Close(context.Background())
	r.log.Info("relay: stopped", "took", r.now().Sub(start).Round(time.Millisecond))
	return err
}

// Failed returns a channel that receives the first failure that must end
// the relay (a listener that stopped serving, polling refused because a
// webhook is set). [Relay.Run] waits on it; a caller of Start does too.
func (r *Relay) Failed() <-chan error { return r.fatal }

func (r *Relay) fail(err error) {
	select {
	case r.fatal <- err:
	default:
	}
}

// Start starts the relay and returns once it receives: the admin listener
// serves, the runner has swept the store once, and the webhook listens
// (and is claimed when Config.PublicURL is set) or polling runs. On error
// everything started is stopped again. ctx bounds the start only.
func (r *Relay) Start(ctx context.Context) error {
	if r.startOnce.Swap(true) {
		return ErrStarted
	}
	if err := r.start(ctx); err != nil {
		_ = r.Close(context.Background())
		return err
	}
	r.ready.Store(true)
	return nil
}

func (r *Relay) start(ctx context.Context) error {
	for _, kind := range r.cfg.AllowedUpdates {
		if !intake.KnownKind(kind) {
			// Telegram ignores a name it does not know, so a misspelt
			// type would silently stop its updates from arriving.
			r.log.Warn("relay: an allowed update type is not one tgrelay knows; Telegram ignores names it does not know, so check its spelling",
				"type", kind)
		}
	}
	if runtime.GOMAXPROCS(0) == 1 {
		// See sqlitestore's package doc: with one P, a store write
		// waiting for the disk stops everything else, so no group
		// commit forms (3.8–4.4× slower on SQLite in bench relay).
		r.log.Warn("relay: Go runs on one P (GOMAXPROCS=1): while a SQLite store write waits for the disk nothing else runs, the webhook included; set GOMAXPROCS=2, as tgrelay serve does on one CPU")
	}
	bgCtx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.bgCancel = cancel
	r.mu.Unlock()

	if r.cfg.AdminListen != "" || r.cfg.AdminListener != nil {
		l, err := r.serve("admin", "AdminListen", r.cfg.AdminListen, r.cfg.AdminListener, r.adminMux)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.admin = l
		r.mu.Unlock()
	}
	if err := r.startGateway(); err != nil {
		return err
	}
	sctx, scancel := context.WithTimeout(ctx, startTimeout)
	defer scancel()
	if err := r.runner.Start(sctx); err != nil {
		return fmt.Errorf("relay: start the runner (first sweep of the store): %w", err)
	}
	r.mu.Lock()
	r.runnerUp = true
	r.mu.Unlock()
	if r.cfg.Poll {
		return r.startPolling(bgCtx)
	}
	return r.startWebhook(sctx, bgCtx)
}

// serve listens (unless l is given) and serves h in the background.
func (r *Relay) serve(name, field, addr string, l net.Listener, h http.Handler) (*listener, error) {
	return r.serveTimeouts(name, field, addr, l, h, writeTimeout)
}

// serveTimeouts is serve with the server's write timeout.
func (r *Relay) serveTimeouts(name, field, addr string, l net.Listener, h http.Handler, write time.Duration) (*listener, error) {
	if l == nil {
		var err error
		if l, err = net.Listen("tcp", addr); err != nil {
			return nil, &ConfigError{Pkg: "relay", Field: field, Err: fmt.Errorf("is not available: %w", err)}
		}
	}
	s := &listener{name: name, ln: l, srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: r.bounds.readHeader,
		ReadTimeout:       r.bounds.read,
		WriteTimeout:      write,
		IdleTimeout:       r.bounds.idle,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(r.log.Handler(), slog.LevelWarn),
	}}
	r.mu.Lock()
	r.servers = append(r.servers, s)
	r.mu.Unlock()
	r.bg.Go(func() {
		if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.fail(fmt.Errorf("relay: %s server: %w", name, err))
		}
	})
	return s, nil
}

func (r *Relay) startPolling(bgCtx context.Context) error {
	p, err := poll.New(poll.Config{
		Caller:         r.bot,
		AcceptFunc:     r.traceAccept,
		Timeout:        r.cfg.PollTimeout,
		AllowedUpdates: r.cfg.AllowedUpdates,
		Logger:         r.log,
		Observer: poll.Observer{
			BatchFunc: func(n int, _ int64) { r.emit(Event{Kind: KindPollBatch, Count: n}) },
			AcceptErrorFunc: func(id int64, err error) {
				r.emit(Event{Kind: KindRejected, ID: intake.Identity{UpdateID: id}, Reason: RejectStoreError, Err: err})
			},
			ErrorFunc: func(err error, wait time.Duration) { r.emit(Event{Kind: KindPollError, Err: err, Duration: wait}) },
		},
	})
	if err != nil {
		return fmt.Errorf("relay: poll: %w", err)
	}
	pctx, cancel := context.WithCancel(bgCtx)
	done := make(chan struct{})
	r.bg.Go(func() {
		defer close(done)
		if err := p.Run(pctx); err != nil && pctx.Err() == nil {
			r.fail(fmt.Errorf("relay: %w", err))
		}
	})
	r.mu.Lock()
	r.stopPoll = func() { cancel(); <-done }
	r.mu.Unlock()
	r.log.Info("relay: receiving by long polling", "store", r.cfg.StoreName, "admin", r.AdminURL())
	return nil
}

func (r *Relay) startWebhook(ctx, bgCtx context.Context) error {
	c := r.cfg
	wh, err := intake.NewWebhook(intake.WebhookConfig{Runner: r.runner, Secret: c.Secret, Logger: r.log})
	if err != nil {
		return fmt.Errorf("relay: webhook handler: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle(c.Path, r.observeRejections(r.traceWebhook(wh)))
	ln := c.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", c.Listen); err != nil {
			return &ConfigError{Pkg: "relay", Field: "Listen", Err: fmt.Errorf("is not available: %w", err)}
		}
	}
	conns := webhookConns(c.MaxConnections)
	ln = newCapListener(ln, conns, func() {
		r.log.Warn("relay: the webhook holds its most connections at once; the next waits for one to end", "max", conns)
	})
	if c.TLSConfig != nil {
		ln = tls.NewListener(ln, c.TLSConfig)
	}
	l, err := r.serve("webhook", "Listen", c.Listen, ln, mux)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.hook = l
	r.mu.Unlock()
	if c.PublicURL == "" {
		r.log.Warn("relay: no public URL, so the webhook registration is left as it is")
	} else if err := r.claimWebhook(ctx, bgCtx); err != nil {
		return err
	}
	r.log.Info("relay: receiving by webhook", "webhook", r.WebhookURL(), "store", c.StoreName, "admin", r.AdminURL())
	return nil
}

// claimWebhook claims the webhook and starts the periodic check.
func (r *Relay) claimWebhook(ctx, bgCtx context.Context) error {
	c := r.cfg
	res, err := r.claim(ctx, c.TakeoverFrom)
	if err != nil {
		return err
	}
	host := hostOf(res.URL)
	attrs := []any{"owner_host", host, "pending_updates", res.PendingUpdates}
	if res.TakenFrom != "" {
		attrs = append(attrs, "taken_from", res.TakenFrom)
	}
	r.log.Info("relay: webhook set", attrs...)
	r.updateWebhook(func(w *hookowner.Status) {
		*w = hookowner.Status{Mode: hookowner.ModeWebhook, Owned: true, OwnerHost: host, CheckedAt: r.now()}
	})
	r.emit(Event{Kind: KindWebhookClaimed, Owned: true, Host: host})
	if c.NoWebhookCheck {
		return nil
	}
	w := &watcher{r: r}
	r.bg.Go(func() {
		_ = hookowner.Watch(bgCtx, r.bot, hookowner.WatchConfig{
			URL: c.PublicURL, Secret: c.Secret, Interval: c.WebhookCheckInterval, Func: w.checked,
		})
	})
	return nil
}

// claim sets the webhook under the ownership rules, uploading the
// certificate of Config.WebhookCertificateFunc.
func (r *Relay) claim(ctx context.Context, takeoverFrom string) (hookowner.ClaimResult, error) {
	c := r.cfg
	cc := hookowner.ClaimConfig{
		URL: c.PublicURL, Secret: c.Secret, TakeoverFrom: takeoverFrom,
		AllowedUpdates: c.AllowedUpdates, MaxConnections: c.MaxConnections,
	}
	if c.WebhookCertificateFunc != nil {
		cc.Certificate = c.WebhookCertificateFunc()
	}
	res, err := hookowner.Claim(ctx, r.bot, cc)
	if err != nil {
		return res, fmt.Errorf("relay: claim the webhook: %w", err)
	}
	return res, nil
}

// ReclaimWebhook sets the webhook again, with the certificate
// Config.WebhookCertificateFunc returns now: call it after rotating a
// self-signed certificate, so that Telegram trusts the new one. It never
// takes over: it succeeds only while the webhook is this relay's (a
// *[hookowner.ClaimError] otherwise). It is an error without
// Config.PublicURL or before [Relay.Start].
func (r *Relay) ReclaimWebhook(ctx context.Context) error {
	r.mu.Lock()
	claimed := r.webhook.Mode == hookowner.ModeWebhook
	r.mu.Unlock()
	if r.cfg.PublicURL == "" || !claimed {
		return errors.New("relay: ReclaimWebhook needs a webhook claimed on start (Config.PublicURL)")
	}
	res, err := r.claim(ctx, "")
	if err != nil {
		return err
	}
	r.log.Info("relay: webhook set again", "owner_host", hostOf(res.URL), "pending_updates", res.PendingUpdates)
	return nil
}

// watcher logs what the periodic webhook checks find: a failed check, a
// move away (once per foreign owner) and a return.
type watcher struct {
	r         *Relay
	lastOwner string // the foreign owner last warned about; "" while owned
}

func (w *watcher) checked(st hookowner.Status, err error) {
	r := w.r
	now := r.now()
	r.updateWebhook(func(w *hookowner.Status) {
		if err != nil {
			w.CheckedAt, w.CheckError = now, err.Error()
			return
		}
		*w = st
		w.Mode, w.CheckedAt = hookowner.ModeWebhook, now
	})
	r.emit(Event{Kind: KindWebhookChecked, Owned: err == nil && st.Owned, Host: st.OwnerHost, Err: err})
	switch {
	case err != nil:
		r.log.Warn("relay: webhook check failed", "err", err)
	case !st.Owned:
		if st.OwnerHost == w.lastOwner {
			return // warned already
		}
		w.lastOwner = st.OwnerHost
		r.log.Warn("relay: the webhook moved away from this relay; updates now go elsewhere",
			"owner_host", st.OwnerHost, "hint", "restart with --takeover-from "+st.OwnerHost+" to take it back")
	default:
		if w.lastOwner != "" {
			r.log.Info("relay: the webhook points here again")
			w.lastOwner = ""
		}
		if st.LastError != "" {
			r.log.Info("relay: webhook owned; Telegram reports a delivery error", "last_error", st.LastError, "at", st.LastErrorAt)
		}
	}
}

// hostOf returns the host of a URL (never its path or query).
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return hookowner.HostUnknown
	}
	return u.Host
}

// Close shuts the relay down in order, once: it stops receiving (webhook
// listener, poller), drains the runner until ctx ends or
// Config.DrainTimeout passes, whichever is first (then cancels the running
// forwards, which are retried later, and returns that deadline's error, as
// [intake.Runner.Close] does), stops the background loops and the admin
// listener. It returns when nothing of the relay uses the store any more;
// close the store after it. Close on a relay that never started only
// releases its Bot API client and returns nil; a closed relay does not
// start. Close is idempotent: a later call returns the first one's result.
func (r *Relay) Close(ctx context.Context) error {
	r.stopOnce.Do(func() { r.stopErr = r.stop(ctx) })
	return r.stopErr
}

func (r *Relay) stop(ctx context.Context) error {
	r.startOnce.Store(true) // a stopped relay does not start
	r.ready.Store(false)
	close(r.stopping) // the updates the app refused stop waiting for it
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.DrainTimeout)
	stop := context.AfterFunc(ctx, cancel) // ctx's end ends the drain too
	defer stop()
	defer cancel()
	r.mu.Lock()
	servers, stopPoll, runnerUp, bgCancel := r.servers, r.stopPoll, r.runnerUp, r.bgCancel
	r.mu.Unlock()
	// Stop receiving: every listener but the admin one, newest first.
	for i := len(servers) - 1; i >= 0; i-- {
		if s := servers[i]; s != r.adminListener() && s != r.gatewayListener() {
			if err := s.srv.Shutdown(dctx); err != nil {
				r.log.Warn("relay: "+s.name+" requests still running at the drain deadline", "err", err)
				_ = s.srv.Close()
			}
		}
	}
	if stopPoll != nil {
		stopPoll()
	}
	var err error
	if runnerUp {
		if cerr := r.runner.Close(dctx); cerr != nil {
			err = fmt.Errorf("relay: drain cut short: %w", cerr)
			r.log.Warn("relay: drain deadline passed; running forwards were cancelled and will be retried", "err", cerr)
			// Give the cancelled handlers a moment to record their
			// outcome; whatever is left is retried after its lease.
			ictx, icancel := context.WithTimeout(context.Background(), cancelGrace)
			_ = r.runner.Idle(ictx)
			icancel()
		}
	}
	r.stopGateway(dctx)
	if bgCancel != nil {
		bgCancel()
	}
	if r.dash != nil {
		r.dash.Close() // ends the dashboard's refresh streams
	}
	if admin := r.adminListener(); admin != nil {
		_ = admin.srv.Close()
	}
	r.bg.Wait()
	if r.ownBC != nil {
		r.ownBC.CloseIdleConnections()
	}
	r.fwd.CloseIdleConnections()
	return err
}

// Status is a read-only view of a relay, for status pages.
type Status struct {
	// Ready reports that the relay is started and not stopping.
	Ready bool
	// Store is Config.StoreName.
	Store string
	// WebhookURL is the local webhook URL ("" when polling or not yet
	// listening).
	WebhookURL string
	// AdminURL is the admin listener's base URL ("" without one).
	AdminURL string
	// Webhook is how updates arrive (its Mode) and the webhook
	// registration as last claimed or checked.
	Webhook hookowner.Status
	// App is the app's side as its answers show it: whether it refuses
	// forwards with 401 or 403 (a configuration alert), and how many
	// updates are held for that.
	App AppStatus
}

// Status returns the relay's current status. It does no I/O; see
// [Relay.Stats] for the store's counts.
func (r *Relay) Status() Status {
	st := Status{Ready: r.ready.Load(), Store: r.cfg.StoreName, WebhookURL: r.WebhookURL(), AdminURL: r.AdminURL()}
	r.mu.Lock()
	st.Webhook = r.webhook
	st.App = r.app
	r.mu.Unlock()
	st.Webhook.Mode = r.webhookMode()
	return st
}

// webhookMode is how the relay receives updates.
func (r *Relay) webhookMode() hookowner.Mode {
	switch {
	case r.cfg.Poll:
		return hookowner.ModePolling
	case r.cfg.PublicURL == "":
		return hookowner.ModeUnmanaged
	}
	return hookowner.ModeWebhook
}

// updateWebhook changes the webhook status with f, under the relay's
// lock, and shows the result on the dashboard.
func (r *Relay) updateWebhook(f func(*hookowner.Status)) {
	r.mu.Lock()
	f(&r.webhook)
	st := r.webhook
	r.mu.Unlock()
	if r.rec != nil {
		r.rec.SetWebhook(st)
	}
}

// Stats returns the store's counts of updates by state, unacknowledged
// exhaustions and the oldest pending update. It fails for a store that
// is not an [intake.AdminStore].
func (r *Relay) Stats(ctx context.Context) (intake.Stats, error) {
	if r.caps.admin == nil {
		return intake.Stats{}, fmt.Errorf("relay: stats: %T is not an intake.AdminStore", r.cfg.Store)
	}
	return r.caps.admin.Stats(ctx)
}

// Store returns the store the relay records into, for read-only status
// pages (list, get, stats, through its [intake.AdminStore]). Writes belong
// to the relay and to operator tooling.
func (r *Relay) Store() intake.Store { return r.cfg.Store }

// WebhookAddr returns the webhook listener's address, nil before Start or
// when polling.
func (r *Relay) WebhookAddr() net.Addr { return addrOf(r.hookListener()) }

// AdminAddr returns the admin listener's address, nil without one or
// before Start.
func (r *Relay) AdminAddr() net.Addr { return addrOf(r.adminListener()) }

// WebhookURL returns the local webhook URL (http://address/path, or
// https:// with Config.TLSConfig), "" when not listening.
func (r *Relay) WebhookURL() string {
	if a := r.WebhookAddr(); a != nil {
		if r.cfg.TLSConfig != nil {
			return "https://" + a.String() + r.cfg.Path
		}
		return "http://" + a.String() + r.cfg.Path
	}
	return ""
}

// AdminURL returns the admin listener's base URL, "" without one.
func (r *Relay) AdminURL() string {
	if a := r.AdminAddr(); a != nil {
		return "http://" + a.String()
	}
	return ""
}

func (r *Relay) hookListener() *listener {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hook
}

func (r *Relay) adminListener() *listener {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.admin
}

func addrOf(l *listener) net.Addr {
	if l == nil {
		return nil
	}
	return l.ln.Addr()
}

// Ready reports nil while the relay is started and its store answers.
func (r *Relay) Ready(ctx context.Context) error {
	if !r.ready.Load() {
		return errors.New("relay: not ready: starting or stopping")
	}
	if h := r.caps.health; h != nil {
		// Sees what a row count cannot: a SQLite file gone from its path,
		// a read-only PostgreSQL server.
		if err := h.Health(ctx); err != nil {
			return fmt.Errorf("relay: not ready: store unhealthy: %w", err)
		}
		return nil
	}
	if r.caps.admin == nil {
		return nil // nothing to ask: writes fail loudly when the store does
	}
	if _, err := r.caps.admin.Stats(ctx); err != nil {
		return fmt.Errorf("relay: not ready: store unreachable: %w", err)
	}
	return nil
}

// serveReady answers /readyz: 200 while Ready, 503 otherwise. While the
// app refuses forwards with 401 or 403 (see [AppStatus]) it stays 200 and
// adds a warning line.
func (r *Relay) serveReady(w http.ResponseWriter, req *http.Request) {
	ctx, cancel := context.WithTimeout(req.Context(), readyTimeout)
	defer cancel()
	if err := r.Ready(ctx); err != nil {
		// The store's error may name a host; the probe says only what.
		msg := "not ready: store unreachable"
		if !r.ready.Load() {
			msg = "not ready: starting or stopping"
		}
		http.Error(w, msg, http.StatusServiceUnavailable)
		return
	}
	io.WriteString(w, "ready\n")
	// Still ready: the relay records every update, so Telegram's webhook
	// must keep reaching it; the probe's body says what is wrong.
	if app := r.App(); app.AuthFailing {
		fmt.Fprintf(w, "warning: the app refuses forwards with %d since %s; %d updates held, not given up: make the app's secret check and %s agree\n",
			app.AuthCode, app.AuthFailingSince.UTC().Format(time.RFC3339), app.Held, r.setting("Forward.AppSecretToken"))
	}
}

// storeCaps are the optional capabilities of Config.Store the relay uses,
// each nil when the store lacks it.
type storeCaps struct {
	admin   intake.AdminStore   // the dashboard, Stats, readiness, dating queries
	journal intake.JournalStore // Journal (the gateway detects it itself)
	health  intake.HealthChecker
}

// detectCaps asserts the capabilities of s, once.
func detectCaps(s intake.Store) storeCaps {
	var c storeCaps
	c.admin, _ = s.(intake.AdminStore)
	c.journal, _ = s.(intake.JournalStore)
	c.health, _ = s.(intake.HealthChecker)
	return c
}
