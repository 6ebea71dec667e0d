package botapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/internal/configerr"
	"github.com/tgrelay/tgrelay/internal/readall"
)

// Defaults and limits of [Config].
const (
	// DefaultAPIRoot is Telegram's Bot API root.
	DefaultAPIRoot = "https://api.telegram.org"
	// DefaultTimeout bounds a whole call (connect, upload, answer) made
	// through the default HTTP client used when [Config.HTTPClient] is nil.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxResponseBytes bounds the body of an answer that is read. It
	// leaves room for a full getUpdates batch (100 updates).
	DefaultMaxResponseBytes = 4 << 20
	// MaxTokenBytes bounds the length of a bot token.
	MaxTokenBytes = 256
	// MaxMethodBytes bounds the length of a method name.
	MaxMethodBytes = 64
)

// Errors of [New] and [Client.Call]. None of their messages contain the
// token.
var (
	// ErrInvalidToken: the token does not have a bot token's shape (see
	// [ValidToken]).
	ErrInvalidToken = errors.New("botapi: invalid bot token")
	// ErrInvalidMethod: the method name is empty, longer than
	// MaxMethodBytes, or not made of A-Z a-z 0-9 _.
	ErrInvalidMethod = errors.New("botapi: invalid method name")
	// ErrNotConfigured: Call was made on a Client not built by New.
	ErrNotConfigured = errors.New("botapi: Client must be created with New")
	// ErrResponseTooLarge: the answer's body exceeded MaxResponseBytes.
	// The request was sent, so the outcome of the call is unknown.
	ErrResponseTooLarge = errors.New("botapi: response exceeded MaxResponseBytes")
)

// Config configures a [Client]. The zero value is ready to use. [New]
// copies it, so later changes by the caller have no effect.
type Config struct {
	// APIRoot is the Bot API root URL, http or https, such as
	// "http://127.0.0.1:8081" for a local Bot API server. Trailing slashes
	// are stripped; a path prefix is kept. Empty means DefaultAPIRoot.
	APIRoot string
	// HTTPClient sends the requests. Use transport's client to tell a
	// request that was never dispatched from one whose outcome is unknown.
	// Nil means a client of Go's default transport with Timeout
	// DefaultTimeout. The Client uses a copy whose CheckRedirect never
	// follows a redirect: a Bot API call is written once, and a 3xx is an
	// answer that is not Telegram's JSON ([APIError.NotJSON]).
	HTTPClient *http.Client
	// MaxResponseBytes bounds the answer body read. Zero means
	// DefaultMaxResponseBytes; negative is an error.
	MaxResponseBytes int64
}

// Client calls the Bot API for one bot. It is safe for concurrent use. Build
// it with [New]; the zero Client is not configured, and its Call fails with
// [ErrNotConfigured].
type Client struct {
	token    string
	root     string
	http     *http.Client
	maxBytes int64
	redactor Redactor // masks token
}

// New returns a Client for the bot with token. It fails with
// [ErrInvalidToken] for an unusable token, and with an error naming the field
// for an invalid [Config].
func New(token string, cfg Config) (*Client, error) {
	if !ValidToken(token) {
		return nil, ErrInvalidToken
	}
	c := &Client{token: token, root: DefaultAPIRoot, http: cfg.HTTPClient, maxBytes: cfg.MaxResponseBytes}
	c.redactor.add(token)
	if cfg.APIRoot != "" {
		root, err := parseRoot(cfg.APIRoot)
		if err != nil {
			return nil, err
		}
		c.root = root
	}
	if c.http == nil {
		c.http = &http.Client{Timeout: DefaultTimeout}
	} else {
		hc := *c.http
		c.http = &hc
	}
	// Following a redirect would write the call again after it reached the
	// server, and report the second request's outcome (even "not
	// dispatched") as the call's.
	c.http.CheckRedirect = NoRedirects
	switch {
	case c.maxBytes < 0:
		return nil, fmt.Errorf("botapi: Config.MaxResponseBytes must not be negative, got %d", c.maxBytes)
	case c.maxBytes == 0:
		c.maxBytes = DefaultMaxResponseBytes
	}
	return c, nil
}

// NoRedirects is an [http.Client] CheckRedirect func that stops at the
// first answer: a 3xx is the answer. Following it would send a request
// again after the first one reached its server, and report the second's
// outcome as the first's.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// parseRoot validates an API root ([configerr.BaseURL]) and strips its
// trailing slashes. Its error never quotes raw.
func parseRoot(raw string) (string, error) {
	if _, err := configerr.BaseURL(raw); err != nil {
		return "", fmt.Errorf("botapi: Config.APIRoot %w", err)
	}
	return strings.TrimRight(raw, "/"), nil
}

// ShownMethod is method as a log line, metric or trace may show it:
// "invalid" when it is no method name ([ValidMethod]) or redact would
// change it (a token's secret half is a valid name by its characters),
// else method itself. It is the one rule for showing a caller's method.
func ShownMethod(method string, redact func(string) string) string {
	if !ValidMethod(method) || redact(method) != method {
		return "invalid"
	}
	return method
}

// ValidMethod reports whether method is a Bot API method name as the
// client sends it: 1 to [MaxMethodBytes] letters, digits and underscores.
// It is the one method-name rule; the gateway checks the calls it
// receives with it too.
func ValidMethod(method string) bool {
	if method == "" || len(method) > MaxMethodBytes {
		return false
	}
	for _, r := range method {
		if !isWordChar(r) {
			return false
		}
	}
	return true
}

func isWordChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_'
}

// Redact masks the client's own token in s, whatever its shape, and anything
// else shaped like a bot token (see [Redact]). The bot id stays readable.
func (c *Client) Redact(s string) string {
	return c.redactor.Redact(s)
}

// InputFile is a file uploaded with a call. Put it as a value in a
// map[string]any of parameters: the call is then sent as
// multipart/form-data, streamed, with the file as the part named by its key
// (refer to it as "attach://<key>" inside media JSON).
type InputFile struct {
	// Name is the file name Telegram sees. Empty means "file".
	Name string
	// Reader supplies the content. It is read once, while the request is
	// sent, and is not closed.
	Reader io.Reader
}

// MarshalJSON refuses to encode an InputFile: a file is only sent as a value
// of a map[string]any of parameters, never inside JSON.
func (InputFile) MarshalJSON() ([]byte, error) {
	return nil, errors.New("botapi: an InputFile must be a value of a map[string]any of parameters")
}

// RequestError is a call that failed without an answer from Telegram: the
// request could not be sent, the connection failed, the context ended, or the
// answer could not be read. Its message is redacted; Err is the cause below
// Go's *url.Error (whose message would print the URL, and so the token), so
// [errors.Is] and [errors.As] still reach context errors and transport's
// not-dispatched error.
type RequestError struct {
	// Method is the Bot API method that was called.
	Method string
	// Err is the cause. Its own message is not guaranteed to be redacted;
	// print the RequestError instead.
	Err error

	msg string
}

// Error returns "botapi: <method> request failed: <redacted cause>".
func (e *RequestError) Error() string {
	msg := e.msg
	if msg == "" && e.Err != nil {
		msg = Redact(e.Err.Error())
	}
	return "botapi: " + e.Method + " request failed: " + msg
}

// Unwrap returns the cause.
func (e *RequestError) Unwrap() error { return e.Err }

// requestError wraps err, dropping the *url.Error layer and redacting the
// message.
func (c *Client) requestError(method string, err error) *RequestError {
	var ue *url.Error
	if errors.As(err, &ue) && ue.Err != nil {
		err = ue.Err
	}
	return &RequestError{Method: method, Err: err, msg: c.Redact(err.Error())}
}

// Call invokes method with params and returns Telegram's raw "result".
//
// params is encoded as JSON (nil means {}), unless it is a map[string]any
// holding an [InputFile] or *InputFile: then the call is sent as
// multipart/form-data, streamed through a pipe, with strings as they are and
// other values JSON-encoded. The file's read stops when ctx ends; Call waits
// for the streaming goroutine before returning, unless ctx ends while the
// file's Read blocks, in which case that goroutine ends when Read returns.
//
// A refusal, or an answer that is not Telegram's JSON, is an [*APIError]. A
// failure without an answer is a [*RequestError]. At most MaxResponseBytes of
// the answer are read. Cancelling ctx ends the call.
func (c *Client) Call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if c == nil || c.http == nil {
		return nil, ErrNotConfigured
	}
	if !ValidMethod(method) {
		return nil, ErrInvalidMethod
	}
	endpoint := c.root + "/bot" + c.token + "/" + method

	var (
		body        io.Reader
		contentType string
		streamDone  chan struct{}
		pr          *io.PipeReader
	)
	if m, ok := params.(map[string]any); ok && hasFile(m) {
		var pw *io.PipeWriter
		pr, pw = io.Pipe()
		mw := multipart.NewWriter(pw)
		body, contentType = pr, mw.FormDataContentType()
		streamDone = make(chan struct{})
		// A cancelled call must not wait for the file's reader. Go's
		// transport returns only once its read of the request body ends, and
		// that read waits here, on a Read of the reader that may block for
		// as long as the reader likes. Closing the pipe's writing end on
		// cancellation ends that read at once, with the context's error.
		stopClose := context.AfterFunc(ctx, func() { pw.CloseWithError(context.Cause(ctx)) })
		defer stopClose()
		go func() {
			defer close(streamDone)
			err := writeMultipart(ctx, mw, m)
			if err == nil {
				err = mw.Close()
			}
			pw.CloseWithError(err)
		}()
	} else {
		if params == nil {
			params = struct{}{}
		}
		b, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("botapi: %s: encode parameters: %w", method, err)
		}
		body, contentType = bytes.NewReader(b), "application/json"
	}

	raw, err := c.post(ctx, method, endpoint, body, contentType)
	if streamDone != nil {
		pr.CloseWithError(io.ErrClosedPipe)
		select {
		case <-streamDone:
		case <-ctx.Done():
		}
	}
	return raw, err
}

// post sends one request and reads its answer.
func (c *Client) post(ctx context.Context, method, endpoint string, body io.Reader, contentType string) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, body)
	if err != nil {
		return nil, c.requestError(method, err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.requestError(method, err)
	}
	defer resp.Body.Close()
	data, err := readall.Bounded(resp.Body, resp.ContentLength, c.maxBytes+1)
	if err != nil {
		return nil, c.requestError(method, err)
	}
	if int64(len(data)) > c.maxBytes {
		return nil, &RequestError{Method: method, Err: ErrResponseTooLarge, msg: ErrResponseTooLarge.Error()}
	}
	return parseResponse(method, resp.StatusCode, data, c.Redact)
}

// hasFile reports whether params holds an InputFile.
func hasFile(params map[string]any) bool {
	for _, v := range params {
		switch v.(type) {
		case InputFile, *InputFile:
			return true
		}
	}
	return false
}

// writeMultipart writes params as form fields, in key order, files streamed.
func writeMultipart(ctx context.Context, mw *multipart.Writer, params map[string]any) error {
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		var err error
		switch v := params[k].(type) {
		case nil:
		case InputFile:
			err = writeFile(ctx, mw, k, &v)
		case *InputFile:
			err = writeFile(ctx, mw, k, v)
		case string:
			err = mw.WriteField(k, v)
		case json.RawMessage:
			err = mw.WriteField(k, string(v))
		default:
			var b []byte
			if b, err = json.Marshal(v); err == nil {
				err = mw.WriteField(k, string(b))
			}
		}
		if err != nil {
			return fmt.Errorf("botapi: parameter %q: %w", k, err)
		}
	}
	return nil
}

// writeFile streams one file part, checking ctx between reads.
func writeFile(ctx context.Context, mw *multipart.Writer, key string, f *InputFile) error {
	if f == nil || f.Reader == nil {
		return errors.New("botapi: InputFile has no Reader")
	}
	name := f.Name
	if name == "" {
		name = "file"
	}
	w, err := mw.CreateFormFile(key, name)
	if err != nil {
		return err
	}
	_, err = io.Copy(w, ctxReader{ctx, f.Reader})
	return err
}

// ctxReader stops reading once ctx has ended.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

// envelope is the Bot API answer, kept raw so that a wrong type in one field
// never hides the others.
type envelope struct {
	OK          json.RawMessage `json:"ok"`
	Result      json.RawMessage `json:"result"`
	ErrorCode   json.RawMessage `json:"error_code"`
	Description json.RawMessage `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// notJSON is the description of an answer that was not a JSON object.
const notJSON = "response was not JSON"

// notEnvelope is the description of a JSON object without Telegram's
// boolean "ok": a proxy's or load balancer's JSON error, not Telegram's.
const notEnvelope = "response was not JSON in Telegram's envelope (no boolean \"ok\")"

// parseResponse turns an answer body into the result or an *APIError.
// redact is applied to Telegram's description.
func parseResponse(method string, status int, body []byte, redact func(string) string) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(body)
	var env envelope
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &env) != nil {
		return nil, &APIError{Method: method, Code: status, Description: notJSON, NotJSON: true}
	}
	if string(env.OK) == "true" {
		if len(env.Result) == 0 {
			return json.RawMessage("null"), nil
		}
		return env.Result, nil
	}
	if string(env.OK) != "false" {
		// Not Telegram's envelope (an ok-less JSON error of a proxy or a
		// load balancer): not Telegram's word, so its 5xx is no evidence
		// that the call was not acted on.
		return nil, &APIError{Method: method, Code: status, Description: notEnvelope, NotJSON: true}
	}
	e := &APIError{Method: method, Code: status, Description: "no description"}
	var code float64
	if json.Unmarshal(env.ErrorCode, &code) == nil && code == math.Trunc(code) && math.Abs(code) < 1e9 {
		e.Code = int(code)
	}
	var description string
	if json.Unmarshal(env.Description, &description) == nil {
		e.Description = redact(description)
	}
	var params struct {
		RetryAfter      json.RawMessage `json:"retry_after"`
		MigrateToChatID json.RawMessage `json:"migrate_to_chat_id"`
	}
	if json.Unmarshal(env.Parameters, &params) == nil {
		var seconds float64
		if json.Unmarshal(params.RetryAfter, &seconds) == nil && seconds > 0 {
			e.RetryAfter = MaxRetryAfter
			if seconds < MaxRetryAfter.Seconds() {
				e.RetryAfter = time.Duration(seconds * float64(time.Second))
			}
		}
		if id, err := strconv.ParseInt(string(params.MigrateToChatID), 10, 64); err == nil {
			e.MigrateToChatID = id
		}
	}
	return nil, e
}
