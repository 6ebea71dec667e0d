package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
	"time"
)

// Cookie names and lifetimes.
const (
	csrfCookie    = "tgrelay_csrf"
	sessionCookie = "tgrelay_session"
	// sessionLifetime bounds a session; the operator signs in again.
	sessionLifetime = 12 * time.Hour
	// maxLoginForm bounds the login form's body.
	maxLoginForm = 4 << 10
)

var b64 = base64.RawURLEncoding

// mac signs parts with the handler's key.
func (h *Handler) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, h.key[:])
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// csrfToken returns the form token bound to the browser's CSRF cookie,
// setting a new cookie when there is none. The token is a MAC of the
// cookie, so a page elsewhere can neither read nor forge it.
func (h *Handler) csrfToken(w http.ResponseWriter, r *http.Request) string {
	v := ""
	if c, err := r.Cookie(csrfCookie); err == nil && len(c.Value) == 22 {
		v = c.Value
	} else {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		v = b64.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{Name: csrfCookie, Value: v, Path: h.cfg.Prefix,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r)})
	}
	return b64.EncodeToString(h.mac("csrf", v))
}

// validCSRF reports whether the form's csrf field matches the request's
// CSRF cookie.
func (h *Handler) validCSRF(r *http.Request) bool {
	c, err := r.Cookie(csrfCookie)
	if err != nil || c.Value == "" {
		return false
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxActionForm)
	got, err := b64.DecodeString(r.PostFormValue("csrf"))
	if err != nil {
		return false
	}
	return hmac.Equal(got, h.mac("csrf", c.Value))
}

// authenticated reports whether r may see the pages: always without an
// admin token (the loopback check ran before), else with a live session
// or the token as a bearer credential. A wrong bearer token is a failed
// sign-in: it spends the client's budget and is logged. limited reports
// a bearer request refused because its client spent that budget.
func (h *Handler) authenticated(r *http.Request) (ok, limited bool) {
	if h.cfg.AdminToken == "" {
		return true, false
	}
	if a := r.Header.Get("Authorization"); a != "" {
		lim := h.limits.get(h.clientAddr(r))
		if lim.Tokens() < 1 {
			return false, true
		}
		tok, isBearer := strings.CutPrefix(a, "Bearer ")
		if isBearer && h.tokenMatches(tok) {
			return true, false
		}
		lim.Allow() // only failures spend the budget
		h.log.Warn("dashboard: refused a wrong bearer token", "remote", h.clientAddr(r), "path", r.URL.Path)
		return false, false
	}
	return h.sessions.live(h.sessionID(r), time.Now()), false
}

// sessionID returns the session id the request's cookie carries, "" when
// there is none or its MAC is wrong.
func (h *Handler) sessionID(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	id, sig, ok := strings.Cut(c.Value, ".")
	if !ok || id == "" {
		return ""
	}
	got, err := b64.DecodeString(sig)
	if err != nil || !hmac.Equal(got, h.mac("session", id, h.cfg.AdminToken)) {
		return ""
	}
	return id
}

// tokenMatches compares tok with the admin token in constant time, also
// hiding the token's length.
func (h *Handler) tokenMatches(tok string) bool {
	a := sha256.Sum256([]byte(tok))
	b := sha256.Sum256([]byte(h.cfg.AdminToken))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

type loginPage struct {
	Failed  bool
	Limited bool
	NoToken bool
}

func (h *Handler) loginForm(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "login", page{Title: "Sign in", Data: loginPage{NoToken: h.cfg.AdminToken == ""}})
}

// login checks the submitted token and starts a session: a random id kept
// by the handler, and a cookie carrying the id and a MAC over it, so the
// cookie never carries the token, dies with the handler's key, and is
// revoked server-side by logout. Failures are rate limited per client
// address (see clientAddr).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if h.cfg.AdminToken == "" {
		http.Redirect(w, r, h.cfg.Prefix, http.StatusSeeOther)
		return
	}
	client := h.clientAddr(r)
	lim := h.limits.get(client)
	if lim.Tokens() < 1 {
		h.log.Warn("dashboard: sign-in refused: too many wrong tokens from this address", "remote", client)
		h.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in", Data: loginPage{Limited: true}})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if !h.tokenMatches(r.PostFormValue("token")) {
		lim.Allow() // only failures spend the budget
		h.log.Warn("dashboard: sign-in refused: wrong admin token", "remote", client)
		h.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Data: loginPage{Failed: true}})
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	id := b64.EncodeToString(b)
	h.sessions.add(id, time.Now().Add(sessionLifetime))
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id + "." + b64.EncodeToString(h.mac("session", id, h.cfg.AdminToken)),
		Path: h.cfg.Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r),
		MaxAge: int(sessionLifetime / time.Second)})
	h.log.Info("dashboard: signed in", "remote", client)
	http.Redirect(w, r, h.cfg.Prefix, http.StatusSeeOther)
}

// logout ends the session on the server, so its cookie opens nothing even
// if it was copied, and clears the cookie.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if id := h.sessionID(r); id != "" {
		h.sessions.revoke(id)
		h.log.Info("dashboard: signed out", "remote", h.clientAddr(r))
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: h.cfg.Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: h.secure(r)})
	http.Redirect(w, r, h.cfg.Prefix+"login", http.StatusSeeOther)
}

// redact masks the configured secrets, the admin token and anything shaped
// like a bot token in s.
func (h *Handler) redact(s string) string { return h.red.Redact(s) }
