package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
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
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
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
	r.Body = http.MaxBytesReader(nil, r.Body, maxLoginForm)
	got, err := b64.DecodeString(r.PostFormValue("csrf"))
	if err != nil {
		return false
	}
	return hmac.Equal(got, h.mac("csrf", c.Value))
}

// authenticated reports whether r may see the pages: always without an
// admin token (the loopback check ran before), else with a live session
// cookie or the token as a bearer credential.
func (h *Handler) authenticated(r *http.Request) bool {
	if h.cfg.AdminToken == "" {
		return true
	}
	if a := r.Header.Get("Authorization"); a != "" {
		tok, ok := strings.CutPrefix(a, "Bearer ")
		return ok && h.tokenMatches(tok)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return false
	}
	ts, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return false
	}
	issued, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return false
	}
	age := time.Since(time.Unix(issued, 0))
	if age < -time.Minute || age > sessionLifetime {
		return false
	}
	got, err := b64.DecodeString(sig)
	return err == nil && hmac.Equal(got, h.mac("session", ts, h.cfg.AdminToken))
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

// login checks the submitted token and sets a session cookie: the issue
// time and a MAC over it and the token, so the cookie never carries the
// token and dies with the handler's key. Failures are rate limited.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if h.cfg.AdminToken == "" {
		http.Redirect(w, r, h.cfg.Prefix, http.StatusSeeOther)
		return
	}
	if h.loginLimit.Tokens() < 1 {
		h.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Sign in", Data: loginPage{Limited: true}})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginForm)
	if !h.tokenMatches(r.PostFormValue("token")) {
		h.loginLimit.Allow() // only failures spend the budget
		h.log.Warn("dashboard: sign-in refused: wrong admin token", "remote", r.RemoteAddr)
		h.render(w, r, http.StatusUnauthorized, "login", page{Title: "Sign in", Data: loginPage{Failed: true}})
		return
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: ts + "." + b64.EncodeToString(h.mac("session", ts, h.cfg.AdminToken)),
		Path: h.cfg.Prefix, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
		MaxAge: int(sessionLifetime / time.Second)})
	h.log.Info("dashboard: signed in", "remote", r.RemoteAddr)
	http.Redirect(w, r, h.cfg.Prefix, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: h.cfg.Prefix, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, h.cfg.Prefix+"login", http.StatusSeeOther)
}

// redact masks the configured secrets, the admin token and anything shaped
// like a bot token in s.
func (h *Handler) redact(s string) string { return h.red.Redact(s) }
