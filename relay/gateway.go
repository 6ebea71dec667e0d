package relay

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/forward"
	"github.com/tgrelay/tgrelay/gateway"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/throttle"
	"github.com/tgrelay/tgrelay/transport"
	"github.com/tgrelay/tgrelay/wire"
)

// DefaultGatewayListen is the gateway's listen address when
// GatewayConfig.Listen is empty: an ephemeral port on loopback, so only
// apps on this machine reach it, two relays on one machine never collide,
// and the app learns the address from each forward's Tgrelay-Api-Root.
// Set Listen to a fixed port for calls the app makes outside an update.
const DefaultGatewayListen = "127.0.0.1:0"

// GatewayConfig configures the app-facing Bot API listener (package
// gateway): the app points its library's API root at it and gets
// Telegram's limits, honest outcomes, fenced sends and replay-safe replies,
// and the webhook replies in its answers to forwards are performed.
//
// The zero value serves the gateway on [DefaultGatewayListen]: the safe
// path is the default path. Set Disable to serve none; the relay then
// performs no webhook reply (each is logged and reported as a
// [KindUnactedReply] event instead).
type GatewayConfig struct {
	// Disable serves no gateway. It contradicts Listen, Listener and
	// PublicURL.
	Disable bool
	// Listen is the listen address. Empty means [DefaultGatewayListen].
	// The gateway holds the bot's token: keep it on loopback or a private
	// network. A non-loopback address must be confirmed with AllowRemote.
	Listen string
	// AllowRemote accepts a Listen address that is not loopback.
	AllowRemote bool
	// Listener, when set, is used instead of listening on Listen; the relay
	// closes it on stop.
	Listener net.Listener
	// PublicURL is the gateway's base URL as the app reaches it, announced
	// to the app in each forward's Tgrelay-Api-Root header (with the
	// attempt's path; see wire.HeaderAPIRoot for its format). Empty
	// means "http://" + the address the gateway listens on: Listener's, or
	// the one bound for Listen (on port 0, the port the system chose).
	PublicURL string
	// Limits are Telegram's limits the gateway keeps (throttle.Config);
	// zero fields take throttle's defaults.
	Limits throttle.Config
	// MaxBufferedBody, MaxBufferedTotal and MaxSendTries are the
	// gateway's (see gateway.Config); zero means its defaults.
	MaxBufferedBody  int64
	MaxBufferedTotal int64
	MaxSendTries     int
	// ResponseTimeout is the longest Telegram may take to answer a call of
	// the app once it has its turn: the response timeout of the gateway's
	// transport and gateway.Config.ResponseTimeout. Zero means
	// gateway.DefaultResponseTimeout. With Limits.MaxWait it makes the
	// gateway's answer bound (gateway.Bounds), which the gateway's HTTP
	// server is built to keep: its write timeout is derived from it, never
	// shorter.
	ResponseTimeout time.Duration
	// AfterIntent is a test seam: when set, it runs after each journaled
	// intent and before the send (a crash test stops the process there).
	AfterIntent func(method string)
}

func (g GatewayConfig) enabled() bool { return !g.Disable }

func (c *Config) fillGateway() error {
	g := &c.Gateway
	if g.Disable {
		switch {
		case g.Listen != "":
			return badField("Gateway.Listen", "is set, but the gateway is disabled")
		case g.Listener != nil:
			return badField("Gateway.Listener", "is set, but the gateway is disabled")
		case g.PublicURL != "":
			return badField("Gateway.PublicURL", "is set, but the gateway is disabled")
		}
		return nil
	}
	if g.Listen == "" {
		g.Listen = DefaultGatewayListen
	}
	if g.Listener == nil && !g.AllowRemote {
		host, _, err := net.SplitHostPort(g.Listen)
		if err != nil {
			return badField("Gateway.Listen", "is not a host:port address")
		}
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return badField("Gateway.Listen", "is not a loopback address: the gateway holds the bot's token; set Gateway.AllowRemote to serve it elsewhere")
		}
	}
	if g.PublicURL != "" {
		if err := checkBaseURL("Gateway.PublicURL", g.PublicURL); err != nil {
			return err
		}
	}
	if err := nested("Gateway.Limits", g.Limits.Validate(), nil); err != nil {
		return err
	}
	// The gateway's own bounds are the gateway's to check; Token and
	// APIRoot were checked as the relay's, and New supplies the transport.
	check := gateway.Config{Token: c.Token, APIRoot: c.APIRoot, Transport: http.DefaultTransport,
		MaxBufferedBody: g.MaxBufferedBody, MaxBufferedTotal: g.MaxBufferedTotal, MaxSendTries: g.MaxSendTries, ResponseTimeout: g.ResponseTimeout}
	return nested("Gateway", check.Validate(), nil)
}

// newGateway builds the gateway and its limiter, when enabled.
func (r *Relay) newGateway() error {
	gc := r.cfg.Gateway
	if !gc.enabled() {
		return nil
	}
	limits := gc.Limits
	next := limits.Observer.EventFunc
	limits.Observer.EventFunc = func(e throttle.Event) {
		if e.Kind != throttle.EventRefused { // a refusal is reported as a call, throttled
			r.emit(Event{Kind: KindLimiter, Limiter: e, Duration: e.Wait})
		}
		if next != nil {
			next(e)
		}
	}
	lim, err := throttle.New(limits)
	if err != nil {
		return nested("Gateway.Limits", err, nil)
	}
	// The gateway's upstream goes where and how the relay's own calls go;
	// Gateway.ResponseTimeout, when set, overrides BotTransport's.
	bt := r.cfg.BotTransport
	respTimeout := cmp.Or(gc.ResponseTimeout, bt.ResponseTimeout, gateway.DefaultResponseTimeout)
	bt.ResponseTimeout = respTimeout
	base, err := transport.New(bt)
	if err != nil {
		return nested("BotTransport", err, nil)
	}
	stream := gateway.NewStreamTransportConfig(gateway.StreamConfig{Proxy: bt.Proxy, TLSConfig: bt.TLSConfig, HeaderTimeout: bt.ResponseTimeout})
	r.gwBase = base
	r.gwPublic = strings.TrimRight(gc.PublicURL, "/")
	if r.gwPublic == "" {
		switch {
		case gc.Listener != nil:
			r.gwPublic = "http://" + gc.Listener.Addr().String()
		case !strings.HasSuffix(gc.Listen, ":0"):
			r.gwPublic = "http://" + gc.Listen
		}
	}
	apiRoot := r.cfg.APIRoot
	if apiRoot == "" {
		apiRoot = gateway.DefaultAPIRoot
	}
	r.gw, err = gateway.New(gateway.Config{
		Token:            r.cfg.Token,
		APIRoot:          apiRoot,
		Transport:        throttle.NewTransport(lim, base),
		StreamTransport:  throttle.NewTransport(lim, stream),
		Store:            r.cfg.Store,
		OwnsIntake:       true,
		MaxBufferedBody:  gc.MaxBufferedBody,
		MaxBufferedTotal: gc.MaxBufferedTotal,
		MaxSendTries:     gc.MaxSendTries,
		ResponseTimeout:  respTimeout,
		Observer:         gateway.Observer{CallFunc: r.gatewayCall},
		Test:             gateway.TestHooks{AfterIntent: gc.AfterIntent},
		Logger:           r.log,
		TracerProvider:   r.cfg.TracerProvider,
		TraceParentFunc:  r.tr.callParent,
	})
	if err != nil {
		return nested("Gateway", err, nil)
	}
	return nil
}

// gatewayCall reports a call the gateway answered, and warns of a sent
// call whose answer the app did not wait for.
func (r *Relay) gatewayCall(e gateway.CallEvent) {
	if e.Undelivered && !e.Replayed && (e.Outcome == wire.OutcomeAnswered || e.Outcome == wire.OutcomeUnknown) {
		r.log.Warn("relay: the app gave up on a gateway call that was sent; its outcome is journaled, but an app that sends it again unfenced makes it twice: set its HTTP timeout above the gateway's Tgrelay-Call-Timeout",
			"method", e.Method, "outcome", string(e.Outcome), "fenced", e.Fenced, "after", e.Duration, "call_timeout", r.gw.Bounds().Answer)
	}
	r.emit(Event{Kind: KindGatewayCall, Call: e, Duration: e.Duration})
}

// reply reports a webhook reply the gateway performed (a warning when its
// outcome is unknown, or when the gateway refused it), then passes it on.
func (r *Relay) reply(next func(forward.Reply)) func(forward.Reply) {
	return func(rp forward.Reply) {
		rp.Method = r.replyMethod(rp.Method)
		switch {
		case rp.Outcome == string(wire.OutcomeUnknown) && !rp.Replayed:
			r.log.Warn("relay: a webhook reply's outcome is unknown; it is journaled and never sent again",
				"update_id", rp.UpdateID, "attempt", rp.Attempt, "method", rp.Method)
		case rp.Outcome == string(wire.OutcomeRefused):
			// The forward skips it and the update completes: this line
			// is all that says the app's reply was never sent.
			r.log.Warn("relay: the gateway refused a webhook reply in the app's answer; it is not sent",
				"update_id", rp.UpdateID, "attempt", rp.Attempt, "method", rp.Method, "status", rp.Status)
		}
		if next != nil {
			next(rp)
		}
	}
}

// startGateway serves the gateway, when enabled.
func (r *Relay) startGateway() error {
	if r.gw == nil {
		r.log.Info("relay: no Bot API gateway (" + r.setting("Gateway.Disable") + "): webhook replies in the app's answers are not performed, only logged and counted")
		return nil
	}
	gc := r.cfg.Gateway
	// The server never cuts a call the gateway is still answering: its
	// write timeout is the gateway's, derived from the limiter's MaxWait
	// and the response timeout (the handler also sets its connection's
	// deadlines itself).
	b := r.gw.Bounds()
	l, err := r.serveTimeouts("gateway", "Gateway.Listen", gc.Listen, gc.Listener, r.gw, b.WriteTimeout)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.gwListener = l
	// Announced to the app at every forward: built once, not per update.
	r.gwBound = "http://" + l.ln.Addr().String()
	r.mu.Unlock()
	r.log.Info("relay: serving the Bot API gateway for the app", "gateway", r.GatewayURL(),
		"max_wait", b.MaxWait, "response_timeout", b.ResponseTimeout, "answer_within", b.Answer)
	return nil
}

// stopGateway shuts the gateway listener down, after the runner drained,
// so the calls of draining handlers still go through, and waits for the
// gateway's outcome writes.
func (r *Relay) stopGateway(ctx context.Context) {
	if l := r.gatewayListener(); l != nil {
		if err := l.srv.Shutdown(ctx); err != nil {
			_ = l.srv.Close()
		}
	}
	// The outcomes journaled after their answers are written before the
	// store is closed.
	if r.gw != nil {
		if err := r.gw.Close(ctx); err != nil {
			r.log.Warn("relay: gateway outcomes still being journaled at the drain deadline; those calls read as unknown to later attempts", "err", err)
		}
	}
	if r.gwBase != nil {
		r.gwBase.CloseIdleConnections()
	}
}

func (r *Relay) gatewayListener() *listener {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gwListener
}

// GatewayAddr returns the gateway listener's address, nil without one or
// before Start.
func (r *Relay) GatewayAddr() net.Addr { return addrOf(r.gatewayListener()) }

// GatewayURL returns the gateway's base URL as the app reaches it:
// Config.Gateway.PublicURL, else http://address; "" without a gateway.
func (r *Relay) GatewayURL() string {
	if r.gwPublic != "" {
		return r.gwPublic
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gwBound // "" before Start
}

// Journal lists the calls the gateway journaled for an update (nil when
// the store keeps no journal).
func (r *Relay) Journal(ctx context.Context, updateID int64) ([]intake.JournalEntry, error) {
	if r.caps.journal == nil {
		return nil, nil
	}
	return r.caps.journal.Journal(ctx, updateID)
}
