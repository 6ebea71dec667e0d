package throttle

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/internal/readall"
	"github.com/tgrelay/tgrelay/wire"
)

// DefaultRetryAfter is the pause of a 429 from Telegram that names no
// retry_after (and carries no Retry-After header).
const DefaultRetryAfter = time.Second

// max429Bytes bounds how much of Telegram's 429 answer is read.
const max429Bytes = 64 << 10

// Transport is an http.RoundTripper that sends Bot API calls through a
// [Limiter]: a counted call (see [Counts]) waits its turn before it goes
// to Base, Telegram's 429 is retried within the call's MaxWait when the
// body can be sent again, and a call that cannot be sent within MaxWait
// is answered with a Telegram-shaped 429 (see the package doc,
// "Transport"). Other requests pass straight to Base. Build it with
// [NewTransport]; it is safe for concurrent use.
type Transport struct {
	limiter *Limiter
	base    http.RoundTripper
}

// NewTransport returns a Transport that paces calls with l and sends them
// with base (nil means http.DefaultTransport). It panics when l is nil, a
// programmer's error at setup.
func NewTransport(l *Limiter, base http.RoundTripper) *Transport {
	if l == nil {
		panic("throttle: NewTransport with a nil Limiter")
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &Transport{limiter: l, base: base}
}

// Limiter returns the transport's limiter.
func (t *Transport) Limiter() *Limiter { return t.limiter }

// RoundTrip implements http.RoundTripper. Its errors are Base's, the
// request context's while the call waited its turn (wrapped, and reporting
// NotDispatched() true: nothing was sent), a failure to read the request
// body (which reports NotDispatched() true too), or a [*BeforeSendError]
// when the context's [WithBeforeSend] function refused the send; none holds
// the URL, so none holds the token.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	method, ok := BotMethod(req.URL.Path)
	if !ok || !Counts(method) {
		if err := runBeforeSend(req.Context(), method); err != nil {
			closeBody(req)
			return nil, err
		}
		return t.base.RoundTrip(req)
	}
	tg, body, replay, err := inspect(req)
	if err != nil {
		closeBody(req)
		return nil, &bodyError{method: method, err: err}
	}
	ctx := req.Context()
	var p *Permit
	if tg.paid {
		p, err = t.limiter.WaitPaid(ctx, method, tg.chat)
	} else {
		p, err = t.limiter.Wait(ctx, method, tg.chat)
	}
	if err != nil {
		closeReader(body)
		var werr *WaitError
		if errors.As(err, &werr) {
			return throttled(req, werr.RetryAfter), nil
		}
		return nil, &waitEndedError{method: method, err: err}
	}
	if err := runBeforeSend(ctx, method); err != nil {
		closeReader(body)
		p.Cancel() // nothing was sent: it does not count
		return nil, err
	}
	// The moment the answer's first byte was read, when Base is net/http's
	// transport: the send is counted from then (see the package doc,
	// "Counting"), not from when this goroutine runs again.
	var firstByte atomic.Int64
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotFirstResponseByte: func() { firstByte.Store(t.limiter.clock.Now().UnixNano()) },
	})
	answered := func() time.Time {
		if n := firstByte.Swap(0); n != 0 {
			return time.Unix(0, n)
		}
		return time.Time{}
	}
	for {
		// A shallow copy: the base transport reads the request and
		// changes nothing in it, so its header and URL are shared.
		out := req.WithContext(traced)
		out.Body = body
		if replay != nil {
			out.GetBody = replay
		}
		resp, err := t.base.RoundTrip(out)
		if err != nil {
			var nd interface{ NotDispatched() bool }
			if errors.As(err, &nd) && nd.NotDispatched() {
				p.Cancel()
			} else {
				p.doneAt(answered())
			}
			return nil, err
		}
		if resp.StatusCode != http.StatusTooManyRequests {
			p.doneAt(answered())
			return resp, nil
		}
		at := answered()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, max429Bytes))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(data))
		resp.ContentLength = int64(len(data))
		resp.Header.Del("Content-Length")
		refusal := botapi.ParseAnswer(method, resp.StatusCode, data)
		if refusal == nil || refusal.NotJSON {
			// A 429 that is not Telegram's JSON (a proxy's or a load
			// balancer's page): nothing says Telegram did not act, so the
			// call is not sent again, and it counts as sent.
			p.doneAt(at)
			return resp, nil
		}
		ra := retryAfterOf(refusal, resp.Header)
		now := t.limiter.clock.Now()
		if replay == nil || now.Add(ra).After(p.Deadline()) {
			p.Limited(ra) // Telegram's own answer goes back as it came
			return resp, nil
		}
		next, err := replay()
		if err != nil {
			p.Limited(ra)
			return resp, nil
		}
		if err := p.Retry(ctx, ra); err != nil {
			closeReader(next)
			var werr *WaitError
			if errors.As(err, &werr) {
				return throttled(req, werr.RetryAfter), nil
			}
			// Telegram's 429 said it did not act: still nothing sent.
			return nil, &waitEndedError{method: method, err: err}
		}
		if err := runBeforeSend(ctx, method); err != nil {
			closeReader(next)
			p.Cancel() // the retry is not sent: it does not count
			return nil, err
		}
		body = next
	}
}

type beforeSendKey struct{}

// WithBeforeSend returns ctx carrying fn, which a [Transport] given a
// request with that context runs when the call may go: after the limiter
// granted it its turn (at once for a call that does not count), and before
// the request goes to Base; again before each resend after Telegram's 429,
// once the retry has its turn, so a caller can still stop a call that
// Telegram did not act on (the gateway does when the app that made it has
// gone). It runs on the goroutine that called RoundTrip,
// while the call holds its permit, so the chat's next call waits for it:
// keep it short and bounded by the request's context.
//
// When fn returns an error the request is not sent: its body is closed, its
// permit cancelled (the call does not count against any limit), and
// RoundTrip returns a [*BeforeSendError] wrapping fn's error. A call that
// never gets its turn (its context ends, or it is answered with the
// limiter's 429) never runs fn. The gateway records a call's journal intent
// here, so an intent stands only for a call that is about to leave.
func WithBeforeSend(ctx context.Context, fn func() error) context.Context {
	return context.WithValue(ctx, beforeSendKey{}, fn)
}

// RunsBeforeSend reports true: t runs the function [WithBeforeSend] put in
// a request's context. A RoundTripper wrapping a Transport may forward it
// when it hands every request on unchanged; the gateway asks for it to
// learn whether it may leave its journal intent to the transport.
func (t *Transport) RunsBeforeSend() bool { return true }

func runBeforeSend(ctx context.Context, method string) error {
	fn, _ := ctx.Value(beforeSendKey{}).(func() error)
	if fn == nil {
		return nil
	}
	if err := fn(); err != nil {
		return &BeforeSendError{Method: method, Err: err}
	}
	return nil
}

// BeforeSendError reports that the function of [WithBeforeSend] refused a
// call when its turn came: nothing was sent, and it did not count.
type BeforeSendError struct {
	Method string // the Bot API method, empty for a request that is not a call
	Err    error  // the function's error
}

func (e *BeforeSendError) Error() string {
	return fmt.Sprintf("throttle: %s not sent: refused before sending: %v", e.Method, e.Err)
}

// Unwrap returns the function's error.
func (e *BeforeSendError) Unwrap() error { return e.Err }

// NotDispatched reports true: the request never left.
func (e *BeforeSendError) NotDispatched() bool { return true }

// BotMethod returns the method of a Bot API URL path
// ("…/bot<token>/<method>"), or false for any other path (a file download
// "/file/bot<token>/<path>" included): [wire.BotMethod].
func BotMethod(path string) (string, bool) { return wire.BotMethod(path) }

// inspect finds a call's chat_id and allow_paid_broadcast and returns the
// body to send (the bytes read, then the rest of the original, unread) and,
// when the body can be sent again, a function that returns it afresh.
func inspect(req *http.Request) (tg target, body io.ReadCloser, replay func() (io.ReadCloser, error), err error) {
	tg.fromQuery(req.URL.Query())
	if req.Body == nil || req.Body == http.NoBody {
		return tg, req.Body, func() (io.ReadCloser, error) { return http.NoBody, nil }, nil
	}
	replay = req.GetBody
	ct, params, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	var read []byte
	switch ct {
	case "application/json", "application/x-www-form-urlencoded":
		if read, err = readPeek(req.Body, nil, req.ContentLength); err != nil {
			return tg, nil, nil, err
		}
		if ct == "application/json" {
			tg.fromJSON(read)
		} else {
			tg.fromForm(read, len(read) <= MaxPeekBytes)
		}
	case "multipart/form-data":
		rec := &recorder{r: req.Body, max: MaxPeekBytes}
		tg.fromMultipart(rec, params["boundary"])
		// Read on to MaxPeekBytes: a body that ends within it (a call with
		// no file, as go-telegram/bot sends every call) can be replayed.
		if read, err = readPeek(req.Body, rec.buf, -1); err != nil {
			return tg, nil, nil, err
		}
	default:
		return tg, req.Body, replay, nil
	}
	if len(read) <= MaxPeekBytes { // the whole body
		req.Body.Close()
		replay = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(read)), nil }
		body, _ := replay()
		return tg, body, replay, nil
	}
	return tg, &splicedBody{r: io.MultiReader(bytes.NewReader(read), req.Body), c: req.Body}, replay, nil
}

// readPeek reads body on after the bytes already read, up to one byte more
// than MaxPeekBytes: a result of at most MaxPeekBytes is the whole body.
// size is the body's declared length (-1 when unknown), which sizes the
// buffer of a body read from its start.
func readPeek(body io.Reader, read []byte, size int64) ([]byte, error) {
	if len(read) == 0 {
		return readall.Bounded(body, size, MaxPeekBytes+1)
	}
	return readall.Into(read, body, MaxPeekBytes+1)
}

// splicedBody is the bytes read ahead, then the rest of the original body;
// closing it closes the original.
type splicedBody struct {
	r io.Reader
	c io.Closer
}

func (b *splicedBody) Read(p []byte) (int, error) { return b.r.Read(p) }
func (b *splicedBody) Close() error               { return b.c.Close() }

// bodyError reports that a request body could not be read: nothing was
// sent.
type bodyError struct {
	method string
	err    error
}

func (e *bodyError) Error() string {
	return fmt.Sprintf("throttle: reading the body of %s: %v", e.method, e.err)
}
func (e *bodyError) Unwrap() error       { return e.err }
func (e *bodyError) NotDispatched() bool { return true }

// waitEndedError reports that a call's context ended while it waited for
// its turn (or, after Telegram's 429, for its retry): nothing was sent, so
// sending it again is safe. A caller that journals outcomes (the gateway)
// must not count it as unknown.
type waitEndedError struct {
	method string
	err    error
}

func (e *waitEndedError) Error() string {
	return fmt.Sprintf("throttle: %s not sent: %v", e.method, e.err)
}
func (e *waitEndedError) Unwrap() error       { return e.err }
func (e *waitEndedError) NotDispatched() bool { return true }

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

func closeReader(r io.ReadCloser) {
	if r != nil {
		r.Close()
	}
}

// retryAfterOf is the wait of Telegram's 429 refusal: its
// parameters.retry_after (botapi's reading of it), then a Retry-After
// header (seconds), then DefaultRetryAfter. A wait below DefaultRetryAfter
// (0, negative, a fraction: Telegram names whole seconds) is read as none,
// so a 429 is never retried in a tight loop; one above MaxLimitPer is
// clamped to it, never ignored (which would retry a call Telegram told to
// wait for a day after DefaultRetryAfter).
func retryAfterOf(refusal *botapi.APIError, h http.Header) time.Duration {
	if d, ok := clampRetryAfter(refusal.RetryAfter.Seconds()); ok {
		return d
	}
	if s, err := strconv.Atoi(strings.TrimSpace(h.Get("Retry-After"))); err == nil {
		if d, ok := clampRetryAfter(float64(s)); ok {
			return d
		}
	}
	return DefaultRetryAfter
}

// clampRetryAfter turns s seconds into a wait of DefaultRetryAfter to
// MaxLimitPer, or reports false when s is below DefaultRetryAfter (or NaN).
func clampRetryAfter(s float64) (time.Duration, bool) {
	switch {
	case !(s >= DefaultRetryAfter.Seconds()):
		return 0, false
	case s >= MaxLimitPer.Seconds():
		return MaxLimitPer, true
	}
	return time.Duration(s * float64(time.Second)), true
}

// throttled is the Telegram-shaped 429 of a call the limiter refused.
func throttled(req *http.Request, retryAfter time.Duration) *http.Response {
	secs := int64(retryAfterSeconds(retryAfter) / time.Second)
	body := fmt.Sprintf(`{"ok":false,"error_code":429,"description":"Too Many Requests: retry after %d","parameters":{"retry_after":%d}}`, secs, secs)
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	h.Set(wire.HeaderOutcome, string(wire.OutcomeThrottled))
	return &http.Response{
		Status:        "429 Too Many Requests",
		StatusCode:    http.StatusTooManyRequests,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
