// Package hookowner decides who owns a bot's webhook registration: who may
// point the bot's Telegram webhook where. (The HTTP handler that receives
// the webhook's updates is [github.com/tgrelay/tgrelay/intake.Webhook].)
//
// A bot has one webhook. Two deployments that both call setWebhook on start
// take it from each other silently, and updates go to whichever started last.
// This package makes the webhook owned: the address tgrelay registers carries
// an owner tag derived from the webhook secret (an HMAC of a fixed context,
// never the secret itself), so a process can tell its own webhook from
// another's. [Claim] sets the webhook only when it is already this secret's,
// or when the operator names the current owner's host to take over from;
// [Check] reports whether the webhook still points here and [Watch] repeats
// that check periodically; [Delete] removes it only under the same rules.
//
// Messages name hosts only, never paths or queries, since another
// deployment's path may itself be a secret.
package hookowner

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/configerr"
)

// Caller makes one Bot API call and returns Telegram's raw result.
// [*github.com/tgrelay/tgrelay/botapi.Client] implements it.
type Caller interface {
	Call(ctx context.Context, method string, params any) (json.RawMessage, error)
}

// HostNone is the owner host of a bot without a webhook (a polling bot), and
// the value of [ClaimConfig.TakeoverFrom] that takes over from one.
const HostNone = "none"

// HostUnknown is the owner host reported for a webhook address that does not
// parse.
const HostUnknown = "unknown"

// OwnerParam is the query parameter that carries the owner tag.
const OwnerParam = "owner"

// ownerContext is the fixed message the owner tag authenticates. Changing it
// would orphan every webhook registered before.
const ownerContext = "tgrelay:telegram-webhook-owner"

// ownerTagLen is the length of the owner tag in hex digits (64 bits).
const ownerTagLen = 16

// ErrBadSecret reports a webhook secret Telegram would refuse: it must be 1 to
// 256 characters of A-Z, a-z, 0-9, _ and - ([botapi.ValidSecretToken], the
// one home of that rule). It is [botapi.ErrBadSecretToken].
var ErrBadSecret = botapi.ErrBadSecretToken

// OwnerTag returns the owner tag of a secret: the first 16 hex digits of
// HMAC-SHA256 keyed with the secret over a fixed context. It is deterministic
// per secret and does not reveal it.
func OwnerTag(secret string) (string, error) {
	if !botapi.ValidSecretToken(secret) {
		return "", ErrBadSecret
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ownerContext))
	return hex.EncodeToString(mac.Sum(nil))[:ownerTagLen], nil
}

// TaggedURL returns rawURL with the owner tag of secret as its owner query
// parameter, replacing any there. The path is untouched.
func TaggedURL(rawURL, secret string) (string, error) {
	tag, err := OwnerTag(secret)
	if err != nil {
		return "", err
	}
	u, q, err := parseAddress(rawURL)
	if err != nil {
		return "", fmt.Errorf("hookowner: the webhook address %w", err)
	}
	q.Set(OwnerParam, tag)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// parseAddress parses a webhook address and its query. The query must
// parse whole: [url.URL.Query] would drop a pair it cannot read (a ";", a
// bad escape), and the tagged address registered would silently lose it.
// The address holds no user name or password (configerr.URLCredential):
// Telegram's proof that a delivery is its own is the secret token, the
// address is compared with what getWebhookInfo reports and is shown by
// those who claim and check it, and the webhook's handler checks no
// credential in it. The error completes "the webhook address …" and never
// quotes rawURL.
func parseAddress(rawURL string) (*url.URL, url.Values, error) {
	u, err := configerr.HTTPURL(rawURL)
	if err != nil {
		return nil, nil, err
	}
	if err := configerr.URLCredential(u, "the webhook's secret token is what proves a delivery comes from Telegram"); err != nil {
		return nil, nil, err
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("has a query that does not parse (%w); tagging it would drop part of it", err)
	}
	return u, q, nil
}

// Reason says why a claim was refused.
type Reason string

const (
	// ReasonOwnedElsewhere: the webhook points to another address, or to
	// none, and the operator did not name its host as TakeoverFrom.
	ReasonOwnedElsewhere Reason = "owned-elsewhere"
	// ReasonOtherSecret: the webhook points to this address but carries the
	// owner tag of another secret.
	ReasonOtherSecret Reason = "other-secret"
	// ReasonNotConfirmed: setWebhook answered, but getWebhookInfo afterwards
	// does not show this address (or, when a certificate was uploaded, no
	// custom certificate).
	ReasonNotConfirmed Reason = "not-confirmed"
)

// ClaimError is a refused or unconfirmed claim. It names the host that holds
// the webhook, never its path.
type ClaimError struct {
	Reason Reason
	// OwnerHost is the host the webhook points to, HostNone or HostUnknown.
	OwnerHost string
}

// Error implements error. It names the owner's host and what to pass to
// take over, never a path.
func (e *ClaimError) Error() string {
	switch e.Reason {
	case ReasonOtherSecret:
		return fmt.Sprintf("hookowner: the webhook at host %s was set with another secret; to replace it, take over from %q", e.OwnerHost, e.OwnerHost)
	case ReasonNotConfirmed:
		return fmt.Sprintf("hookowner: setWebhook was not confirmed: the webhook now points to host %s", e.OwnerHost)
	default:
		return fmt.Sprintf("hookowner: the webhook belongs to host %s; to take it over, name %q as the host to take over from", e.OwnerHost, e.OwnerHost)
	}
}

// ClaimConfig describes the webhook to claim.
type ClaimConfig struct {
	// URL is the public address Telegram posts to, without the owner tag
	// and without a user name or password (refused: the secret token is
	// what proves a delivery is Telegram's).
	URL string
	// Secret is the webhook secret Telegram sends in the
	// X-Telegram-Bot-Api-Secret-Token header. It also derives the owner tag.
	Secret string
	// TakeoverFrom, when it equals the host the webhook currently points to
	// (HostNone for a polling bot), allows replacing another owner's webhook.
	// Empty means never take over.
	TakeoverFrom string
	// AllowedUpdates is sent as allowed_updates when non-nil.
	AllowedUpdates []string
	// MaxConnections is sent as max_connections when non-zero; 1..100.
	MaxConnections int
	// DropPendingUpdates is sent as drop_pending_updates. Defaults to false:
	// updates Telegram holds are kept.
	DropPendingUpdates bool
	// Certificate, when non-nil, is a PEM public key certificate uploaded
	// with setWebhook as its certificate file (multipart/form-data), so that
	// Telegram trusts a self-signed certificate served at URL. Nil uploads
	// none. Claim does not keep it.
	Certificate []byte
}

// ConfigError is an invalid [ClaimConfig] field: Field names it
// ("MaxConnections") and Err says what is wrong. It is the one config
// error type of every tgrelay package (relay.ConfigError is the same
// type).
type ConfigError = configerr.Error

// Validate reports the first invalid field of c as a *[ConfigError], as
// [Claim] would before it calls Telegram: the address, the secret and
// MaxConnections. It does no I/O.
func (c ClaimConfig) Validate() error {
	if _, _, err := parseAddress(c.URL); err != nil {
		return configerr.New("hookowner", "URL", "%w", err)
	}
	if !botapi.ValidSecretToken(c.Secret) {
		return &ConfigError{Pkg: "hookowner", Field: "Secret", Err: errors.New("is not a valid webhook secret: want 1-256 characters of A-Z, a-z, 0-9, _ and -"), Kind: ErrBadSecret}
	}
	if c.MaxConnections != 0 && (c.MaxConnections < 1 || c.MaxConnections > 100) {
		return configerr.New("hookowner", "MaxConnections", "is %d: want 1 to 100 (0: Telegram's default)", c.MaxConnections)
	}
	return nil
}

// ClaimResult is a successful claim.
type ClaimResult struct {
	// URL is the tagged address now registered.
	URL string
	// TakenFrom is the host taken over from; empty when the webhook was
	// already this secret's.
	TakenFrom string
	// PendingUpdates is Telegram's pending_update_count after the claim.
	PendingUpdates int
}

// info is what getWebhookInfo said.
type info struct {
	URL                  string `json:"url"`
	PendingUpdateCount   int    `json:"pending_update_count"`
	LastErrorDate        int64  `json:"last_error_date"`
	LastErrorMessage     string `json:"last_error_message"`
	MaxConnections       int    `json:"max_connections"`
	HasCustomCertificate bool   `json:"has_custom_certificate"`
}

// errNoWebhookURL: getWebhookInfo's result has no string "url", which
// Telegram always sends (empty when no webhook is set).
var errNoWebhookURL = errors.New(`the result is not an object with a string "url"`)

// getInfo calls getWebhookInfo. A result that is not Telegram's
// WebhookInfo (none, null, an object without its string "url") is an
// error: read as the zero info, it would say "no webhook" and let a
// claim take over from HostNone, or a delete report success, on an
// answer that said nothing about the webhook.
func getInfo(ctx context.Context, c Caller) (info, error) {
	raw, err := c.Call(ctx, "getWebhookInfo", struct{}{})
	if err != nil {
		return info{}, fmt.Errorf("hookowner: getWebhookInfo: %w", err)
	}
	// One decoding: the outer URL (a pointer, nil when "url" is missing
	// or null) takes the key from info's.
	var in struct {
		info
		URL *string `json:"url"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return info{}, fmt.Errorf("hookowner: getWebhookInfo answered an unexpected shape: %w", err)
	}
	if in.URL == nil {
		return info{}, fmt.Errorf("hookowner: getWebhookInfo answered an unexpected shape: %w", errNoWebhookURL)
	}
	in.info.URL = *in.URL
	return in.info, nil
}

// hostOf returns the host of a registered webhook address, HostNone for
// none and HostUnknown when it does not parse.
func hostOf(raw string) string {
	if raw == "" {
		return HostNone
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return HostUnknown
	}
	return u.Host
}

// withoutOwner returns raw with its owner parameter removed, for telling
// "this address, another secret" from "another address".
func withoutOwner(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	q := u.Query()
	q.Del(OwnerParam)
	u.RawQuery = q.Encode()
	return u.String()
}

// Claim sets the webhook to cfg.URL, tagged with the owner tag of cfg.Secret,
// only if it is this secret's already or cfg.TakeoverFrom names the host it
// currently points to. A refusal is a *[ClaimError] and calls no setWebhook.
// After setWebhook it reads the webhook back and reports ReasonNotConfirmed
// when Telegram does not show the tagged address, or shows no custom
// certificate after cfg.Certificate was uploaded.
func Claim(ctx context.Context, c Caller, cfg ClaimConfig) (ClaimResult, error) {
	if err := cfg.Validate(); err != nil {
		return ClaimResult{}, err
	}
	tagged, err := TaggedURL(cfg.URL, cfg.Secret)
	if err != nil {
		return ClaimResult{}, err
	}
	before, err := getInfo(ctx, c)
	if err != nil {
		return ClaimResult{}, err
	}
	owner := hostOf(before.URL)
	owned := before.URL == tagged
	if !owned && cfg.TakeoverFrom != owner {
		reason := ReasonOwnedElsewhere
		if before.URL != "" && withoutOwner(before.URL) == withoutOwner(tagged) {
			reason = ReasonOtherSecret
		}
		return ClaimResult{}, &ClaimError{Reason: reason, OwnerHost: owner}
	}
	params := map[string]any{
		"url":                  tagged,
		"secret_token":         cfg.Secret,
		"drop_pending_updates": cfg.DropPendingUpdates,
	}
	if cfg.AllowedUpdates != nil {
		params["allowed_updates"] = cfg.AllowedUpdates
	}
	if cfg.MaxConnections != 0 {
		params["max_connections"] = cfg.MaxConnections
	}
	if cfg.Certificate != nil {
		params["certificate"] = botapi.InputFile{Name: "certificate.pem", Reader: bytes.NewReader(cfg.Certificate)}
	}
	if _, err := c.Call(ctx, "setWebhook", params); err != nil {
		return ClaimResult{}, maskSecret(fmt.Errorf("hookowner: setWebhook: %w", err), cfg.Secret)
	}
	after, err := getInfo(ctx, c)
	if err != nil {
		return ClaimResult{}, err
	}
	if after.URL != tagged || (cfg.Certificate != nil && !after.HasCustomCertificate) {
		return ClaimResult{}, &ClaimError{Reason: ReasonNotConfirmed, OwnerHost: hostOf(after.URL)}
	}
	res := ClaimResult{URL: tagged, PendingUpdates: after.PendingUpdateCount}
	if !owned {
		res.TakenFrom = owner
	}
	return res, nil
}

// Mode is how a relay receives updates, as [Status] reports it.
type Mode string

// The modes.
const (
	// ModeWebhook: the relay claimed the webhook and checks that it still
	// points to it.
	ModeWebhook Mode = "webhook"
	// ModeUnmanaged: updates arrive by a webhook the relay does not manage
	// (no public URL was given): it leaves the registration as it is.
	ModeUnmanaged Mode = "unmanaged"
	// ModePolling: the relay long-polls getUpdates; there is no webhook.
	ModePolling Mode = "polling"
)

// Status is the webhook registration as last found: the one status type
// of [Check], [Watch], the relay's status and the dashboard. Only
// ModeWebhook has a registration to check; with the other modes the other
// fields are zero.
type Status struct {
	// Mode is how updates arrive.
	Mode Mode
	// Owned reports whether the webhook is the tagged address of this URL and
	// secret.
	Owned bool
	// OwnerHost is the host the webhook points to, HostNone or HostUnknown
	// (never a path or query, which could carry a secret).
	OwnerHost string
	// PendingUpdates is Telegram's pending_update_count.
	PendingUpdates int
	// CheckedAt is when the last claim or check ended; zero before one.
	CheckedAt time.Time
	// CheckError is the last check's own failure, empty when it succeeded.
	// The other fields keep what the last successful check found.
	CheckError string
	// LastErrorAt and LastError are Telegram's last delivery error; zero and
	// empty when it reported none.
	LastErrorAt time.Time
	LastError   string
}

// Check reports whether the webhook still points to rawURL tagged with
// secret's owner tag, and Telegram's last delivery error, as a Status of
// [ModeWebhook] checked now. A failed check returns its error and sets no
// CheckError: that is the caller's to keep.
func Check(ctx context.Context, c Caller, rawURL, secret string) (Status, error) {
	tagged, err := TaggedURL(rawURL, secret)
	if err != nil {
		return Status{}, err
	}
	in, err := getInfo(ctx, c)
	if err != nil {
		return Status{}, err
	}
	st := Status{
		Mode:           ModeWebhook,
		CheckedAt:      time.Now(),
		Owned:          in.URL == tagged,
		OwnerHost:      hostOf(in.URL),
		PendingUpdates: in.PendingUpdateCount,
	}
	if in.LastErrorDate > 0 && in.LastErrorMessage != "" {
		st.LastErrorAt = time.Unix(in.LastErrorDate, 0)
		st.LastError = in.LastErrorMessage
	}
	return st, nil
}

// Delete removes the webhook only when it was set with secret (its address
// carries secret's owner tag, whatever its path), or when takeoverFrom names
// the host it points to. Pending updates are kept. A bot without a webhook is
// left alone and reported as success.
func Delete(ctx context.Context, c Caller, secret, takeoverFrom string) error {
	tag, err := OwnerTag(secret)
	if err != nil {
		return err
	}
	in, err := getInfo(ctx, c)
	if err != nil {
		return err
	}
	owner := hostOf(in.URL)
	if owner == HostNone {
		return nil
	}
	if ownerTagOf(in.URL) != tag && takeoverFrom != owner {
		return &ClaimError{Reason: ReasonOwnedElsewhere, OwnerHost: owner}
	}
	if _, err := c.Call(ctx, "deleteWebhook", map[string]any{"drop_pending_updates": false}); err != nil {
		return fmt.Errorf("hookowner: deleteWebhook: %w", err)
	}
	return nil
}

// ownerTagOf returns the owner parameter of a registered address, or "".
func ownerTagOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Query().Get(OwnerParam)
}

// WatchConfig configures [Watch].
type WatchConfig struct {
	// URL and Secret are the webhook the watcher expects, as given to
	// [Claim].
	URL, Secret string
	// Interval is the period between checks; each check is bounded by it
	// too. Required, above zero.
	Interval time.Duration
	// Func sees the result of every check: the status, or the error of a
	// check that failed. Called from Watch's goroutine. Required.
	Func func(Status, error)
}

// Watch checks the webhook every cfg.Interval with [Check] and passes each
// result to cfg.Func, until ctx ends. It returns ctx's error, or at once an
// error when cfg is invalid. The first check runs one interval after the
// call (the caller has just claimed or checked).
func Watch(ctx context.Context, c Caller, cfg WatchConfig) error {
	if cfg.Interval <= 0 || cfg.Func == nil {
		return errors.New("hookowner: Watch needs an Interval above zero and a Func")
	}
	if _, err := TaggedURL(cfg.URL, cfg.Secret); err != nil {
		return err
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		cctx, cancel := context.WithTimeout(ctx, cfg.Interval)
		st, err := Check(cctx, c, cfg.URL, cfg.Secret)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		cfg.Func(st, err)
	}
}

// secretMaskedError is the error of a call that carried the webhook
// secret (setWebhook's secret_token) and whose message quoted it, as a
// refusal's description may echo what it was sent: its message has the
// secret masked. Unwrap returns the cause (for errors.As to
// *botapi.APIError), whose own message is not masked.
type secretMaskedError struct {
	err error
	msg string
}

func (e *secretMaskedError) Error() string { return e.msg }
func (e *secretMaskedError) Unwrap() error { return e.err }

// maskSecret returns err, or err with secret (in every form
// [botapi.Redactor] masks) masked in its message when it quotes it.
func maskSecret(err error, secret string) error {
	var red botapi.Redactor
	red.Add(secret)
	msg := err.Error()
	if masked := red.Redact(msg); masked != msg {
		return &secretMaskedError{err: err, msg: masked}
	}
	return err
}
