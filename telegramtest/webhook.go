package telegramtest

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/backoff"
)

// webhookState is the webhook set with setWebhook, and its delivery state.
type webhookState struct {
	url           string
	secret        string
	maxConn       int
	allowed       []string // allowed_updates, shared with getUpdates as in Telegram
	lastErrorDate int64
	lastErrorMsg  string
	inflight      int
	busy          map[int64]bool    // chats with a delivery in flight
	cert          *x509.Certificate // uploaded with setWebhook, or nil
	client        *http.Client      // strict deliveries' client for url and cert; nil when lenient
}

func (s *Server) setWebhookLocked(p params) (any, *apiError) {
	raw := p.get("url")
	if raw == "" {
		return s.deleteWebhookLocked(p)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, badRequest(ErrMsgNotHTTPS)
	}
	if s.cfg.Webhook.Strict {
		if e := checkStrictURL(u); e != nil {
			return nil, e
		}
	}
	var cert *x509.Certificate
	if f, ok := p.files["certificate"]; ok {
		if cert, err = parseUploadedCert(f.Data); err != nil {
			return nil, badRequest(ErrMsgBadCertificate)
		}
	} else if p.has("certificate") {
		return nil, badRequest(ErrMsgBadCertificate) // it must be uploaded, not named
	}
	secret := p.get("secret_token")
	if p.has("secret_token") && !botapi.ValidSecretToken(secret) {
		return nil, badRequest("secret token contains unallowed characters")
	}
	maxConn := DefaultMaxConnections
	if n, ok, err := p.int64("max_connections"); err != nil || (ok && (n < 1 || n > 100)) {
		return nil, badRequest("bad webhook: max_connections must be between 1 and 100")
	} else if ok {
		maxConn = int(n)
	}
	if raw := p.get("allowed_updates"); raw != "" {
		var allowed []string
		if err := json.Unmarshal([]byte(raw), &allowed); err != nil {
			return nil, badRequest("can't parse allowed_updates JSON array")
		}
		s.st.webhook.allowed = allowed
	}
	if p.bool("drop_pending_updates") {
		s.setPendingLocked(nil)
	}
	w := &s.st.webhook
	w.url, w.secret, w.maxConn, w.cert = raw, secret, maxConn, cert
	w.client = nil
	if s.cfg.Webhook.Strict {
		w.client = newStrictClient(s.cfg.Webhook, u, cert)
	}
	s.wakeLocked()
	return described{true, "Webhook was set"}, nil
}

func (s *Server) deleteWebhookLocked(p params) (any, *apiError) {
	if p.bool("drop_pending_updates") {
		s.setPendingLocked(nil)
	}
	w := &s.st.webhook
	was := w.url
	w.url, w.secret, w.cert, w.client = "", "", nil, nil
	s.wakeLocked()
	if was == "" {
		return described{true, "Webhook is already deleted"}, nil
	}
	return described{true, "Webhook was deleted"}, nil
}

type apiWebhookInfo struct {
	URL                  string   `json:"url"`
	HasCustomCertificate bool     `json:"has_custom_certificate"`
	PendingUpdateCount   int      `json:"pending_update_count"`
	LastErrorDate        int64    `json:"last_error_date,omitempty"`
	LastErrorMessage     string   `json:"last_error_message,omitempty"`
	MaxConnections       int      `json:"max_connections,omitempty"`
	AllowedUpdates       []string `json:"allowed_updates,omitempty"`
}

func (s *Server) webhookInfoLocked() apiWebhookInfo {
	w := s.st.webhook
	info := apiWebhookInfo{
		URL: w.url, HasCustomCertificate: w.cert != nil, PendingUpdateCount: len(s.st.pending),
		LastErrorDate: w.lastErrorDate, LastErrorMessage: w.lastErrorMsg,
		AllowedUpdates: w.allowed,
	}
	if w.url != "" {
		info.MaxConnections = w.maxConn
	}
	return info
}

// delivery is one webhook attempt being made.
type delivery struct {
	u       *pendingUpdate
	url     string
	secret  string
	client  *http.Client // nil: the server's own lenient client
	attempt int
	epoch   uint64
}

// dispatchWebhooks starts deliveries whenever updates, the webhook or a
// finished delivery allow one, until Close.
func (s *Server) dispatchWebhooks() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		jobs, next := s.pickLocked(time.Now())
		ch := s.changed
		s.mu.Unlock()
		for _, j := range jobs {
			s.wg.Add(1)
			go s.deliver(j)
		}
		var timer <-chan time.Time
		var t *time.Timer
		if !next.IsZero() {
			t = time.NewTimer(time.Until(next))
			timer = t.C
		}
		select {
		case <-s.ctx.Done():
		case <-ch:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if s.ctx.Err() != nil {
			return
		}
	}
}

// pickLocked chooses the deliveries to start now: in update_id order, one
// at a time per chat, at most max_connections at once. next is when a
// backed-off update becomes due.
func (s *Server) pickLocked(now time.Time) (jobs []delivery, next time.Time) {
	w := &s.st.webhook
	if w.url == "" {
		return nil, time.Time{}
	}
	if w.busy == nil {
		w.busy = map[int64]bool{}
	}
	seen := map[int64]bool{}
	for _, u := range s.st.pending {
		// Past max_connections, or once every chat with updates has been
		// seen, nothing further can start.
		if w.inflight >= w.maxConn || len(seen) >= len(s.st.pendingChats) {
			break
		}
		if seen[u.ChatID] || w.busy[u.ChatID] {
			seen[u.ChatID] = true
			continue
		}
		seen[u.ChatID] = true
		if u.notBefore.After(now) {
			if next.IsZero() || u.notBefore.Before(next) {
				next = u.notBefore
			}
			continue
		}
		u.inflight = true
		w.busy[u.ChatID] = true
		w.inflight++
		jobs = append(jobs, delivery{u: u, url: w.url, secret: w.secret, client: w.client, attempt: u.attempts + 1, epoch: s.st.epoch})
	}
	return jobs, next
}

// deliver makes one webhook attempt and records its outcome.
func (s *Server) deliver(j delivery) {
	defer s.wg.Done()
	start, at := time.Now(), s.now()
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.Webhook.Timeout)
	defer cancel()
	var wrote atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Store(true) }})
	status, msg := 0, ""
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, j.url, bytes.NewReader(j.u.JSON))
	if err == nil {
		req.Header.Set("Content-Type", "application/json")
		if j.secret != "" {
			req.Header.Set("X-Telegram-Bot-Api-Secret-Token", j.secret)
		}
		client := s.webhookClient
		if j.client != nil {
			client = j.client
		}
		var resp *http.Response
		resp, err = client.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, MaxWebhookResponseBytes))
			resp.Body.Close()
			status = resp.StatusCode
			if status < 200 || status > 299 {
				msg = "Wrong response from the webhook: " + resp.Status
			} else if err != nil {
				status, msg = 0, "Connection reset while reading the answer"
			}
		}
	}
	closing := s.ctx.Err() != nil
	if err != nil && status == 0 && msg == "" {
		switch {
		case closing:
			msg = "telegramtest: server closed"
		case errors.Is(err, context.DeadlineExceeded):
			msg = "Read timeout expired"
		case errors.Is(err, syscall.ECONNREFUSED):
			msg = ErrMsgConnectionRefused
		case strictErrorMessage(err) != "":
			msg = strictErrorMessage(err)
		default:
			msg = "Connection failed"
		}
	}
	ok := status >= 200 && status <= 299
	d := Delivery{
		UpdateID: j.u.ID, ChatID: j.u.ChatID, Via: "webhook", Attempt: j.attempt,
		Status: status, Err: msg, Reached: wrote.Load(), Start: at, Duration: time.Since(start),
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if j.epoch != s.st.epoch {
		return // Reset happened meanwhile
	}
	w := &s.st.webhook
	w.inflight--
	delete(w.busy, j.u.ChatID)
	j.u.inflight = false
	j.u.attempts = j.attempt
	switch {
	case ok:
		s.removePendingLocked(j.u)
	case closing:
		// Not an attempt the bot should be blamed for; leave it queued.
	default:
		w.lastErrorDate, w.lastErrorMsg = s.now().Unix(), msg
		if j.attempt >= s.cfg.Webhook.MaxAttempts {
			d.GaveUp = true
			s.removePendingLocked(j.u)
		} else {
			j.u.notBefore = time.Now().Add(s.backoff(j.attempt))
		}
	}
	s.recordDeliveryLocked(d)
	s.wakeLocked()
}

// backoff is the wait after the given failed attempt.
func (s *Server) backoff(attempt int) time.Duration {
	return backoff.Capped{Base: s.cfg.Webhook.Backoff, Max: s.cfg.Webhook.MaxBackoff}.Delay(attempt)
}

func (s *Server) recordDeliveryLocked(d Delivery) {
	if len(s.st.deliveries) >= s.cfg.MaxDeliveries {
		n := len(s.st.deliveries) - s.cfg.MaxDeliveries + 1
		s.st.deliveries = append(s.st.deliveries[:0], s.st.deliveries[n:]...)
		s.st.droppedDeliv += n
	}
	s.st.deliveries = append(s.st.deliveries, d)
}
