package gateway

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/botapi"
	"github.com/tgrelay/tgrelay/intake"
	"github.com/tgrelay/tgrelay/internal/safeerr"
	"github.com/tgrelay/tgrelay/wire"
)

type identityKey struct{}

// WithIdentity returns ctx carrying id, for calls made through
// [Gateway.RoundTripper] outside a handler the intake runner called (inside
// one, the runner's attempt is found without it).
func WithIdentity(ctx context.Context, id intake.Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the attempt identity a call made with ctx carries:
// the one [WithIdentity] set, else that of the runner's attempt
// ([intake.AttemptFrom]) when it has a claim id (a fenced store).
func IdentityFrom(ctx context.Context) (intake.Identity, bool) {
	if id, ok := ctx.Value(identityKey{}).(intake.Identity); ok {
		return id, true
	}
	if a, ok := intake.AttemptFrom(ctx); ok && a.ClaimID != "" {
		return a.Identity, true
	}
	return intake.Identity{}, false
}

// RoundTripper returns the gateway's logic as an [http.RoundTripper] for Go
// programs: give it to a Bot API client (go-telegram/bot's WithHTTPClient,
// telego's, botapi's) and pass the handler's ctx to every call. A call whose
// context carries an attempt identity (see [IdentityFrom]) is fenced and
// journaled as the handler fences and journals calls with an identity, and
// is answered the same way, including the gateway's own Telegram-shaped
// answers (409 for a stale attempt, a replayed answer, unknown). Other
// calls go straight to Config.Transport.
//
// The call goes to the request's own URL: the client's API root, not
// Config.APIRoot, and the token is not checked. The round tripper never
// returns an error for a call with an identity; its answer says what
// happened.
func (g *Gateway) RoundTripper() http.RoundTripper { return roundTripper{g} }

type roundTripper struct{ g *Gateway }

func (rt roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	id, ok := IdentityFrom(req.Context())
	if !ok {
		return rt.g.cfg.Transport.RoundTrip(req)
	}
	g := rt.g
	start := g.cfg.Test.Now()
	ctx, l, release := g.callContext(req.Context(), time.Now())
	c := &call{httpMethod: req.Method, upstream: req.URL.String(), query: queryParams(req.URL.RawQuery),
		contentType: req.Header.Get("Content-Type"), contentLength: req.ContentLength, leash: l}
	c.method = methodOf(req.URL.Path)
	var a answer
	if c.method == "" {
		closeBody(req)
		a = telegramError(http.StatusNotFound, wire.OutcomeRefused, "Not Found: tgrelay: not a Bot API method URL", 0)
	} else if errAns := g.readBody(ctx, req.Body, c); errAns != nil {
		g.releaseBody(c)
		closeBody(req)
		a = *errAns
	} else {
		if c.complete {
			closeBody(req)
		} else {
			defer closeBody(req)
		}
		a = g.handle(ctx, &id, c)
		g.releaseBody(c)
	}
	g.observe(g.shownMethod(c.method), a, true, false, start, false)
	var body io.ReadCloser = io.NopCloser(bytes.NewReader(a.body))
	if a.stream != nil {
		// The call's context lives until the caller closes the stream.
		body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(a.body), a.stream), closerFunc(func() error {
			defer release()
			return a.stream.Close()
		})}
	} else {
		release()
	}
	return &http.Response{
		Status: http.StatusText(a.status), StatusCode: a.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: a.header, Body: body, ContentLength: -1, Request: req,
	}, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// methodOf returns the method of a /bot<token>/<method> URL path, or the
// empty string.
func methodOf(path string) string {
	i := strings.LastIndex(path, "/bot")
	if i < 0 {
		return ""
	}
	_, method, ok := strings.Cut(path[i+len("/bot"):], "/")
	if !ok || !botapi.ValidMethod(method) {
		return ""
	}
	return method
}

// DefaultStreamHeaderTimeout bounds the wait for the head of a streamed
// call's answer, once its request is written, when
// StreamConfig.HeaderTimeout is zero.
const DefaultStreamHeaderTimeout = 5 * time.Minute

// NewStreamTransport returns a streaming [http.RoundTripper] for
// Config.StreamTransport: the standard library's transport (proxies from
// the environment, keep-alive), whose failures before a connection was
// ready (lookup, connect, proxy CONNECT, TLS handshake) are marked as not
// dispatched (the request was never written), and every other failure
// counts as unknown. Wrap it in the same limiter as Config.Transport. It is
// NewStreamTransportConfig(StreamConfig{}).
func NewStreamTransport() http.RoundTripper { return NewStreamTransportConfig(StreamConfig{}) }

// StreamConfig configures [NewStreamTransportConfig] with the parts of the
// Bot API client's configuration (a transport.Config's fields of the same
// names) that a streaming transport applies, so that streamed calls go the
// way Config.Transport's go.
type StreamConfig struct {
	// Proxy picks the proxy, as http.Transport.Proxy does. Nil means the
	// environment's (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
	Proxy func(*http.Request) (*url.URL, error)
	// TLSConfig is used for https destinations and proxies; it is cloned.
	// Nil means the system's roots.
	TLSConfig *tls.Config
	// HeaderTimeout bounds the wait for the answer's head once the request
	// is written. Zero means [DefaultStreamHeaderTimeout].
	HeaderTimeout time.Duration
}

// NewStreamTransportConfig returns [NewStreamTransport]'s round tripper
// configured by c.
func NewStreamTransportConfig(c StreamConfig) http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32
	t.ResponseHeaderTimeout = cmp.Or(c.HeaderTimeout, DefaultStreamHeaderTimeout)
	if c.Proxy != nil {
		t.Proxy = c.Proxy
	}
	if c.TLSConfig != nil {
		t.TLSClientConfig = c.TLSConfig.Clone()
	}
	t.OnProxyConnectResponse = proxyRefusal
	return streamTransport{t}
}

// proxyRefusal is the stream transport's OnProxyConnectResponse: a refused
// CONNECT is reported as package transport reports it
// ([safeerr.ProxyRefused]), where net/http would quote the proxy's own
// reason phrase, which may echo the credentials it was sent.
func proxyRefusal(_ context.Context, _ *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return safeerr.ProxyRefused(resp.StatusCode)
}

type streamTransport struct{ t *http.Transport }

func (s streamTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	// net/http reports GotConn (HTTP/1 and HTTP/2 alike) once a connection,
	// TLS handshake and proxy CONNECT included, is ready and before any
	// byte of the request is written to it: a failure before it (a TLS
	// handshake refused, a connection closed mid-handshake, a budget run
	// out) left nothing on any socket.
	var gotConn atomic.Bool
	ctx := httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	resp, err := s.t.RoundTrip(req.WithContext(ctx))
	if err == nil {
		return resp, nil
	}
	// Classified first, then cut: the quoted bytes of a malformed answer
	// may echo credentials or the token, and a cut error no longer wraps
	// its cause (safeerr.Unquoted).
	var op *net.OpError
	if !gotConn.Load() || errors.As(err, &op) && (op.Op == "dial" || op.Op == "proxyconnect") {
		return nil, &dialError{safeerr.Unquoted(err)}
	}
	return nil, safeerr.Unquoted(err)
}

// dialError is a failure to connect (TLS handshake and proxy included): no
// byte of the request was written.
type dialError struct{ err error }

func (e *dialError) Error() string       { return "gateway: connect failed: " + e.err.Error() }
func (e *dialError) Unwrap() error       { return e.err }
func (e *dialError) NotDispatched() bool { return true }
