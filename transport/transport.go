package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"time"

	"github.com/tgrelay/tgrelay/internal/h1client"
	"github.com/tgrelay/tgrelay/internal/readall"
	"github.com/tgrelay/tgrelay/internal/safeerr"
)

// Transport is a dispatch-aware [http.RoundTripper] for HTTP/1.1.
//
// Like every RoundTripper it is safe for concurrent use by multiple
// goroutines, never interprets the answer's status (any answer, 4xx or 5xx
// included, is returned as a response with a nil error) and always closes
// the request body, even when it returns an error.
//
// In addition it promises:
//
//   - A [*NotDispatchedError] is returned only when no byte of this request
//     reached a socket; such a request may be sent again without risk of a
//     duplicate. Every other error is an [*OutcomeUnknownError].
//   - No hidden retries: a request is written at most once. Idempotency-Key
//     headers and Request.GetBody are ignored. An http.Client's request
//     following a redirect (Request.Response set) repeats one that was
//     sent: it is never written, and fails with an [*OutcomeUnknownError]
//     (the client of [NewClient] does not follow redirects at all).
//   - Every wait is bounded: the connect budget, the response timeout, the
//     response size, and the request's context.
//   - The body of a returned response is already in memory (at most
//     Config.MaxResponseBytes): the response timeout covers the whole body,
//     and reading Response.Body cannot fail.
//
// The zero Transport is not usable; create one with [New].
type Transport struct {
	cfg Config

	mu   sync.Mutex
	idle map[string]*h1client.Pool[*persistConn] // by destination key
}

// New returns a Transport configured by a copy of cfg, or a *[ConfigError]
// naming the first invalid field.
func New(cfg Config) (*Transport, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Transport{cfg: c, idle: make(map[string]*h1client.Pool[*persistConn])}, nil
}

// NewClient returns an [http.Client] whose Transport is New(cfg). Note that
// http.Client wraps transport errors in a [*url.Error] whose message holds
// the request URL, which for the Bot API contains the token: redact before
// logging, or unwrap to the [*NotDispatchedError].
//
// The client never follows a redirect: a 3xx is returned as the answer it
// is. Following one would send the request again after its first copy
// reached the server (a POST is repeated as it is on 307 and 308), and the
// outcome of that second request (not dispatched, say) would be reported
// as the call's, though the first one was dispatched.
func NewClient(cfg Config) (*http.Client, error) {
	t, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: t, CheckRedirect: noRedirects}, nil
}

// noRedirects is an [http.Client] CheckRedirect func that stops at the
// first answer: a redirect is returned to the caller, never followed, so a
// request is written at most once.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// errRedirect is the cause of the unknown outcome of a redirect an
// http.Client tried to follow through the Transport.
var errRedirect = errors.New("transport: redirect not followed: the request it would repeat was sent and answered with a redirect")

type responseTimeoutKey struct{}

// WithResponseTimeout returns a context that makes [Transport.RoundTrip] wait
// up to d (instead of Config.ResponseTimeout) from the first request byte to
// the end of the answer: use it for long polling (getUpdates with a timeout).
// d must be positive; otherwise RoundTrip fails with a NotDispatchedError of
// stage request.
func WithResponseTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, responseTimeoutKey{}, d)
}

// RoundTrip sends req and returns the answer, a [*NotDispatchedError], or an
// [*OutcomeUnknownError] meaning the request was (at least partly) handed
// to the socket and its outcome is unknown. When req's context carries a
// func installed with [WithResultFunc], RoundTrip calls it with the result
// before returning.
//
// Order of work: the body is read into memory (bounded by
// Config.MaxRequestBytes and by req's context alone); an idle connection is
// taken or a new one established (lookup, RFC 8305 race, proxy CONNECT, TLS,
// all within Config.ConnectTimeout); head and body are written; the answer
// is read within the response timeout.
//
// Cancellation: if req's context ends before the first request byte reached
// the socket, the error is a *NotDispatchedError whose stage is where the
// request was and whose cause matches the context's error with errors.Is.
// If it ends after, the error wraps the context's error and the outcome is
// unknown. A response timeout after the first byte wraps
// [ErrResponseTimeout]; a too large answer wraps [ErrResponseTooLarge].
//
// A body that is not in memory is read on a helper goroutine so the context
// can end the wait; on cancellation the body is closed, and a body whose
// Read ignores Close keeps that goroutine until Read returns.
//
// If a reused keep-alive connection fails before any byte of the request
// reached it, the request is written on a newly established connection
// instead (once); nothing was sent, so this is not a repetition.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.roundTrip(req)
	if f := resultFuncFrom(req.Context()); f != nil {
		resp = report(f, req, resp, err)
	}
	return resp, err
}

func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	if req.Response != nil {
		// An http.Client following a redirect (one not made by NewClient)
		// repeats a request that reached the server: never write it again.
		// The call's outcome is the first request's, and its answer was
		// not Telegram's: unknown.
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, &OutcomeUnknownError{Err: errRedirect}
	}
	ctx := req.Context()
	body, err := t.readBody(ctx, req)
	if err != nil {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: err}
	}
	if req.URL == nil {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: errors.New("transport: request has no URL")}
	}
	scheme := req.URL.Scheme
	if scheme != "http" && scheme != "https" {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: fmt.Errorf("%w %q", ErrUnsupportedScheme, scheme)}
	}
	if req.URL.Host == "" {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: errors.New("transport: request URL has no host")}
	}
	timeout := t.cfg.ResponseTimeout
	if v, ok := ctx.Value(responseTimeoutKey{}).(time.Duration); ok {
		if v <= 0 {
			return nil, &NotDispatchedError{Stage: StageRequest, Err: fmt.Errorf("transport: response timeout must be positive, got %v", v)}
		}
		timeout = v
	}
	closeConn := t.cfg.DisableKeepAlives || req.Close
	var msg bytes.Buffer
	msg.Grow(512 + len(body))
	if err := writeHead(&msg, req, len(body), closeConn); err != nil {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: err}
	}
	msg.Write(body)
	proxyURL, err := t.cfg.Proxy(req)
	if err != nil {
		// The error of a proxy function may quote the proxy URL and its
		// credentials: keep only that it failed.
		return nil, &NotDispatchedError{Stage: StageProxy, Err: errors.New("transport: proxy selection failed")}
	}
	d := destination{scheme: scheme, addr: canonicalAddr(req.URL), host: trimBrackets(req.URL.Hostname()), proxy: proxyURL}
	key := d.key()
	if err := ctx.Err(); err != nil {
		return nil, &NotDispatchedError{Stage: StageRequest, Err: context.Cause(ctx)}
	}

	fresh := closeConn
	for {
		var pc *persistConn
		reused := false
		if !fresh {
			pc = t.getIdle(key)
			reused = pc != nil
		}
		if pc == nil {
			pc, err = t.connect(ctx, d)
			if err != nil {
				return nil, err
			}
		}
		resp, written, keep, err := t.exchange(ctx, pc, req, msg.Bytes(), timeout)
		if err == nil {
			if keep && !closeConn && !resp.Close {
				t.putIdle(key, pc)
			} else {
				pc.close()
			}
			resp.Request = req
			return resp, nil
		}
		pc.close()
		if written == 0 {
			if reused && ctx.Err() == nil {
				fresh = true // nothing left on a stale connection: use a new one
				continue
			}
			return nil, &NotDispatchedError{Stage: StageRequest, Err: err}
		}
		return nil, &OutcomeUnknownError{Err: err}
	}
}

// readBody reads and closes req.Body, bounded by MaxRequestBytes and by
// the context: a body that never ends is abandoned (and closed) when the
// context ends.
func (t *Transport) readBody(ctx context.Context, req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, nil
	}
	check := func(b []byte, err error) ([]byte, error) {
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("transport: reading request body: %w", err)
		}
		if int64(len(b)) > t.cfg.MaxRequestBytes {
			return nil, fmt.Errorf("%w (limit %d bytes)", ErrRequestTooLarge, t.cfg.MaxRequestBytes)
		}
		return b, nil
	}
	if req.GetBody != nil && req.ContentLength >= 0 && req.ContentLength <= t.cfg.MaxRequestBytes {
		// An in-memory body (http.NewRequest sets GetBody for bytes and
		// strings readers) cannot block: read it here.
		return check(readall.Bounded(req.Body, req.ContentLength, t.cfg.MaxRequestBytes+1))
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := readall.Bounded(req.Body, req.ContentLength, t.cfg.MaxRequestBytes+1)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return check(r.b, r.err)
	case <-ctx.Done():
		req.Body.Close() // unblocks the reader for bodies that honour Close
		return nil, context.Cause(ctx)
	}
}

// exchange writes msg on pc and reads the answer. written is the number of
// request bytes the socket accepted; keep reports whether pc may be reused.
func (t *Transport) exchange(ctx context.Context, pc *persistConn, req *http.Request, msg []byte, timeout time.Duration) (resp *http.Response, written int64, keep bool, err error) {
	before := pc.raw.written.Load()
	defer func() { written = pc.raw.written.Load() - before }()
	if err := ctx.Err(); err != nil {
		return nil, 0, false, context.Cause(ctx)
	}
	stop := h1client.AfterDone(ctx, pc.conn)
	pc.conn.SetDeadline(time.Now().Add(timeout))
	pc.lim.Remaining, pc.lim.Hit = t.cfg.MaxResponseBytes, false
	_, err = pc.conn.Write(msg)
	if err == nil {
		resp, err = readResponse(pc.br, req)
	}
	stopped := stop()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			err = fmt.Errorf("%w: %v", context.Cause(ctx), err)
		case pc.lim.Hit:
			err = fmt.Errorf("%w (limit %d bytes)", ErrResponseTooLarge, t.cfg.MaxResponseBytes)
		case errors.Is(err, os.ErrDeadlineExceeded):
			err = fmt.Errorf("%w (%v): %w", ErrResponseTimeout, timeout, err)
		}
		return nil, 0, false, err
	}
	keep = stopped && pc.br.Buffered() == 0
	if keep {
		pc.conn.SetDeadline(time.Time{})
	}
	return resp, 0, keep, nil
}

// destination identifies where a connection leads.
type destination struct {
	scheme string   // of the request: http or https
	addr   string   // host:port of the request
	host   string   // host without brackets, for TLS ServerName
	proxy  *url.URL // nil for direct
}

func (d destination) key() string {
	k := d.scheme + "|" + d.addr
	if d.proxy != nil {
		k += "|" + d.proxy.String()
	}
	return k
}

func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(trimBrackets(u.Hostname()), port)
}

// connect establishes a new connection to d within the connect budget.
func (t *Transport) connect(ctx context.Context, d destination) (*persistConn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, t.cfg.ConnectTimeout, t.budgetErr())
	defer cancel()
	dialAddr := d.addr
	if d.proxy != nil {
		if d.proxy.Scheme != "http" && d.proxy.Scheme != "https" {
			return nil, &NotDispatchedError{Stage: StageProxy, Err: fmt.Errorf("%w for a proxy %q", ErrUnsupportedScheme, d.proxy.Scheme)}
		}
		dialAddr = canonicalAddr(d.proxy)
	}
	host, port, _ := net.SplitHostPort(dialAddr)
	finish := func(ctx context.Context, cc *countingConn, progress func(Stage)) (net.Conn, Stage, error) {
		conn := net.Conn(cc)
		if d.proxy != nil {
			progress(StageProxy)
			if d.proxy.Scheme == "https" {
				tc := tls.Client(conn, t.tlsConfig(trimBrackets(d.proxy.Hostname())))
				if err := tc.HandshakeContext(ctx); err != nil {
					tc.Close()
					return nil, StageProxy, fmt.Errorf("transport: TLS handshake with proxy: %w", err)
				}
				conn = tc
			}
			if err := connectTunnel(ctx, conn, d.addr, d.proxy); err != nil {
				conn.Close()
				return nil, StageProxy, err
			}
		}
		if d.scheme == "https" {
			progress(StageTLS)
			tc := tls.Client(conn, t.tlsConfig(d.host))
			if err := tc.HandshakeContext(ctx); err != nil {
				tc.Close()
				return nil, StageTLS, fmt.Errorf("transport: TLS handshake: %w", err)
			}
			conn = tc
		}
		return &tunnelConn{Conn: conn, raw: cc}, "", nil
	}
	c, err := t.race(ctx, "tcp", host, port, finish)
	if err != nil {
		return nil, err
	}
	tc := c.(*tunnelConn)
	return newPersistConn(tc.raw, tc.Conn), nil
}

// tunnelConn carries the finished connection and its raw counting socket
// out of the race.
type tunnelConn struct {
	net.Conn
	raw *countingConn
}

func (t *Transport) tlsConfig(serverName string) *tls.Config {
	c := t.cfg.TLSConfig.Clone()
	if c.ServerName == "" {
		c.ServerName = serverName
	}
	return c
}

// maxConnectResponse bounds a proxy's answer to CONNECT.
const maxConnectResponse = 64 << 10

// connectTunnel asks the proxy on conn for a tunnel to addr. A refusal is an
// error whose message holds the proxy's status, never its URL.
func connectTunnel(ctx context.Context, conn net.Conn, addr string, proxy *url.URL) error {
	stop := h1client.AfterDone(ctx, conn)
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	var b bytes.Buffer
	b.WriteString("CONNECT " + addr + " HTTP/1.1\r\nHost: " + addr + "\r\n")
	if u := proxy.User; u != nil {
		pass, _ := u.Password()
		cred := base64.StdEncoding.EncodeToString([]byte(u.Username() + ":" + pass))
		b.WriteString("Proxy-Authorization: Basic " + cred + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := conn.Write(b.Bytes()); err != nil {
		return fmt.Errorf("transport: writing CONNECT: %w", ctxOr(ctx, err))
	}
	lim := &h1client.Limit{R: conn, Remaining: maxConnectResponse}
	br := newTunnelReader(lim)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return fmt.Errorf("transport: reading CONNECT answer: %w", ctxOr(ctx, safeerr.Unquoted(err)))
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("transport: %w", safeerr.ProxyRefused(resp.StatusCode))
	}
	if br.Buffered() > 0 {
		return errors.New("transport: proxy sent data before the tunnel was used")
	}
	conn.SetDeadline(time.Time{})
	return nil
}

func ctxOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: %v", context.Cause(ctx), err)
	}
	return err
}
