// Package forward hands stored updates to a bot's own HTTP endpoint, in any
// language, with the attempt's claim identity, and turns the endpoint's answer
// into the intake's outcome.
//
// A [Forwarder] is an [intake.Config.AttemptHandler]: each attempt POSTs the
// raw update body to the endpoint with three headers, [HeaderUpdateID],
// [HeaderAttempt] and [HeaderClaimID]. The endpoint persists all three with
// its own database write and fences that write with the store's check in the
// same transaction (with PostgreSQL, the SQL function the schema defines), so
// a stale attempt can never write.
//
// The answer decides what happens next:
//
//   - 2xx: the update is completed.
//   - 429 or 503 with a Retry-After header: tried again after that wait.
//   - Any other 4xx: the endpoint refused it for good; no further attempts,
//     the update becomes an exhaustion.
//   - 5xx, 429 or 503 without Retry-After, a timeout or a connection error:
//     tried again with backoff, up to the attempt ceiling.
//
// [Forwarder.HandleExhaustion] is an [intake.Config.ExhaustionHandler] that
// POSTs each exhaustion as JSON ([ExhaustionPayload]) to a second endpoint; a
// 2xx acknowledges it, anything else leaves it to be delivered again.
package forward

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/tgrelay/tgrelay/intake"
)

// Headers set on every forwarded request.
const (
	HeaderUpdateID = "Tgrelay-Update-Id"
	HeaderAttempt  = "Tgrelay-Attempt"
	HeaderClaimID  = "Tgrelay-Claim-Id"
	// HeaderKind is "update" for an attempt and "exhaustion" for an
	// exhaustion delivery.
	HeaderKind = "Tgrelay-Kind"
)

const (
	// DefaultTimeout bounds one forward, from connect to the end of the
	// answer.
	DefaultTimeout = 30 * time.Second
	// MaxTimeout is the largest Timeout accepted.
	MaxTimeout = time.Hour
	// DefaultMaxResponseBytes is how much of an answer's body is read (and
	// discarded) so the connection can be reused; the rest is dropped with
	// the connection.
	DefaultMaxResponseBytes = 64 << 10
	// MaxRetryAfter caps a Retry-After the endpoint asks for.
	MaxRetryAfter = time.Hour
	// DefaultMaxIdleConnsPerHost is how many idle keep-alive connections to
	// the endpoint the default client keeps. The standard library's default
	// of 2 would close and re-dial connections whenever more than two
	// forwards run at once (the intake runs 32 by default).
	DefaultMaxIdleConnsPerHost = 128
)

// Config configures a Forwarder.
type Config struct {
	// URL is the endpoint updates are POSTed to. Required for
	// [Forwarder.Handle]: an absolute http or https URL.
	URL string
	// ExhaustionURL is the endpoint exhaustions are POSTed to. Required
	// for [Forwarder.HandleExhaustion]; empty disables it.
	ExhaustionURL string
	// Client sends the requests. Nil means a client of its own with the
	// standard library's default transport settings (keep-alive, proxies
	// from the environment) but [DefaultMaxIdleConnsPerHost] idle
	// connections per host.
	Client *http.Client
	// Timeout bounds one forward, 1 ms to [MaxTimeout]. Zero means
	// [DefaultTimeout]. Keep it below the intake lease.
	Timeout time.Duration
	// Header holds extra headers sent with every request, such as an
	// authorisation token for the endpoint. Copied by New.
	Header http.Header
}

// Forwarder forwards updates and exhaustions to HTTP endpoints. It is safe
// for concurrent use.
type Forwarder struct {
	url, exhaustionURL string
	client             *http.Client
	timeout            time.Duration
	header             http.Header
}

// New returns a Forwarder for cfg, or an error naming the invalid field.
func New(cfg Config) (*Forwarder, error) {
	if cfg.URL == "" && cfg.ExhaustionURL == "" {
		return nil, errors.New("forward: URL or ExhaustionURL is required")
	}
	for name, raw := range map[string]string{"URL": cfg.URL, "ExhaustionURL": cfg.ExhaustionURL} {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("forward: %s must be an absolute http or https URL", name)
		}
	}
	switch {
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	case cfg.Timeout < time.Millisecond || cfg.Timeout > MaxTimeout:
		return nil, fmt.Errorf("forward: Timeout %v is outside 1ms..%v", cfg.Timeout, MaxTimeout)
	}
	if cfg.Client == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
		cfg.Client = &http.Client{Transport: t}
	}
	return &Forwarder{
		url:           cfg.URL,
		exhaustionURL: cfg.ExhaustionURL,
		client:        cfg.Client,
		timeout:       cfg.Timeout,
		header:        cfg.Header.Clone(),
	}, nil
}

// StatusError is an endpoint's non-2xx answer.
type StatusError struct {
	// Kind is "update" or "exhaustion".
	Kind string
	// Code is the HTTP status code.
	Code int
	// RetryAfter is the endpoint's Retry-After, zero when absent.
	RetryAfter time.Duration
}

// Error implements error.
func (e *StatusError) Error() string {
	return fmt.Sprintf("forward: %s endpoint answered %d %s", e.Kind, e.Code, http.StatusText(e.Code))
}

// Handle POSTs the update to the endpoint. It has the signature of
// [intake.Config.AttemptHandler].
func (f *Forwarder) Handle(ctx context.Context, u intake.Update, a intake.Attempt) error {
	if f.url == "" {
		return intake.Abandon(errors.New("forward: no URL configured"))
	}
	err := f.post(ctx, f.url, "update", a.Identity, u.Body)
	var se *StatusError
	if !errors.As(err, &se) {
		return err
	}
	switch {
	case (se.Code == http.StatusTooManyRequests || se.Code == http.StatusServiceUnavailable) && se.RetryAfter > 0:
		return intake.RetryLater(se, se.RetryAfter)
	case se.Code >= 400 && se.Code < 500 && se.Code != http.StatusTooManyRequests && se.Code != http.StatusRequestTimeout:
		return intake.Abandon(se)
	default:
		return se
	}
}

// ExhaustionPayload is the JSON body of an exhaustion delivery.
type ExhaustionPayload struct {
	UpdateID    int64           `json:"update_id"`
	Attempt     int             `json:"attempt"`
	ClaimID     string          `json:"claim_id"`
	ExhaustedAt time.Time       `json:"exhausted_at"`
	Error       string          `json:"error"`
	Update      json.RawMessage `json:"update"`
}

// HandleExhaustion POSTs the exhaustion as an [ExhaustionPayload]. A 2xx
// answer acknowledges it. It has the signature of
// [intake.Config.ExhaustionHandler].
func (f *Forwarder) HandleExhaustion(ctx context.Context, e intake.Exhaustion) error {
	if f.exhaustionURL == "" {
		return errors.New("forward: no ExhaustionURL configured")
	}
	p := ExhaustionPayload{
		UpdateID: e.UpdateID, Attempt: e.Attempt, ClaimID: e.ClaimID,
		ExhaustedAt: e.ExhaustedAt.UTC(), Error: e.Error,
		Update: json.RawMessage(e.Body),
	}
	if !json.Valid(e.Body) {
		// An unparsable stored body is delivered as a JSON string, so the
		// payload stays valid JSON.
		raw, _ := json.Marshal(string(e.Body))
		p.Update = raw
	}
	body, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("forward: encode exhaustion: %w", err)
	}
	return f.post(ctx, f.exhaustionURL, "exhaustion", e.Identity, body)
}

func (f *Forwarder) post(ctx context.Context, target, kind string, id intake.Identity, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("forward: build %s request: %w", kind, err)
	}
	for k, vs := range f.header {
		req.Header[k] = append([]string(nil), vs...)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderUpdateID, strconv.FormatInt(id.UpdateID, 10))
	req.Header.Set(HeaderAttempt, strconv.Itoa(id.Attempt))
	req.Header.Set(HeaderClaimID, id.ClaimID)
	req.Header.Set(HeaderKind, kind)
	resp, err := f.client.Do(req)
	if err != nil {
		// *url.Error prints the endpoint's address, which may carry a
		// credential in its query; keep only its cause, so errors.Is still
		// finds context errors.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("forward: %s to endpoint failed: %w", kind, err)
	}
	_, _ = io.CopyN(io.Discard, resp.Body, DefaultMaxResponseBytes)
	resp.Body.Close()
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &StatusError{Kind: kind, Code: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
}

// retryAfter parses a Retry-After header: delay seconds or an HTTP date.
// It returns zero when absent or unparsable, and caps it at MaxRetryAfter.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	var d time.Duration
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(secs) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
		if d <= 0 {
			return 0
		}
	} else {
		return 0
	}
	return min(d, MaxRetryAfter)
}
