package forward

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tgrelay/tgrelay/internal/h1client"
	"github.com/tgrelay/tgrelay/internal/safeerr"
)

// The default client's direct path.
//
// Most apps behind a relay listen on plain http, on loopback or a private
// network, with no proxy between. To those endpoints the default client
// sends each forward itself: the forwarding goroutine writes the request
// in one write and reads the answer, on a keep-alive connection from a
// pool of its own. net/http's Client and Transport hand each request to a
// connection's writing goroutine and the answer back from its reading
// goroutine, and wrap both in redirect, cancellation and tracing
// machinery; in bench relay that cost serve a tenth to a sixth of its CPU
// per update (BENCHMARKS.md, relay, session 21). The answer is still parsed
// by net/http's ReadResponse.
//
// An https endpoint, an endpoint a proxy from the environment applies to,
// and a Config.Client of the caller's own keep the net/http path.
//
// The request is net/http's but for Accept-Encoding: net/http asks for a
// gzip-compressed answer and decompresses it; this path does not ask, so
// an app answers plainly. What the net/http path does, this one does too:
//   - keep-alive with at most DefaultMaxIdleConnsPerHost idle connections,
//     each closed after directIdleTimeout unused;
//   - an idle connection is checked before reuse without blocking, and one
//     the endpoint closed, reset or wrote to unasked is discarded: an
//     answer there before its request is never taken for its answer (see
//     errStaleAnswer for the net/http path's check);
//   - a reused connection that fails before the socket took any byte of
//     the request is replaced by a new one and the request written there;
//     once a byte was taken the forward fails, to be retried;
//   - the timeout and the context's end bound the whole exchange, connect
//     included; a 3xx is the answer, never followed; 1xx interim answers
//     are skipped.

const (
	// directIdleTimeout closes a connection left idle this long, as
	// http.DefaultTransport's IdleConnTimeout does.
	directIdleTimeout = 90 * time.Second
	// directDialTimeout bounds a connect, as http.DefaultTransport's
	// dialer does (the forward's timeout bounds it too).
	directDialTimeout = 30 * time.Second
	// maxAnswerHead bounds an answer's status line and header.
	maxAnswerHead = 1 << 20
	// maxKeptMessage is the largest request buffer a connection keeps for
	// its next request.
	maxKeptMessage = 256 << 10
	// defaultUserAgent is net/http's, so an app sees the same request
	// whichever path sent it.
	defaultUserAgent = "Go-http-client/1.1"
)

// errHeadTooLarge is the failure of an answer whose head exceeds
// maxAnswerHead.
var errHeadTooLarge = fmt.Errorf("the endpoint's answer head exceeds %d bytes", maxAnswerHead)

// directTarget is one endpoint the direct path sends to.
type directTarget struct {
	pool *directPool
	host string // the Host header
	uri  string // the request target: path and query
}

// newDirectTarget returns the direct path to u, or nil when u keeps the
// net/http path: not plain http, or a proxy from the environment applies
// to it. pools holds the pools made so far by address, so two targets on
// one host share their connections.
func newDirectTarget(u *url.URL, pools map[string]*directPool) *directTarget {
	if u.Scheme != "http" || strings.Contains(u.Host, "%") {
		return nil // https, or an IPv6 zone, which net/http keeps out of Host
	}
	if p, err := http.ProxyFromEnvironment(&http.Request{URL: u}); err != nil || p != nil {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	pool := pools[addr]
	if pool == nil {
		pool = newDirectPool(addr, DefaultMaxIdleConnsPerHost, directIdleTimeout)
		pools[addr] = pool
	}
	return &directTarget{pool: pool, host: u.Host, uri: u.RequestURI()}
}

// directPool is the idle connections to one address: a pool that closes
// them once idle for its timeout.
type directPool struct {
	addr string
	*h1client.Pool[*directConn]
}

func newDirectPool(addr string, maxIdle int, idleTimeout time.Duration) *directPool {
	return &directPool{addr: addr, Pool: h1client.NewPool(h1client.PoolConfig[*directConn]{
		Max:         maxIdle,
		IdleTimeout: idleTimeout,
		Usable:      (*directConn).usable,
		Close:       func(dc *directConn) { dc.conn.Close() },
		Reap:        true,
	})}
}

// directConn is one keep-alive connection, carrying one request at a time.
type directConn struct {
	conn net.Conn
	lim  h1client.Limit // the answer head's budget (maxAnswerHead)
	br   *bufio.Reader
	msg  []byte // the last request, its buffer reused
}

// unlimited lifts the head's budget once the head is read: the body's
// bound is readAnswer's.
const unlimited = 1<<63 - 1

func newDirectConn(c net.Conn) *directConn {
	dc := &directConn{conn: c}
	dc.lim.R = c
	dc.br = bufio.NewReaderSize(&dc.lim, 4096)
	return dc
}

// usable reports whether an idle connection can carry a request: nothing
// is waiting in its buffer or its socket, and the endpoint has not closed
// it.
func (dc *directConn) usable() bool {
	return dc.br.Buffered() == 0 && !h1client.Closed(dc.conn)
}

// put returns dc to the pool, without a request buffer too large to keep.
func (p *directPool) put(dc *directConn) {
	if cap(dc.msg) > maxKeptMessage {
		dc.msg = nil
	}
	p.Put(dc)
}

// do sends one POST of body with header h and returns the answer, its
// head read; the caller reads the body and must close it. timeout bounds
// the whole exchange, as does ctx.
func (t *directTarget) do(ctx context.Context, timeout time.Duration, h http.Header, body []byte) (*http.Response, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := ctx.Err(); err != nil {
		return nil, context.Cause(ctx)
	}
	for fresh := false; ; fresh = true {
		var dc *directConn
		reused := false
		if !fresh {
			dc, reused = t.pool.Get()
		}
		if dc == nil {
			d := net.Dialer{Timeout: directDialTimeout, Deadline: deadline, KeepAlive: 30 * time.Second}
			c, err := d.DialContext(ctx, "tcp", t.pool.addr)
			if err != nil {
				return nil, t.failure(ctx, timeout, err)
			}
			dc = newDirectConn(c)
		}
		resp, written, err := t.exchange(ctx, dc, deadline, h, body)
		if err == nil {
			return resp, nil
		}
		dc.conn.Close()
		if written == 0 && reused && ctx.Err() == nil && time.Now().Before(deadline) && !errors.Is(err, h1client.ErrInvalidHeader) {
			continue // nothing of it reached a stale connection: a new one
		}
		return nil, t.failure(ctx, timeout, err)
	}
}

// failure words err, an exchange's failure: the context's cause when it
// ended, and context.DeadlineExceeded when the timeout struck, as the
// net/http path reports them.
func (t *directTarget) failure(ctx context.Context, timeout time.Duration, err error) error {
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w: no answer within the forward's timeout of %v", context.DeadlineExceeded, timeout)
	}
	return err
}

// exchange writes the request on dc and reads the answer's head. written
// is how many bytes of the request the socket took.
func (t *directTarget) exchange(ctx context.Context, dc *directConn, deadline time.Time, h http.Header, body []byte) (*http.Response, int, error) {
	msg, err := appendRequest(dc.msg[:0], t.host, t.uri, h, body)
	if err != nil {
		return nil, 0, err
	}
	dc.msg = msg
	dc.conn.SetDeadline(deadline)
	stop := h1client.AfterDone(ctx, dc.conn)
	written, err := dc.conn.Write(msg)
	var resp *http.Response
	if err == nil {
		dc.lim.Remaining, dc.lim.Hit = maxAnswerHead, false
		resp, err = h1client.ReadHead(dc.br, nil)
		if dc.lim.Hit {
			err = errHeadTooLarge
		} else if err != nil {
			err = safeerr.Unquoted(err)
		}
		dc.lim.Remaining = unlimited
	}
	if err != nil {
		stop()
		return nil, written, err
	}
	resp.Body = &directBody{body: resp.Body, dc: dc, pool: t.pool, stop: stop, keep: !resp.Close}
	return resp, written, nil
}

// appendRequest appends the request line, header and body of a POST to b.
// Every header name and value is checked as net/http checks them, and a
// bad one is an error that quotes neither (a value may be a secret).
func appendRequest(b []byte, host, uri string, h http.Header, body []byte) ([]byte, error) {
	b = append(b, "POST "...)
	b = append(b, uri...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n"...)
	if _, ok := h["User-Agent"]; !ok {
		b = append(b, "User-Agent: "+defaultUserAgent+"\r\n"...)
	}
	for k, vs := range h {
		switch k {
		case "Host", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // the forward's own, as on net/http's path
		}
		if err := h1client.CheckHeader(k, vs); err != nil {
			return nil, err
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	b = append(b, "\r\n"...)
	return append(b, body...), nil
}

// directBody is an answer's body on the direct path. Closing it returns
// its connection to the pool when the answer ended cleanly and nothing
// follows it, and closes the connection otherwise.
type directBody struct {
	body io.ReadCloser
	dc   *directConn
	pool *directPool
	stop func() bool // ends the context's watch; false if it had fired
	keep bool        // the answer lets the connection carry another request
	eof  bool
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *directBody) Close() error {
	dc := b.dc
	if dc == nil {
		return nil
	}
	b.dc = nil
	if !b.eof && b.keep {
		// A body read to its length ends without another read from the
		// socket; look without waiting, so an answer longer than its
		// reader wanted is dropped with its connection, never drained.
		dc.conn.SetReadDeadline(h1client.Past)
		var one [1]byte
		if n, err := b.body.Read(one[:]); n == 0 && err == io.EOF {
			b.eof = true
		}
	}
	live := b.stop()
	if live && b.eof && b.keep && dc.br.Buffered() == 0 {
		dc.conn.SetDeadline(time.Time{})
		b.pool.put(dc)
		return nil
	}
	return dc.conn.Close()
}
