package intake

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/internal/readall"
)

// DefaultMaxBodyBytes is the default body limit of a [Webhook]: 1 MiB.
// Telegram's updates are far smaller.
const DefaultMaxBodyBytes = 1 << 20

// MaxMaxBodyBytes is the largest body limit a [Webhook] accepts.
const MaxMaxBodyBytes = 64 << 20

// SecretHeader is the header Telegram sends the webhook's secret_token in.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// WebhookConfig configures a [Webhook]. [NewWebhook] copies it.
type WebhookConfig struct {
	// Runner records the updates. Required.
	Runner *Runner
	// Secret is the secret_token given to setWebhook: 1 to 256 characters
	// of A-Z, a-z, 0-9, _ and -. Required unless InsecureNoSecret is set.
	// It never appears in a log line or an error.
	Secret string
	// InsecureNoSecret accepts requests without checking the secret
	// header, for local tests only. Anyone who can reach the endpoint can
	// then inject updates.
	InsecureNoSecret bool
	// MaxBodyBytes bounds the request body, 1 to [MaxMaxBodyBytes]; a
	// larger body is answered 413. Zero means [DefaultMaxBodyBytes].
	MaxBodyBytes int64
	// Logger receives store failures (never the body or the secret). Nil
	// discards.
	Logger *slog.Logger
}

// Webhook is the http.Handler Telegram posts updates to. It answers:
//
//   - 405 with Allow: POST for any other method;
//   - 403 when the secret header is missing or wrong (checked before the
//     body is read, in constant time that also hides the secret's length);
//   - 413 when the body exceeds the limit, closing the connection;
//   - 400 when the body is not a Telegram update ([ParseUpdate]: among
//     others, one holding update_id twice in some letter case, or an id
//     above [MaxUpdateID]);
//   - 200 once the update is recorded durably, or was already recorded;
//   - 503 when the store failed, or did not answer within the runner's
//     [Config.AcceptTimeout], so that Telegram delivers it again.
//
// The Content-Type header is ignored. Responses have no body. A Webhook is
// safe for concurrent use.
type Webhook struct {
	runner   *Runner
	check    bool
	secret   [sha256.Size]byte
	maxBytes int64
	log      *slog.Logger
}

// badWebhookField returns the *[ConfigError] of an invalid WebhookConfig
// field.
func badWebhookField(field, format string, args ...any) error {
	return configerr.New("intake: WebhookConfig", field, format, args...)
}

// NewWebhook returns a Webhook for cfg, or a *[ConfigError] naming the
// invalid field (never the secret's value).
func NewWebhook(cfg WebhookConfig) (*Webhook, error) {
	if cfg.Runner == nil {
		return nil, badWebhookField("Runner", "is required")
	}
	w := &Webhook{runner: cfg.Runner, check: !cfg.InsecureNoSecret, maxBytes: cfg.MaxBodyBytes, log: cfg.Logger}
	switch {
	case cfg.InsecureNoSecret && cfg.Secret != "":
		return nil, badWebhookField("Secret", "and InsecureNoSecret are both set")
	case cfg.InsecureNoSecret:
	case cfg.Secret == "":
		return nil, badWebhookField("Secret", "is required (or set InsecureNoSecret for local tests)")
	case !botapi.ValidSecretToken(cfg.Secret):
		return nil, badWebhookField("Secret", "must be 1 to 256 characters of A-Z, a-z, 0-9, _ and -")
	default:
		w.secret = sha256.Sum256([]byte(cfg.Secret))
	}
	if w.maxBytes == 0 {
		w.maxBytes = DefaultMaxBodyBytes
	}
	if w.maxBytes < 1 || w.maxBytes > MaxMaxBodyBytes {
		return nil, badWebhookField("MaxBodyBytes", "is %d: want 1 to %d (zero means %d)",
			cfg.MaxBodyBytes, MaxMaxBodyBytes, DefaultMaxBodyBytes)
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w, nil
}

// ServeHTTP implements http.Handler.
func (w *Webhook) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		rw.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	if w.check && !w.authorized(req) {
		rw.WriteHeader(http.StatusForbidden)
		return
	}
	body, buf, err := w.readBody(rw, req)
	if buf != nil {
		defer putBodyBuffer(buf) // Accept does not retain body
	}
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			// The rest of the body is unread: close rather than let the
			// server drain it, which net/http decides for itself only when
			// rw is its own (a wrapping handler hides that).
			rw.Header().Set("Connection", "close")
			rw.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		rw.WriteHeader(http.StatusBadRequest)
		return
	}
	a, err := w.runner.Accept(req.Context(), body)
	switch {
	case err != nil:
		w.log.Warn("intake: webhook could not record an update", "err", err)
		rw.WriteHeader(http.StatusServiceUnavailable)
	case a == Invalid:
		rw.WriteHeader(http.StatusBadRequest)
	default:
		rw.WriteHeader(http.StatusOK)
	}
}

// maxPooledBody bounds the bodies whose buffers are pooled: Telegram's
// updates are a few KiB at most, and a rare large one should not pin its
// buffer.
const maxPooledBody = 64 << 10

// bodyBuffers pools the buffers of bodies of declared length.
var bodyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func putBodyBuffer(buf *[]byte) {
	if cap(*buf) <= maxPooledBody {
		*buf = (*buf)[:0]
		bodyBuffers.Put(buf)
	}
}

// readBody reads the request's body, at most maxBytes (a larger one is a
// *http.MaxBytesError). A body of declared length, as Telegram sends, is
// read into a pooled buffer, returned as buf for putBodyBuffer once the
// body is no longer used (the runner copies what it keeps); buf is nil
// otherwise.
func (w *Webhook) readBody(rw http.ResponseWriter, req *http.Request) (body []byte, buf *[]byte, err error) {
	n := req.ContentLength
	if n < 0 {
		body, err = io.ReadAll(http.MaxBytesReader(rw, req.Body, w.maxBytes))
		return body, nil, err
	}
	if n > w.maxBytes {
		// Unread, so the server closes the connection rather than drain it.
		return nil, nil, &http.MaxBytesError{Limit: w.maxBytes}
	}
	buf = bodyBuffers.Get().(*[]byte)
	body, err = readDeclared(req.Body, (*buf)[:0], n)
	*buf = body[:0] // grown or not, the buffer goes back to the pool
	if err != nil {
		return nil, buf, err
	}
	// net/http's body reader ends at the declared length, so nothing
	// follows; check anyway for a handler mounted behind other plumbing.
	var one [1]byte
	if m, err := req.Body.Read(one[:]); m > 0 || (err != nil && err != io.EOF) {
		if m > 0 {
			return nil, buf, errors.New("intake: body longer than its Content-Length")
		}
		return nil, buf, err
	}
	return body, buf, nil
}

// readDeclared appends exactly n bytes of r to b, or fails with
// io.ErrUnexpectedEOF when r ends sooner. It grows b as the bytes arrive
// (internal/readall), never by the declared length alone: a request that
// declares a body of the limit and sends none (or trickles it) holds no
// more memory than it sent, where allocating n at once let each such
// connection pin the whole limit for the server's read timeout.
func readDeclared(r io.Reader, b []byte, n int64) ([]byte, error) {
	b, err := readall.Into(b, r, n)
	if err == nil && int64(len(b)) < n {
		return b, io.ErrUnexpectedEOF
	}
	return b, err
}

// secretHeaderKey is SecretHeader's canonical form, the key of
// http.Header.
var secretHeaderKey = http.CanonicalHeaderKey(SecretHeader)

// authorized compares the secret header with the configured secret in
// constant time. Hashing both first makes the comparison independent of the
// secret's length too.
func (w *Webhook) authorized(req *http.Request) bool {
	got, ok := req.Header[secretHeaderKey]
	if !ok || len(got) != 1 {
		return false
	}
	sum := sha256.Sum256([]byte(got[0]))
	return subtle.ConstantTimeCompare(sum[:], w.secret[:]) == 1
}
