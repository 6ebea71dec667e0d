package dashboard

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Bounds of the handler's per-client state.
const (
	// maxSessions bounds the live sessions; signing in beyond it ends the
	// session closest to its end.
	maxSessions = 1024
	// maxClients bounds the clients whose failed sign-ins are counted;
	// beyond it, clients with their full budget are forgotten, and new
	// ones share one budget until room frees.
	maxClients = 4096
	// loginBurst wrong tokens a client may try at once, then one more
	// per loginEvery.
	loginBurst = 5
	loginEvery = time.Second
)

// sessionStore holds the live sessions: id → end. It is safe for
// concurrent use.
type sessionStore struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// add starts session id, ending at end.
func (s *sessionStore) add(id string, end time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]time.Time{}
	}
	if len(s.m) >= maxSessions {
		now := time.Now()
		oldest, first := "", time.Time{}
		for k, e := range s.m {
			if !e.After(now) {
				delete(s.m, k)
				continue
			}
			if oldest == "" || e.Before(first) {
				oldest, first = k, e
			}
		}
		if len(s.m) >= maxSessions {
			delete(s.m, oldest)
		}
	}
	s.m[id] = end
}

// live reports whether session id exists and has not ended at now.
func (s *sessionStore) live(id string, now time.Time) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end, ok := s.m[id]
	if ok && !end.After(now) {
		delete(s.m, id)
		return false
	}
	return ok
}

// revoke ends session id.
func (s *sessionStore) revoke(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// clientLimits holds one failed-sign-in budget per client address. It is
// safe for concurrent use.
type clientLimits struct {
	mu       sync.Mutex
	m        map[string]*rate.Limiter
	overflow *rate.Limiter
}

// get returns the budget of client.
func (c *clientLimits) get(client string) *rate.Limiter {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.m[client]; ok {
		return l
	}
	if c.m == nil {
		c.m = map[string]*rate.Limiter{}
		c.overflow = rate.NewLimiter(rate.Every(loginEvery), loginBurst)
	}
	if len(c.m) >= maxClients {
		for k, l := range c.m {
			if l.Tokens() >= loginBurst {
				delete(c.m, k) // nothing spent: nothing to remember
			}
		}
		if len(c.m) >= maxClients {
			return c.overflow
		}
	}
	l := rate.NewLimiter(rate.Every(loginEvery), loginBurst)
	c.m[client] = l
	return l
}

// fromTrustedProxy reports whether r's connection comes from one of
// Config.TrustedProxies.
func (h *Handler) fromTrustedProxy(r *http.Request) bool {
	a, ok := remoteIP(r.RemoteAddr)
	return ok && h.trusted(a)
}

func (h *Handler) trusted(a netip.Addr) bool {
	for _, p := range h.cfg.TrustedProxies {
		if p.Contains(a.Unmap()) {
			return true
		}
	}
	return false
}

func remoteIP(hostport string) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

// clientAddr returns the address failed sign-ins are counted against: the
// connection's IP, or, behind a trusted proxy, the rightmost address of
// X-Forwarded-For that is not a trusted proxy (the leftmost ones are the
// client's to write).
func (h *Handler) clientAddr(r *http.Request) string {
	a, ok := remoteIP(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if !h.trusted(a) {
		return a.String()
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			break
		}
		if !h.trusted(hop) {
			return hop.Unmap().String()
		}
	}
	return a.String()
}

// secure reports whether the browser reached the handler over HTTPS: a
// TLS connection, or a trusted proxy's X-Forwarded-Proto: https. Cookies
// set on such a request are Secure.
func (h *Handler) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return h.fromTrustedProxy(r) && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// sameOrigin reports whether a state-changing request comes from the
// dashboard's own pages. [http.CrossOriginProtection] decides first. It
// refuses one same-origin case: a page served over plain HTTP at a
// non-loopback address is not a potentially trustworthy origin, so
// Chromium sends no Sec-Fetch-Site there and, under the handler's
// Referrer-Policy: no-referrer, "Origin: null" with a form post. That case
// is accepted only with a valid CSRF token: its cookie is SameSite=Strict,
// so a page elsewhere (an opaque-origin sandboxed frame included) cannot
// make the browser send it, and cannot forge the MAC bound to it.
func (h *Handler) sameOrigin(r *http.Request) bool {
	if h.cop.Check(r) == nil {
		return true
	}
	return r.Header.Get("Sec-Fetch-Site") == "" && r.Header.Get("Origin") == "null" && h.validCSRF(r)
}

// Protect returns next behind the dashboard's door, for the other
// endpoints of its admin listener (a relay puts /metrics there): with an
// admin token, a request needs the dashboard's session or the token as an
// "Authorization: Bearer" header (a wrong one counts as a failed sign-in,
// see Config.AdminToken), and is answered 401 otherwise; without one, only
// requests on a loopback address naming a loopback host pass, as for the
// pages.
func (h *Handler) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		if h.cfg.AdminToken == "" {
			if !loopbackRequest(r) {
				h.log.Warn("dashboard: refused a request from outside loopback without an admin token", "remote", r.RemoteAddr, "path", r.URL.Path)
				http.Error(w, "forbidden: this listener has no admin token, so it answers only on a loopback address", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		ok, limited := h.authenticated(r)
		switch {
		case limited:
			http.Error(w, "too many wrong tokens from this address; wait a few seconds", http.StatusTooManyRequests)
		case !ok:
			w.Header().Set("WWW-Authenticate", `Bearer realm="tgrelay"`)
			http.Error(w, "unauthorized: this endpoint needs the admin token (Authorization: Bearer)", http.StatusUnauthorized)
		default:
			next.ServeHTTP(w, r)
		}
	})
}
