package dashboard

import (
	"bytes"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/pacedstats"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets/*
var assetFS embed.FS

// contentSecurityPolicy allows nothing inline: the stylesheet and the
// script are the handler's own files, and the charts are SVG elements
// styled by that stylesheet.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Handler is the dashboard: an [http.Handler] serving the Overview,
// Updates, Exhaustions, Replies, Processes and Broadcasts pages, their
// assets and the live refresh stream under [Config.Prefix]. Build it with
// [New]; mount it on an admin listener (see [CheckExposure]) and call
// [Handler.Close] before shutting that listener's server down, so open
// refresh streams end.
//
// Pages are rendered on the server; a browser with scripts off sees the
// same pages without the live refresh. A Handler is safe for concurrent use.
type Handler struct {
	cfg     Config
	durable intake.Store // the store's core, to acknowledge; nil when it has none
	mux     *http.ServeMux
	pages   map[string]*template.Template
	assets  fs.FS
	log     *slog.Logger
	red     *botapi.Redactor

	key      [32]byte // signs CSRF tokens and sessions; new per Handler
	cop      *http.CrossOriginProtection
	limits   clientLimits // failed sign-ins, per client address
	sessions sessionStore
	rates    rateSampler       // running broadcasts' progress
	stats    *pacedstats.Cache // the store's counts, shared and paced

	sse       chan struct{} // one token per open refresh stream
	done      chan struct{}
	closeOnce sync.Once
}

// New returns a Handler for cfg, or an error naming the invalid field.
func New(cfg Config) (*Handler, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Handler{
		cfg:  c,
		log:  c.Logger,
		sse:  make(chan struct{}, c.MaxSSEClients),
		done: make(chan struct{}),
		cop:  http.NewCrossOriginProtection(),
	}
	h.durable, _ = c.Store.(intake.Store)
	h.stats = &pacedstats.Cache{Stats: c.Store.Stats}
	h.red = &botapi.Redactor{}
	h.red.Add(c.Secrets...)
	h.red.Add(c.AdminToken)
	if _, err := rand.Read(h.key[:]); err != nil {
		return nil, fmt.Errorf("dashboard: random key: %w", err)
	}
	if h.pages, err = parsePages(); err != nil {
		return nil, err
	}
	h.assets, _ = fs.Sub(assetFS, "assets")
	h.routes()
	return h, nil
}

// Close ends the open refresh streams and refuses new ones. Pages are still
// served. It is idempotent.
func (h *Handler) Close() {
	h.closeOnce.Do(func() { close(h.done) })
}

func (h *Handler) routes() {
	p := h.cfg.Prefix
	m := http.NewServeMux()
	m.HandleFunc("GET "+p+"{$}", h.overview)
	m.HandleFunc("GET "+p+"updates", h.updates)
	m.HandleFunc("GET "+p+"updates/{id}", h.update)
	m.HandleFunc("GET "+p+"updates/{id}/{action}", h.confirm)
	m.HandleFunc("POST "+p+"updates/{id}/{action}", h.act)
	m.HandleFunc("GET "+p+"exhaustions", h.exhaustions)
	m.HandleFunc("GET "+p+"replies", h.replies)
	m.HandleFunc("GET "+p+"processes", h.processes)
	m.HandleFunc("GET "+p+"bulk/{action}", h.bulkConfirm)
	m.HandleFunc("POST "+p+"bulk/{action}", h.bulkAct)
	m.HandleFunc("GET "+p+"broadcasts", h.broadcasts)
	m.HandleFunc("GET "+p+"broadcasts/{name}", h.broadcast)
	m.HandleFunc("GET "+p+"events", h.events)
	m.HandleFunc("GET "+p+"assets/{file}", h.asset)
	m.HandleFunc("GET "+p+"login", h.loginForm)
	m.HandleFunc("POST "+p+"login", h.login)
	m.HandleFunc("POST "+p+"logout", h.logout)
	m.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, http.StatusNotFound, "Not found", "There is no such page.")
	})
	h.mux = m
}

// ServeHTTP sets the security headers, refuses requests that are not
// allowed (wrong host or address without an admin token, no session with
// one, a POST without a valid CSRF token or in read-only mode), and serves
// the page.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")

	if h.cfg.AdminToken == "" && !loopbackRequest(r) {
		h.log.Warn("dashboard: refused a request from outside loopback without an admin token", "remote", r.RemoteAddr)
		h.fail(w, r, http.StatusForbidden, "Forbidden",
			"This dashboard has no admin token, so it answers only on a loopback address, under a loopback host name.")
		return
	}
	rest := strings.TrimPrefix(r.URL.Path, h.cfg.Prefix)
	public := strings.HasPrefix(rest, "assets/") || rest == "login"
	if !public {
		if ok, limited := h.authenticated(r); !ok {
			switch {
			case limited:
				h.fail(w, r, http.StatusTooManyRequests, "Too many wrong tokens", "Too many wrong tokens came from your address; wait a few seconds.")
			case r.Method == http.MethodGet || r.Method == http.MethodHead:
				http.Redirect(w, r, h.cfg.Prefix+"login", http.StatusSeeOther)
			default:
				h.fail(w, r, http.StatusUnauthorized, "Sign in first", "This request needs the admin token.")
			}
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if !h.sameOrigin(r) {
			h.log.Warn("dashboard: refused a cross-origin request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			h.fail(w, r, http.StatusForbidden, "Forbidden", "A cross-origin request cannot change anything here.")
			return
		}
		if h.cfg.ReadOnly && rest != "login" && rest != "logout" {
			h.fail(w, r, http.StatusForbidden, "Read-only", "This dashboard is read-only: it changes nothing.")
			return
		}
		if rest != "login" && !h.validCSRF(r) {
			h.log.Warn("dashboard: refused a request without a valid CSRF token", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
			h.fail(w, r, http.StatusForbidden, "Form expired",
				"The form's security token is missing or does not match (an old page, or a request from elsewhere). Reload the page and try again.")
			return
		}
	}
	h.mux.ServeHTTP(w, r)
}

// loopbackRequest reports whether r arrived on a loopback local address and
// names a loopback host, which a page elsewhere cannot make a browser do
// (DNS rebinding names the attacker's host).
func loopbackRequest(r *http.Request) bool {
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && !isLoopbackHostPort(la.String()) {
		return false
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return isLoopbackHost(host)
}

// page is what every template gets.
type page struct {
	Title    string
	Nav      string // the navigation entry to mark current
	Base     string // Config.Prefix
	Live     bool   // the page refreshes itself
	CSRF     string
	ReadOnly bool
	SignedIn bool // the request carries a live session: the layout offers to sign out
	Refresh  time.Duration
	Now      time.Time
	Data     any
}

// render executes the named page into a bounded buffer and sends it with
// status code. A page larger than Config.MaxPageBytes is refused.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	t, ok := h.pages[name]
	if !ok {
		panic("dashboard: no template " + name) // a programmer error caught by the tests
	}
	p.Base = h.cfg.Prefix
	p.ReadOnly = h.cfg.ReadOnly
	p.Refresh = h.cfg.RefreshInterval
	p.CSRF = h.csrfToken(w, r)
	if p.Now.IsZero() {
		p.Now = time.Now()
	}
	// Only a session can be ended: not on the sign-in form or an error
	// page shown before one, nor for a bearer token.
	p.SignedIn = h.cfg.AdminToken != "" && h.sessions.live(h.sessionID(r), p.Now)
	buf := &limitedBuffer{max: h.cfg.MaxPageBytes}
	if err := t.ExecuteTemplate(buf, "layout", p); err != nil {
		if errors.Is(err, errPageTooLarge) {
			h.log.Warn("dashboard: page larger than MaxPageBytes not sent", "page", name, "max", h.cfg.MaxPageBytes)
			http.Error(w, "dashboard: the page is larger than its bound; narrow the listing", http.StatusInternalServerError)
			return
		}
		h.log.Error("dashboard: render", "page", name, "err", h.redact(err.Error()))
		http.Error(w, "dashboard: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes())
	}
}

// fail renders the error page.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, code int, title, msg string) {
	h.render(w, r, code, "error", page{Title: title, Data: errorPage{Code: code, Message: h.redact(msg)}})
}

type errorPage struct {
	Code    int
	Message string
}

// storeFailed reports a store error without its text (it could name a
// database URL); the log gets the redacted text.
func (h *Handler) storeFailed(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error("dashboard: store", "path", r.URL.Path, "err", h.redact(err.Error()))
	h.fail(w, r, http.StatusServiceUnavailable, "Store unavailable",
		"The update store did not answer. The relay's log has the details.")
}

var errPageTooLarge = errors.New("dashboard: page too large")

// limitedBuffer is a bytes.Buffer that refuses to grow past max.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > b.max {
		return 0, errPageTooLarge
	}
	return b.Buffer.Write(p)
}

func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	data, err := fs.ReadFile(h.assets, name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	switch {
	case strings.HasSuffix(name, ".css"):
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
	case strings.HasSuffix(name, ".js"):
		w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	case strings.HasSuffix(name, ".svg"):
		w.Header().Set("Content-Type", "image/svg+xml")
	}
	w.Header().Set("Cache-Control", "public, max-age=300")
	if r.Method != http.MethodHead {
		_, _ = w.Write(data)
	}
}
