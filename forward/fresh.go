package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http/httptrace"
	"sync/atomic"
)

// Answers that came before their request.
//
// An endpoint that sends more than its answer's Content-Length leaves the
// excess on the connection. net/http notices it only when its read loop
// peeks at the idle connection, and a forward that takes the connection
// from the pool first reads the excess as the answer to an update it just
// sent: a 200 that completes an update the app never answered. The
// default client's connections (freshConn) count the writes begun on
// them and note, whenever a read returns data, how many had begun; an
// answer can arrive only on data read after its request's first write
// began, so an answer whose first byte came from older data is not the
// endpoint's answer to this forward (errStaleAnswer). The forward fails,
// to be retried, and the connection is closed.

// errStaleAnswer is a forward's failure when its answer was read from data
// that arrived before the forward was sent.
var errStaleAnswer = errors.New("the endpoint's answer was there before the update was sent (bytes left over from an earlier answer, beyond its Content-Length); the connection is closed")

// freshConn is a connection of the default client that can tell whether
// an answer is newer than a request (see errStaleAnswer).
type freshConn struct {
	net.Conn
	writes atomic.Int64 // writes begun
	readAt atomic.Int64 // writes begun when a read last returned data
}

func (c *freshConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

func (c *freshConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.readAt.Store(c.writes.Load())
	}
	return n, err
}

// dialFresh wraps dial's connections in freshConn.
func dialFresh(dial func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &freshConn{Conn: c}, nil
	}
}

// freshness checks one request's answer: withFreshness puts it in the
// request's context, and stale reports whether the answer's first byte was
// read before the request's first write began, having closed the
// connection if so.
type freshness struct {
	conn  *freshConn
	start int64 // the connection's writes when the request got it
	stale atomic.Bool
}

// withFreshness returns ctx tracing a request's connection for fr. Only
// the default client's requests carry it; a connection that is not a
// freshConn is not checked.
func withFreshness(ctx context.Context, fr *freshness) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			c := info.Conn
			if tc, ok := c.(*tls.Conn); ok {
				c = tc.NetConn()
			}
			if fc, ok := c.(*freshConn); ok {
				fr.conn, fr.start = fc, fc.writes.Load()
			}
		},
		GotFirstResponseByte: func() {
			if fr.conn != nil && fr.conn.readAt.Load() <= fr.start {
				fr.stale.Store(true)
				fr.conn.Close() // what else it holds is no answer either
			}
		},
	})
}
