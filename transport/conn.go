package transport

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/tgrelay/tgrelay/internal/h1client"
)

// countingConn counts the bytes the kernel accepted from Write. It wraps the
// raw TCP connection, beneath TLS, so a request's first byte is the first
// byte the socket took: the counter is the proof of the dispatch boundary.
type countingConn struct {
	net.Conn
	written atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// persistConn is one HTTP/1.1 connection. It carries at most one request at
// a time: it is either owned by one RoundTrip or idle in the pool.
type persistConn struct {
	raw  *countingConn // raw TCP, counting
	conn net.Conn      // what requests are written to (TLS or raw)
	lim  *h1client.Limit
	br   *bufio.Reader
}

func newPersistConn(raw *countingConn, conn net.Conn) *persistConn {
	lim := &h1client.Limit{R: conn}
	return &persistConn{raw: raw, conn: conn, lim: lim, br: bufio.NewReaderSize(lim, 4096)}
}

func (pc *persistConn) close() { pc.conn.Close() }

// usable reports whether an idle connection can carry a request: the peer
// has neither closed it nor sent anything unsolicited.
func (pc *persistConn) usable() bool {
	if pc.br.Buffered() > 0 || h1client.Closed(pc.raw.Conn) {
		return false
	}
	if pc.conn == net.Conn(pc.raw) {
		return true
	}
	// TLS keeps what it read from the socket beyond the last answer (the
	// rest of a record, whole records) out of the socket peek's sight: an
	// answer nobody asked for may wait there, and the next request would
	// read it as its own. Look through TLS without waiting: only a read
	// that would block (a timeout, which leaves TLS usable) proves nothing
	// is there.
	pc.conn.SetReadDeadline(h1client.Past)
	_, err := pc.br.Peek(1)
	pc.conn.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// getIdle takes the most recently used idle connection for key that is
// still usable, closing the stale ones it meets.
func (t *Transport) getIdle(key string) *persistConn {
	t.mu.Lock()
	p := t.idle[key]
	t.mu.Unlock()
	if p == nil {
		return nil
	}
	pc, _ := p.Get()
	return pc
}

// putIdle returns pc to the pool, or closes it when the pool for key is
// full or keep-alive is off.
func (t *Transport) putIdle(key string, pc *persistConn) {
	if t.cfg.DisableKeepAlives {
		pc.close()
		return
	}
	t.mu.Lock()
	p := t.idle[key]
	if p == nil {
		p = h1client.NewPool(h1client.PoolConfig[*persistConn]{
			Max:         t.cfg.MaxIdleConnsPerHost,
			IdleTimeout: t.cfg.IdleConnTimeout,
			Usable:      (*persistConn).usable,
			Close:       (*persistConn).close,
			Now:         t.cfg.Test.NowFunc,
		})
		t.idle[key] = p
	}
	t.mu.Unlock()
	p.Put(pc)
}

// CloseIdleConnections closes every idle connection. Connections carrying a
// request are not affected and return to the pool afterwards.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = make(map[string]*h1client.Pool[*persistConn])
	t.mu.Unlock()
	for _, p := range idle {
		p.CloseIdle()
	}
}

// newTunnelReader reads a proxy's CONNECT answer one small buffer at a time.
func newTunnelReader(r io.Reader) *bufio.Reader { return bufio.NewReaderSize(r, 512) }
